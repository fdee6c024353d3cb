"""MappedFileQueue: an ordered run of equal-size segments forming one log.

::

    dir/00000000000000000000   offsets [0, S)
    dir/00000000000001048576   offsets [S, 2S)
    dir/00000000000002097152   offsets [2S, 3S)   <- last: the writer appends here

Offsets are log-wide; the segment holding offset ``o`` is found by
arithmetic on the first segment's start.  Segments are created on demand,
deleted from the front (retention) and truncated from the back (recovery).
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from .mapped_file import MappedFile, segment_name

__all__ = ["MappedFileQueue"]

_log = logging.getLogger(__name__)


class MappedFileQueue:
    def __init__(self, directory: Path, segment_size: int) -> None:
        self.directory = directory
        self.segment_size = segment_size
        self._files: list[MappedFile] = []
        self._spare: list[MappedFile] = []  # created ahead by reserve(), not yet part of the log
        self._lock = threading.Lock()  # guards the list, not the bytes

    def load(self) -> None:
        """Map every segment on disk; positions are set later by recovery."""
        self.directory.mkdir(parents=True, exist_ok=True)
        names = sorted(p for p in self.directory.iterdir() if p.name.isdigit() and len(p.name) == 20)
        files: list[MappedFile] = []
        for path in names:
            if files and int(path.name) != files[-1].end_offset:
                _log.warning("segment %s does not follow %s; ignoring it and what follows", path.name, files[-1].path.name)
                break
            files.append(MappedFile(path, self.segment_size))
        for f in files:
            f.wrote = f.flushed = f.size  # provisional, until recovery
        self._files = files

    @property
    def files(self) -> list[MappedFile]:
        return list(self._files)

    def first(self) -> MappedFile | None:
        files = self._files
        return files[0] if files else None

    def last(self) -> MappedFile | None:
        files = self._files
        return files[-1] if files else None

    def min_offset(self) -> int:
        first = self.first()
        return first.start_offset if first else 0

    def max_offset(self) -> int:
        last = self.last()
        return last.start_offset + last.wrote if last else 0

    def flushed_offset(self) -> int:
        files = self._files
        for f in reversed(files):
            if f.flushed:
                return f.start_offset + f.flushed
        return files[0].start_offset if files else 0

    def writable(self, start_if_empty: int = 0) -> MappedFile:
        """The segment to append to, rolling to a new one when the last is full."""
        last = self.last()
        if last is not None and not last.is_full:
            return last
        start = last.end_offset if last is not None else start_if_empty - start_if_empty % self.segment_size
        if self._spare and self._spare[0].start_offset == start:
            new = self._spare.pop(0)
        else:
            self._drop_spares()
            new = MappedFile(self.directory / segment_name(start), self.segment_size)
        with self._lock:
            self._files = self._files + [new]
        return new

    def reserve(self, nbytes: int, count: int) -> None:
        """Hold disk blocks for the next ``nbytes`` of the last segment and create the ``count``
        segments after it (the writer rolls into them later), each with ``nbytes`` held, so a full
        disk is found before a write starts.  Raises DiskFullError, keeping what was made."""
        last = self.last()
        if last is None:
            return
        last.reserve(min(last.size, last.wrote + nbytes))
        start = last.end_offset + len(self._spare) * self.segment_size
        while len(self._spare) < count:
            self._spare.append(MappedFile(self.directory / segment_name(start), self.segment_size))
            start += self.segment_size
        for f in self._spare[:count]:
            f.reserve(min(f.size, nbytes))

    def _drop_spares(self) -> None:
        for f in self._spare:
            f.destroy()
        self._spare = []

    def find(self, offset: int) -> MappedFile | None:
        """The segment holding ``offset``, or None when it is not in the log."""
        files = self._files
        if not files or offset < files[0].start_offset:
            return None
        idx = (offset - files[0].start_offset) // self.segment_size
        if idx >= len(files):
            return None
        f = files[idx]
        return f if f.start_offset <= offset < f.end_offset else None

    def flush(self) -> int:
        """fdatasync every segment with unflushed bytes; returns the flushed offset."""
        for f in self._files:
            if f.flushed < f.wrote:
                f.flush()
        return self.flushed_offset()

    def truncate_dirty(self, offset: int) -> None:
        """Drop everything at and past ``offset`` (recovery only)."""
        self._drop_spares()
        keep: list[MappedFile] = []
        for f in self._files:
            if f.start_offset >= offset and not (f.start_offset == offset == self.min_offset()):
                f.destroy()
            else:
                keep.append(f)
                if f.start_offset <= offset < f.end_offset:
                    f.truncate_to(offset - f.start_offset)
        with self._lock:
            self._files = keep

    def delete_before(self, offset: int) -> int:
        """Delete whole segments that end at or before ``offset``; never the last."""
        with self._lock:
            doomed = [f for f in self._files[:-1] if f.end_offset <= offset]
            self._files = self._files[len(doomed) :]
        for f in doomed:
            f.destroy()
        return len(doomed)

    def detach_first(self, start: int) -> MappedFile | None:
        """Take the first segment out of the log if it starts at ``start`` and is not the last (tiered
        storage uploaded it); the caller destroys it once readers that found it are done."""
        with self._lock:
            files = self._files
            if len(files) < 2 or files[0].start_offset != start:
                return None
            self._files = files[1:]
            return files[0]

    def delete_expired(self, max_age_s: float, force: bool, limit: int = 10, below: int | None = None) -> int:
        """Delete up to ``limit`` old segments from the front; never the last, nor one reaching ``below``."""
        now = time.time()
        doomed: list[MappedFile] = []
        with self._lock:
            for f in self._files[:-1][:limit]:
                age = now - f.path.stat().st_mtime
                if (not force and age < max_age_s) or (below is not None and f.end_offset > below):
                    break
                doomed.append(f)
            self._files = self._files[len(doomed) :]
        for f in doomed:
            _log.info("retention: deleting segment %s", f.path.name)
            f.destroy()
        return len(doomed)

    def close(self) -> None:
        self._drop_spares()
        for f in self._files:
            f.close()
        self._files = []
