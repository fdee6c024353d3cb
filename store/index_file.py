"""IndexFile: an on-disk hash index from key hash to CommitLog offsets.

One fixed-size, memory-mapped file per range of the CommitLog (RocketMQ's
IndexFile).  Every number is **little-endian**, so numpy views map the file
directly.  The file is sized with ``os.ftruncate`` and its blocks reserved
(``posix_fallocate``): a full disk is a DiskFullError at creation, never a SIGBUS.

::

    offset 0                   40                     40 + 4*slots
    +--------------------------+----------------------+---------------------------+
    | header (40 bytes)        | slots x 4 bytes      | entries x 20 bytes        |
    +--------------------------+----------------------+---------------------------+

    header  (HEADER = "<qqqqii")
      0  begin_timestamp   int64  ms; base of every entry's time_diff
      8  end_timestamp     int64  ms; newest store timestamp indexed
     16  begin_phy_offset  int64  CommitLog offset the file starts at
     24  end_phy_offset    int64  CommitLog offset covered so far
     32  hash_slot_count   int32  number of slots
     36  index_count       int32  next free entry; starts at 1

    slot    (SLOT = "<i")
      0  head              int32  newest entry of this slot, 0 = empty

    entry   (ENTRY = "<iqii")
      0  key_hash          int32  non-negative hash of "topic#key"
      4  phy_offset        int64  CommitLog offset of the record
     12  time_diff         int32  seconds since begin_timestamp (floor)
     16  prev_index        int32  older entry of the same slot, 0 = none

Entry 0 is never used, so 0 means "empty slot" and "end of chain".  A chain
only ever points to older entries (``prev_index < index``), which is what
bounds a walk over a garbled file.

A batch is written entries first, then ``index_count``, then the slot
heads, then ``end_*``, under the file's lock.  So a process killed
mid-batch leaves a file whose chains are whole and whose covered range is
not overstated, and a query needs no lock: it reads a slot head, then
``index_count``, and only follows links to entries written before that head.
A query that races ``close()`` gets StoreClosedError (mmap refuses reads
once closed, and ``close()`` drops the numpy views first).  ``flush()`` is
an ``fdatasync`` of the file, which on Linux covers pages written through
the mapping; it does not take that lock either.

A walk does not stop at the first entry older than the range: after a
recovery re-dispatch, a chain may hold re-indexed older records ahead of
newer ones, so time is not monotonic along a chain.

Times are stored in whole seconds (as RocketMQ does), so a time-range query
is conservative: an entry whose second overlaps ``[begin_ms, end_ms]`` is
returned even if its exact store timestamp falls just outside.  Callers that
need exact bounds check the record's store timestamp.
"""

from __future__ import annotations

import mmap
import os
import struct
import threading
from pathlib import Path

import numpy as np

from .errors import CorruptRecordError, StoreClosedError
from .mapped_file import reserve

__all__ = ["IndexFile", "HEADER", "SLOT", "ENTRY"]

HEADER = struct.Struct("<qqqqii")
SLOT = struct.Struct("<i")
ENTRY = struct.Struct("<iqii")

_ENTRY_DTYPE = np.dtype(
    [("key_hash", "<i4"), ("phy_offset", "<i8"), ("time_diff", "<i4"), ("prev_index", "<i4")]
)
_INT32_MIN = -(1 << 31)
_INT32_MAX = (1 << 31) - 1
assert HEADER.size == 40 and ENTRY.size == 20 and _ENTRY_DTYPE.itemsize == 20


def file_size(slots: int, entries: int) -> int:
    """Bytes of an index file with this geometry."""
    return HEADER.size + slots * SLOT.size + entries * ENTRY.size


class IndexFile:
    """One memory-mapped index file; use :meth:`create` or :meth:`open`."""

    def __init__(self, path: Path, fd: int, mm: mmap.mmap, header: tuple[int, ...], entries: int) -> None:
        self.path = path
        self._fd = fd
        self._mm: mmap.mmap | None = mm
        (self._begin_ts, self._end_ts, self._begin_phy, self._end_phy,
         self._slot_count, self._count) = header
        self._entry_count = entries
        self._entries_at = HEADER.size + self._slot_count * SLOT.size
        self._slots = np.frombuffer(mm, dtype="<i4", count=self._slot_count, offset=HEADER.size)
        self._entries = np.frombuffer(mm, dtype=_ENTRY_DTYPE, count=entries, offset=self._entries_at)
        self._lock = threading.Lock()  # puts and close
        self._flush_lock = threading.Lock()  # flush vs close only: a flush never blocks puts

    # ------------------------------------------------------------ lifecycle
    @classmethod
    def create(cls, path: Path, slots: int, entries: int, begin_phy_offset: int,
               begin_timestamp: int) -> IndexFile:
        """Create a new, empty index file (written to a temp name, then renamed)."""
        if slots < 1 or entries < 2:
            raise ValueError(f"index geometry needs slots >= 1 and entries >= 2, got {slots}, {entries}")
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        header = (begin_timestamp, begin_timestamp, begin_phy_offset, begin_phy_offset, slots, 1)
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.ftruncate(fd, file_size(slots, entries))
            reserve(fd, file_size(slots, entries), path)  # written anywhere: all of it, at once
            os.pwrite(fd, HEADER.pack(*header), 0)
            os.fsync(fd)
            os.rename(tmp, path)
            mm = mmap.mmap(fd, file_size(slots, entries))
        except BaseException:
            os.close(fd)
            tmp.unlink(missing_ok=True)
            raise
        return cls(path, fd, mm, header, entries)

    @classmethod
    def open(cls, path: Path) -> IndexFile:
        """Map an existing file; raise CorruptRecordError if its header is unusable."""
        path = Path(path)
        fd = os.open(path, os.O_RDWR)
        try:
            size = os.fstat(fd).st_size
            if size < HEADER.size:
                raise CorruptRecordError(f"index file {path} is {size} bytes, shorter than its header")
            header = HEADER.unpack(os.pread(fd, HEADER.size, 0))
            entries = _check_header(path, header, size)
            mm = mmap.mmap(fd, size)
        except BaseException:
            os.close(fd)
            raise
        return cls(path, fd, mm, header, entries)

    def flush(self) -> None:
        """fdatasync the file (covers pages written through the mapping); no-op once closed.

        Runs outside the put/query lock and without the GIL, so the reput
        thread keeps indexing while the flush service syncs.
        """
        with self._flush_lock:
            if self._mm is not None:
                os.fdatasync(self._fd)

    def close(self) -> None:
        """Flush, unmap and close the file; safe to call twice."""
        with self._flush_lock, self._lock:
            if self._mm is None:
                return
            mm, self._mm = self._mm, None
            del self._slots, self._entries
            mm.close()
            os.fdatasync(self._fd)
            os.close(self._fd)

    # ----------------------------------------------------------- properties
    @property
    def closed(self) -> bool:
        return self._mm is None

    @property
    def begin_timestamp(self) -> int:
        return self._begin_ts

    @property
    def end_timestamp(self) -> int:
        return self._end_ts

    @property
    def begin_phy_offset(self) -> int:
        return self._begin_phy

    @property
    def end_phy_offset(self) -> int:
        return self._end_phy

    @property
    def index_count(self) -> int:
        """Next free entry (1 when empty)."""
        return self._count

    @property
    def capacity(self) -> int:
        """Entries this file can still take."""
        return self._entry_count - self._count

    @property
    def is_full(self) -> bool:
        return self._count >= self._entry_count

    # --------------------------------------------------------------- writes
    def put_batch(self, key_hashes: np.ndarray, phy_offsets: np.ndarray,
                  store_timestamps_ms: np.ndarray) -> int:
        """Index a batch (in CommitLog order); return how many entries fit.

        Write order keeps the file consistent if the process dies anywhere in
        between: entries, index_count, slot heads, then the covered range.
        """
        with self._lock:
            mm = self._open_mm()
            n = min(len(key_hashes), self._entry_count - self._count)
            if n <= 0:
                return 0
            hashes = (np.asarray(key_hashes[:n], dtype=np.int64) & _INT32_MAX).astype(np.int32)
            phys = np.asarray(phy_offsets[:n], dtype=np.int64)
            stamps = np.asarray(store_timestamps_ms[:n], dtype=np.int64)
            first = self._count
            rows = np.empty(n, dtype=_ENTRY_DTYPE)
            rows["key_hash"] = hashes
            rows["phy_offset"] = phys
            diff = np.floor_divide(stamps - self._begin_ts, 1000)
            rows["time_diff"] = np.clip(diff, _INT32_MIN, _INT32_MAX)
            slot_of = (hashes % np.int32(self._slot_count)).astype(np.int64)  # 32-bit division: hashes < 2**31
            rows["prev_index"], head_slots, heads = self._link(slot_of, first)
            self._entries[first:first + n] = rows
            self._count = first + n
            self._write_header(mm)
            self._slots[head_slots] = heads
            self._end_ts = max(self._end_ts, int(stamps.max()))
            self._end_phy = max(self._end_phy, int(phys.max()))
            self._write_header(mm)
            return n

    def _link(self, slot_of: np.ndarray, first: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Chain new entries ``first..`` into their slots, writing nothing.

        Returns (prev_index per entry, slots to update, their new heads).
        Sorting ``slot * n + position`` groups the batch's entries per slot in
        CommitLog order (a stable sort by slot, but a plain SIMD sort of unique
        keys): each entry links to the one before it in its group, the first
        of a group to the slot's current head, and the slot takes the last.
        """
        n = len(slot_of)
        slot_sorted, order = np.divmod(np.sort(slot_of * n + np.arange(n)), n)
        index_sorted = (first + order).astype(np.int32)
        same = slot_sorted[1:] == slot_sorted[:-1]
        prev_sorted = self._slots[slot_sorted]  # current heads (a copy)
        prev_sorted[1:][same] = index_sorted[:-1][same]
        last = np.ones(n, dtype=bool)
        last[:-1] = ~same
        prev = np.empty(n, dtype=np.int32)
        prev[order] = prev_sorted
        return prev, slot_sorted[last], index_sorted[last]

    def mark_covered(self, end_phy_offset: int, end_timestamp: int | None = None) -> None:
        """Record that the CommitLog up to ``end_phy_offset`` has been indexed."""
        with self._lock:
            mm = self._open_mm()
            self._end_phy = max(self._end_phy, end_phy_offset)
            if end_timestamp is not None:
                self._end_ts = max(self._end_ts, end_timestamp)
            self._write_header(mm)

    def truncate_coverage(self, phy_offset: int) -> None:
        """Lower end_phy_offset to ``phy_offset`` (the CommitLog was cut there)."""
        with self._lock:
            mm = self._open_mm()
            self._end_phy = max(self._begin_phy, min(self._end_phy, phy_offset))
            self._write_header(mm)

    def _write_header(self, mm: mmap.mmap) -> None:
        HEADER.pack_into(mm, 0, self._begin_ts, self._end_ts, self._begin_phy,
                         self._end_phy, self._slot_count, self._count)

    def _open_mm(self) -> mmap.mmap:
        if self._mm is None:
            raise StoreClosedError(f"index file {self.path} is closed")
        return self._mm

    # ---------------------------------------------------------------- reads
    def query(self, key_hash: int, begin_ms: int, end_ms: int, max_count: int,
              seen: set[int] | None = None) -> list[int]:
        """Physical offsets of entries with this hash in the time range, newest first.

        Each offset is returned once; offsets already in ``seen`` are skipped,
        and the ones returned are added to it (a caller walking several files
        passes the same set).  Lock-free: see the module docstring.
        """
        key_hash &= _INT32_MAX
        seen = set() if seen is None else seen
        out: list[int] = []
        # Window of time_diff values whose second overlaps [begin_ms, end_ms].
        low = -((self._begin_ts - begin_ms + 999) // 1000)
        high = (end_ms - self._begin_ts) // 1000
        try:
            mm = self._open_mm()
            index = SLOT.unpack_from(mm, HEADER.size + (key_hash % self._slot_count) * SLOT.size)[0]
            count = self._count  # read after the slot: a batch raises it before its slot heads
            while 0 < index < count and len(out) < max_count:
                entry_hash, phy, diff, prev = ENTRY.unpack_from(mm, self._entries_at + index * ENTRY.size)
                if entry_hash == key_hash and low <= diff <= high and phy not in seen:
                    seen.add(phy)
                    out.append(phy)
                if prev >= index:
                    break  # garbled chain: links only ever go back, so this also bounds the walk
                index = prev
        except ValueError as exc:  # unmapped by close() in another thread
            raise StoreClosedError(f"index file {self.path} is closed") from exc
        return out

    def __repr__(self) -> str:
        return (f"IndexFile({self.path.name}, entries={self._count - 1}/{self._entry_count - 1}, "
                f"phy=[{self._begin_phy}, {self._end_phy}], ts=[{self._begin_ts}, {self._end_ts}])")


def _check_header(path: Path, header: tuple[int, ...], size: int) -> int:
    """Validate a header against the file size; return the entry count."""
    begin_ts, end_ts, begin_phy, end_phy, slots, count = header
    body = size - HEADER.size - slots * SLOT.size
    if slots < 1 or body <= 0 or body % ENTRY.size:
        raise CorruptRecordError(f"index file {path}: {slots} slots do not match size {size}")
    entries = body // ENTRY.size
    if not 1 <= count <= entries or entries < 2:
        raise CorruptRecordError(f"index file {path}: index_count {count} outside 1..{entries}")
    if begin_phy < 0 or end_phy < begin_phy or end_ts < begin_ts:
        raise CorruptRecordError(f"index file {path}: header ranges are inconsistent")
    return entries
