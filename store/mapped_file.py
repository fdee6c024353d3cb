"""MappedFile: one fixed-size, memory-mapped segment of a log.

A segment is named by the log offset of its first byte, zero-padded to 20
digits (``00000000001073741824``).  It is created sparse with ``ftruncate``
(never with large ``write()`` calls, which would make later syncs flush whole
megabytes) and mapped once.  Blocks are reserved with ``posix_fallocate``
(no data written) a few MiB ahead of the write position, so a full disk is a
DiskFullError before a write, never a SIGBUS that kills the process when a
store into the mapping finds no free block; disk use still grows with data::

    0 ........ flushed ........ wrote ...... reserved ...... size
               (fdatasync'd)    (appended)   (blocks held)

Positions are not stored in the file: recovery finds ``wrote`` by scanning
records (sizes on disk are never trusted).
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
import threading
from collections.abc import Iterator
from pathlib import Path

from .errors import DiskFullError

__all__ = ["MappedFile", "segment_name", "reserve"]

_FULL = (errno.ENOSPC, errno.EDQUOT)
_AHEAD = 4 << 20  # blocks reserved past the write position
_PREAD_MIN = 1 << 20  # reads of this size or more go through pread
_PWRITE_MIN = 64 << 10  # appends of this size or more go through pwrite


def reserve(fd: int, size: int, path: Path, start: int = 0) -> None:
    """Reserve the blocks of bytes ``[start, size)`` of ``fd``; DiskFullError when the disk is full."""
    try:
        os.posix_fallocate(fd, start, size - start)
    except OSError as exc:
        if exc.errno in _FULL:
            raise DiskFullError(f"no room on disk for {size} bytes of {path}; free disk space "
                                "(old segments go once retention runs)") from exc
        if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
            raise


def segment_name(start_offset: int) -> str:
    return f"{start_offset:020d}"


class MappedFile:
    """A memory-mapped segment; the owner serialises writers."""

    def __init__(self, path: Path, size: int) -> None:
        self.path = path
        self.size = size
        self.start_offset = int(path.name)
        existed = path.exists()
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if not existed or os.fstat(self._fd).st_size < size:
                os.ftruncate(self._fd, size)
            self._mm = mmap.mmap(self._fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(self._fd)
            if not existed:
                path.unlink(missing_ok=True)
            raise
        self.wrote = 0
        self.flushed = 0
        self.reserved = 0
        self.closed = False
        self._io_lock = threading.Lock()

    @property
    def end_offset(self) -> int:
        return self.start_offset + self.size

    @property
    def remaining(self) -> int:
        return self.size - self.wrote

    @property
    def is_full(self) -> bool:
        return self.wrote >= self.size

    def append(self, data: bytes | memoryview) -> int:
        """Copy ``data`` (bytes, or a flat byte view) at the write position; returns its file position."""
        pos = self.wrote
        end = pos + len(data)
        if end > self.size:
            raise ValueError(f"{len(data)} bytes do not fit in segment {self.path.name} at {pos}")
        if end > self.reserved:
            self.reserve(end)
        if len(data) < _PWRITE_MIN:
            self._mm[pos:end] = data
        else:  # into the page cache directly: no page fault per fresh page of the mapping (same pages)
            done = 0
            with memoryview(data) as mv:
                while done < len(data):
                    done += os.pwrite(self._fd, mv[done:], pos + done)
        self.wrote = end
        return pos

    def reserve(self, end: int) -> None:
        """Hold disk blocks for bytes up to ``end`` (and a few MiB more); DiskFullError when there are none."""
        if end <= self.reserved:
            return
        start = max(self.reserved, self.wrote - self.wrote % 4096)
        target = min(self.size, max(end, start + _AHEAD))
        reserve(self._fd, target, self.path, start)
        self.reserved = target

    def read(self, pos: int, size: int) -> bytes:
        """A copy of ``size`` bytes at file position ``pos``; ValueError once closed.

        Large reads (dispatch, recovery) use ``pread``: the same page cache the
        mapping writes to, without a page fault per page of a cold mapping.
        """
        if size < _PREAD_MIN:
            return self._mm[pos : pos + size]
        size = max(0, min(size, self.size - pos))
        with self._io_lock:  # close() waits, so the descriptor is never another file's
            if self.closed:
                raise ValueError(f"segment {self.path.name} is closed")
            return os.pread(self._fd, size, pos)

    def read_into(self, pos: int, out: bytearray | memoryview) -> int:
        """Copy up to ``len(out)`` bytes at file position ``pos`` into ``out`` (a buffer the caller reuses:
        no fresh pages per read); returns how many.  ValueError once closed."""
        size = max(0, min(len(out), self.size - pos))
        with self._io_lock, memoryview(out) as mv:
            if self.closed:
                raise ValueError(f"segment {self.path.name} is closed")
            return os.preadv(self._fd, [mv[:size]], pos) if size else 0

    def next_data(self, pos: int) -> int | None:
        """The first position at or after ``pos`` that is not in a hole of the sparse file (SEEK_DATA),
        or None when only holes follow: the unwritten rest of a segment is skipped without reading it."""
        with self._io_lock:
            if self.closed:
                raise ValueError(f"segment {self.path.name} is closed")
            try:
                found = os.lseek(self._fd, pos, os.SEEK_DATA)
            except OSError as exc:  # ENXIO: no data past pos; EINVAL: no SEEK_DATA here
                return None if exc.errno == errno.ENXIO else pos
        return found if found < self.size else None

    @contextlib.contextmanager
    def view(self, pos: int, size: int) -> Iterator[memoryview]:
        """The mapped bytes at ``pos`` without a copy, for the ``with`` block only (close() waits).

        Whatever refers to the view (numpy arrays over it) must be gone when the block ends.
        """
        with self._io_lock:
            if self.closed:
                raise ValueError(f"segment {self.path.name} is closed")
            mv = memoryview(self._mm)[pos : pos + max(0, min(size, self.size - pos))]
            try:
                yield mv
            finally:
                try:
                    mv.release()
                except BufferError:  # still referred to (an exception's frame): released when collected
                    pass

    def flush(self) -> int:
        """fdatasync what was written since the last flush; returns the new flushed position."""
        target = self.wrote
        if target > self.flushed:
            os.fdatasync(self._fd)
            self.flushed = max(self.flushed, target)  # a concurrent flush may have gone further
        return self.flushed

    def truncate_to(self, pos: int) -> None:
        """Forget everything past ``pos`` (zeroed so no stale record is ever read)."""
        if pos < self.size:
            # Shrinking drops the tail's blocks and zeroes the partial page;
            # growing back leaves a sparse hole.  Only recovery calls this,
            # before any reader can touch the mapping.
            os.ftruncate(self._fd, pos)
            os.ftruncate(self._fd, self.size)
            self.reserved = 0
        self.wrote = pos
        self.flushed = min(self.flushed, pos)

    def close(self) -> None:
        with self._io_lock:
            if self.closed:
                return
            self.closed = True
            self._mm.close()
            os.close(self._fd)

    def destroy(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)
