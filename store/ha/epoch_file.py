"""The epoch file: which master epoch wrote which part of this CommitLog (RocketMQ's EpochFileCache).

One line per epoch, oldest first, after a count and a CRC of the entry lines::

    <entry count>
    <crc32 of the entry lines, decimal>
    <epoch> <start offset>
    ...

An entry says: from ``start offset`` on (up to the next entry's start, or the
log's end) the log was written by the master of ``epoch``.  Each new master
appends ``<its epoch, its max offset>``; a slave adopts its master's entries.
Written atomically (temp file, fsync, rename, directory fsync); a file that
fails its CRC is renamed aside to ``.corrupt`` and read as empty.

:func:`truncate_point` is RocketMQ's findConsistentPoint: walk the local
entries from the newest and stop at the first one the master has with the
same start; the logs agree up to the end of that epoch on both sides, so the
local log is cut at ``min(local end, master end)`` of it.
"""

from __future__ import annotations

import logging
import os
import zlib
from pathlib import Path

from ..errors import StoreError

__all__ = ["EpochFile", "EpochMismatchError", "truncate_point"]

_log = logging.getLogger(__name__)

Entry = tuple[int, int]


class EpochMismatchError(StoreError):
    """Raised when this log shares no epoch with the master's: nothing can be kept safely."""


class EpochFile:
    """``entries`` in memory, every change written through atomically."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: list[Entry] = []

    def load(self) -> list[Entry]:
        self.entries = _read(self.path)
        return self.entries

    @property
    def last_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else 0

    def start_of(self, epoch: int) -> int | None:
        return next((s for e, s in self.entries if e == epoch), None)

    def append(self, epoch: int, start: int) -> None:
        """Record that ``epoch`` starts at ``start`` (a new master); no-op when it is already the last."""
        if self.entries and self.entries[-1][0] >= epoch:
            return
        self.entries = [(e, s) for e, s in self.entries if s <= start] + [(epoch, start)]
        self._write()

    def adopt(self, master: list[Entry], max_offset: int) -> None:
        """A slave in step with its master: take the master's entries that start within this log."""
        mine = [(int(e), int(s)) for e, s in master if int(s) <= max_offset]
        if mine != self.entries:
            self.entries = mine
            self._write()

    def cut(self, offset: int) -> None:
        """The log was truncated at ``offset``: drop the entries that start after it."""
        keep = [(e, s) for e, s in self.entries if s < offset or (s == offset == 0)]
        if keep != self.entries:
            self.entries = keep
            self._write()

    def _write(self) -> None:
        lines = "".join(f"{e} {s}\n" for e, s in self.entries)
        text = f"{len(self.entries)}\n{zlib.crc32(lines.encode())}\n{lines}"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)
        fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _read(path: Path) -> list[Entry]:
    if not path.exists():
        return []
    try:
        count, crc, *rest = path.read_text().splitlines()
        lines = "".join(line + "\n" for line in rest)
        if int(count) != len(rest) or int(crc) != zlib.crc32(lines.encode()):
            raise ValueError("count or crc does not match")
        return [(int(e), int(s)) for e, s in (line.split() for line in rest)]
    except ValueError as exc:
        aside = path.with_name(path.name + ".corrupt")
        _log.error("epoch file %s is damaged (%s); moved to %s", path, exc, aside)
        os.replace(path, aside)
        return []


def truncate_point(local: list[Entry], master: list[Entry]) -> int | None:
    """Where to cut the local log so it is a prefix of the master's; None when nothing needs cutting.

    Raises EpochMismatchError when both have entries but share none (no safe point)."""
    if not local or not master:
        return None
    position = {(e, s): i for i, (e, s) in enumerate(master)}
    for i in range(len(local) - 1, -1, -1):
        j = position.get(local[i])
        if j is None:
            continue
        ends = [local[i + 1][1]] if i + 1 < len(local) else []
        ends += [master[j + 1][1]] if j + 1 < len(master) else []
        return min(ends) if ends else None
    raise EpochMismatchError(f"this log's epochs {local} share none with the master's {master}")
