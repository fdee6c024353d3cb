"""CommitLog: the single append-only log that holds every message of every topic.

Appends happen under one writer lock per call: a whole batch is assigned its
queue offsets, physical offsets and store timestamp, encoded, and copied into
the mapped segment(s) in one go.  A record never spans two segments; when the
next record would not fit (with room left for an 8-byte BLANK), the tail gets
a BLANK record and the writer rolls to a new segment.

A slave writes with :meth:`CommitLog.append_replicated` instead: raw bytes
from its master land at the same physical offsets after the same checks
recovery makes (magic, lengths, claimed offset, body CRC), whole records
only, so a torn or partial tail is never written and never served.
"""

from __future__ import annotations

import threading
from bisect import bisect_right
from itertools import accumulate
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from . import codec
from .columns import ColumnBatch
from .errors import CorruptRecordError, DamagedMessageError, InvalidOffsetError, MessageNotFoundError
from .mapped_file import MappedFile
from .mapped_file_queue import MappedFileQueue
from .dispatch import DispatchBatch
from .message import StoredMessage, SysFlag
from .quarantine import Quarantine, QuarantinedRecord
from .scanner import ScanStop, scan_chunk

__all__ = ["CommitLog", "AppendResult"]

_SPAN = 16 << 20  # one read covers at most this much of a segment
_HIDDEN_STATES = (int(SysFlag.TRANSACTION_PREPARED), int(SysFlag.TRANSACTION_ROLLBACK))


@dataclass(slots=True)
class AppendResult:
    phy_offsets: list[int] | np.ndarray  # an int64 array for a ColumnBatch
    queue_offsets: list[int] | np.ndarray
    store_timestamp: int
    end_offset: int  # log offset just past the batch


_SCRATCH_BYTES = 4 << 20  # a larger batch is encoded into a buffer of its own


class RemoteSegments(Protocol):
    """Segments no longer on the local disk (``store.tiered.RemoteLog``): found by offset, read like MappedFiles."""

    def find(self, offset: int) -> Any: ...

    def min_offset(self) -> int | None: ...


class CommitLog:
    def __init__(self, directory: Path, segment_size: int, store_host: str, verify_crc: bool = True) -> None:
        self.queue = MappedFileQueue(directory, segment_size)
        self.quarantine = Quarantine(directory.parent / "quarantine")  # damaged records kept by recovery
        self.verify_crc = verify_crc  # pulls check every record's body CRC
        self.store_host = codec.encode_host(store_host)
        self.write_lock = threading.Lock()
        # column batches of equal-size records are encoded here under write_lock, then copied into the
        # segment: no fresh pages (page faults) per batch
        self._scratch = np.empty(_SCRATCH_BYTES, np.uint8)
        # (topic, queue id) -> next queue offset; rebuilt from ConsumeQueues at start.
        self.topic_queue_table: dict[tuple[str, int], int] = {}
        self.on_append: Callable[[int], None] = lambda end: None
        self.remote: RemoteSegments | None = None  # set by tiered storage before the store starts

    # -- offsets ---------------------------------------------------------
    def min_offset(self) -> int:
        low = self.remote.min_offset() if self.remote is not None else None
        return self.queue.min_offset() if low is None else low

    def find_segment(self, offset: int) -> Any:
        """The local segment holding ``offset``, else the remote one (tiered storage), else None."""
        seg = self.queue.find(offset)
        if seg is None and self.remote is not None:
            return self.remote.find(offset)
        return seg

    def max_offset(self) -> int:
        return self.queue.max_offset()

    # -- write -----------------------------------------------------------
    def append(self, batch: codec.PreparedBatch | ColumnBatch) -> AppendResult:
        n = len(batch)
        columns = isinstance(batch, ColumnBatch)
        # ends[i]: bytes from the batch's start to the end of record i (a column batch has them as an array)
        ends: list[int] | np.ndarray = batch.ends if isinstance(batch, ColumnBatch) else list(accumulate(batch.sizes))
        with self.write_lock:
            if self.queue.last() is None:
                self.queue.writable()
            # DiskFullError before anything is written or any queue offset is taken
            self.queue.reserve(int(ends[-1]) + codec.MIN_BLANK, self._new_segments(ends))
            now = int(time.time() * 1000)
            qoffs = self._assign_queue_offsets(batch)
            phys: list[int] | np.ndarray = np.empty(n, np.int64) if columns else [0] * n
            lo = 0
            while lo < n:
                lo = self._append_some(batch, ends, lo, qoffs, phys, now)
            end = self.queue.max_offset()
        self.on_append(end)
        return AppendResult(phys, qoffs, now, end)

    def _new_segments(self, ends: list[int] | np.ndarray) -> int:
        """How many new segments appending records ending at ``ends`` rolls into (as _append_some fills them)."""
        seg = self.queue.last()
        if seg is None:
            return 0
        room, cap = seg.remaining - codec.MIN_BLANK, self.queue.segment_size - codec.MIN_BLANK
        if ends[-1] <= room:
            return 0
        base, done, count = 0, 0, 0
        while True:
            done = bisect_right(ends, base + room, lo=done)
            if done == len(ends) or count > len(ends):  # (every record fits an empty segment)
                return count
            count += 1
            base, room = (int(ends[done - 1]) if done else 0), cap

    def _assign_queue_offsets(self, batch: codec.PreparedBatch | ColumnBatch) -> list[int] | np.ndarray:
        """Next offsets per (topic, queue); hidden half messages take none (offset 0)."""
        table = self.topic_queue_table
        if isinstance(batch, ColumnBatch):
            key = (batch.topic, batch.queue_id)
            base = table.get(key, 0)
            table[key] = base + len(batch)
            return np.arange(base, base + len(batch), dtype=np.int64)
        if batch.uniform:
            key = (batch.topics[0], batch.rows[0][0])
            base = table.get(key, 0)
            table[key] = base + len(batch)
            return list(range(base, base + len(batch)))
        qoffs = [0] * len(batch)
        for i, (topic, row) in enumerate(zip(batch.topics, batch.rows)):
            if row[2] & 0xC not in _HIDDEN_STATES:
                key = (topic, row[0])
                qoffs[i] = nxt = table.get(key, 0)
                table[key] = nxt + 1
        return qoffs

    def _append_some(self, batch: codec.PreparedBatch | ColumnBatch, ends: list[int] | np.ndarray, lo: int,
                     qoffs: list[int] | np.ndarray, phys: list[int] | np.ndarray, now: int) -> int:
        """Append as many messages from ``lo`` as fit the current segment."""
        seg = self.queue.writable()
        room = seg.remaining - codec.MIN_BLANK
        base = int(ends[lo - 1]) if lo else 0
        hi = len(ends) if ends[-1] - base <= room else bisect_right(ends, base + room, lo=lo)
        if hi == lo:
            seg.append(codec.encode_blank(seg.remaining))
            seg.wrote = seg.size  # the BLANK covers the rest of the segment
            return lo
        start = seg.start_offset + seg.wrote - base  # record i starts at start + ends[i - 1]
        if isinstance(batch, ColumnBatch):
            phys[lo:hi] = ends[lo:hi] - batch.sizes[lo:hi] + start
            data: bytes | memoryview = batch.encode(lo, hi, phys[lo:hi], qoffs[lo:hi], now,  # type: ignore[arg-type]
                                                    self.store_host, self._scratch)
        else:
            phys[lo:hi] = [start + base, *(start + e for e in ends[lo:hi - 1])]
            data = codec.encode_batch(batch, lo, hi, phys[lo:hi], qoffs[lo:hi], now,  # type: ignore[arg-type]
                                      self.store_host)
        seg.append(data)
        return hi

    # -- replicated write (slave) -------------------------------------------
    def append_replicated(self, phy_offset: int, data: bytes) -> int:
        """Write the master's raw CommitLog bytes ``data`` found at ``phy_offset``.

        ``phy_offset`` must be this log's max offset (a segment start when the log is
        empty).  Only whole records that pass their checks are written; a partial record
        at the end is left for the caller to send again with the rest.  A BLANK ends
        the segment: the rest of ``data`` is its filler.  Returns how many bytes of
        ``data`` were consumed.  Raises InvalidOffsetError when ``phy_offset`` does not
        continue the log, CorruptRecordError when a record fails a check or does not
        fit the segment (the master uses another ``commitlog_segment_bytes``).
        """
        with self.write_lock:
            seg = self._replica_segment(phy_offset)
            pos = phy_offset - seg.start_offset
            if pos + len(data) > seg.size:
                raise CorruptRecordError(f"{len(data)} replicated bytes at {phy_offset} run past the end of segment "
                                         f"{seg.start_offset}; is commitlog_segment_bytes ({seg.size}) the master's?")
            res = scan_chunk(data, phy_offset, check_crc=True, store_host=self.store_host)
            if res.stop is ScanStop.INVALID:
                raise CorruptRecordError(f"replicated record at {phy_offset + res.consumed} is invalid: {res.reason}")
            used = res.consumed
            if pos + used > seg.size - codec.MIN_BLANK:
                raise CorruptRecordError(f"replicated records at {phy_offset} leave no room for a BLANK in segment "
                                         f"{seg.start_offset}; is commitlog_segment_bytes ({seg.size}) the master's?")
            if used:
                seg.append(data[:used])
                self._follow_queue_offsets(res.batch)
            if res.stop is ScanStop.BLANK:
                self._replica_blank(seg, data[used : used + 8])
                used = len(data)
            end = self.queue.max_offset()
        if used:
            self.on_append(end)
        return used

    def append_quarantined(self, phy_offset: int, data: bytes, record: QuarantinedRecord) -> None:
        """Write a record the master quarantined, its bytes as they are (unchecked: they are damaged), and
        quarantine the same span here, so the offsets after it stay the master's and reads of it answer
        CORRUPT_MESSAGE.  Raises InvalidOffsetError/CorruptRecordError when it does not continue this log."""
        if record.phy_offset != phy_offset or record.size != len(data) or not data:
            raise CorruptRecordError(f"the quarantined span at {phy_offset} ({len(data)} bytes) is not the one "
                                     f"named ({record.phy_offset}, {record.size} bytes)")
        with self.write_lock:
            seg = self._replica_segment(phy_offset)
            if phy_offset - seg.start_offset + len(data) > seg.size - codec.MIN_BLANK:
                raise CorruptRecordError(f"the quarantined span at {phy_offset} runs past segment {seg.start_offset}")
            self.quarantine.add(record)  # before the bytes: the reput finds it listed when it gets there
            self.quarantine.save()
            seg.append(data)
            if record.topic is not None and record.queue_id is not None and record.queue_offset is not None:
                key = (record.topic, record.queue_id)
                self.topic_queue_table[key] = max(self.topic_queue_table.get(key, 0), record.queue_offset + 1)
            end = self.queue.max_offset()
        self.on_append(end)

    def _replica_segment(self, phy_offset: int) -> MappedFile:
        if self.queue.last() is None:
            if phy_offset % self.queue.segment_size:
                raise InvalidOffsetError(f"replication into an empty CommitLog must start at a segment boundary; "
                                         f"{phy_offset} is not a multiple of commitlog_segment_bytes "
                                         f"({self.queue.segment_size}); is it the master's?")
            return self.queue.writable(phy_offset)
        if phy_offset != self.max_offset():
            raise InvalidOffsetError(f"replicated bytes at {phy_offset} do not continue this CommitLog, "
                                     f"which ends at {self.max_offset()}")
        return self.queue.writable()

    @staticmethod
    def _replica_blank(seg: MappedFile, head: bytes) -> None:
        """Close the segment with the master's BLANK, which must cover exactly the rest of it."""
        total = int.from_bytes(head[:4], "big")
        if total != seg.remaining:
            raise CorruptRecordError(f"the master's BLANK at {seg.start_offset + seg.wrote} covers {total} bytes but "
                                     f"{seg.remaining} are left in the segment; is commitlog_segment_bytes "
                                     f"({seg.size}) the master's?")
        seg.append(codec.encode_blank(total))
        seg.wrote = seg.size

    def _follow_queue_offsets(self, batch: DispatchBatch) -> None:
        """Next queue offsets follow the replicated records, so a promoted slave continues them."""
        state = batch.sys_flags & 0xC
        shown = np.flatnonzero(~np.isin(state, _HIDDEN_STATES))
        table = self.topic_queue_table
        qids, qoffs = batch.queue_ids.tolist(), batch.queue_offsets.tolist()
        for i in shown.tolist():
            key = (batch.topics[i], qids[i])
            if qoffs[i] >= table.get(key, 0):
                table[key] = qoffs[i] + 1

    # -- read ------------------------------------------------------------
    def read_message(self, phy_offset: int, size: int | None = None) -> StoredMessage:
        """The message at ``phy_offset``, CRC checked.  MessageNotFoundError when no record starts there,
        DamagedMessageError when one does (its magic code or its PHYSICAL_OFFSET says so) but fails a check."""
        seg = self.find_segment(phy_offset)
        if seg is None:
            raise MessageNotFoundError(f"no CommitLog segment holds offset {phy_offset}")
        pos = phy_offset - seg.start_offset
        try:
            data = seg.read(pos, min(codec.HEADER_SIZE, max(0, seg.wrote - pos)))
            size = size if size is not None else (int.from_bytes(data[:4], "big") if len(data) >= 4 else 0)
            if 0 < size and pos + size <= seg.wrote:
                data = seg.read(pos, size)
        except ValueError as exc:  # segment closed by retention meanwhile
            raise MessageNotFoundError(f"CommitLog offset {phy_offset} was deleted") from exc
        try:
            return codec.decode_record(data, 0, phy_offset)
        except CorruptRecordError as exc:
            head = codec.HEADER.unpack_from(data.ljust(codec.HEADER_SIZE, b"\0"))
            if head[1] != codec.MESSAGE_MAGIC and head[6] != phy_offset:  # no record starts here
                raise MessageNotFoundError(f"no message at CommitLog offset {phy_offset}: {exc}") from exc
            raise DamagedMessageError(f"the record at CommitLog offset {phy_offset} is damaged: {exc}") from exc

    def read_spans(self, phys: list[int] | np.ndarray,
                   sizes: list[int] | np.ndarray) -> Iterator[tuple[int, int, int, bytes | None]]:
        """Group records (ascending offsets) into runs read with one copy each.

        Yields ``(i, j, lo, buf)``: records ``i:j`` lie in ``buf``, which starts at
        log offset ``lo``; ``buf`` is None where the records are gone.  A run
        stays inside one segment and spans at most ``_SPAN`` bytes.  How far a
        run reaches is found with one array pass per run, not a step per record.
        """
        starts = np.asarray(phys, np.int64)
        ends = starts + np.asarray(sizes, np.int64)
        i, n = 0, len(starts)
        while i < n:
            first = int(starts[i])
            seg = self.find_segment(first)
            j = i
            if seg is not None:
                end = min(seg.start_offset + seg.wrote, first + _SPAN)
                k = i + int(np.searchsorted(starts[i:], end))  # no record from k on starts inside
                inside = (starts[i:k] >= seg.start_offset) & (ends[i:k] <= end)
                j = i + (int(inside.argmin()) if not inside.all() else k - i)
            if j == i:
                yield i, i + 1, first, None
                i += 1
                continue
            assert seg is not None
            hi = int(ends[i:j].max())
            try:
                buf: bytes | None = seg.read(first - seg.start_offset, hi - first)
            except ValueError:  # deleted by retention meanwhile
                buf = None
            yield i, j, first, buf
            i = j

    def read_messages(self, phys: list[int], sizes: list[int], *,
                      check_crc: bool = True) -> list[StoredMessage | CorruptRecordError | None]:
        """Read many records (ascending offsets): the message, None where it is gone (retention),
        or the CorruptRecordError that says why the record there fails its checks."""
        out: list[StoredMessage | CorruptRecordError | None] = []
        for i, j, lo, buf in self.read_spans(phys, sizes):
            for p, z in zip(phys[i:j], sizes[i:j]):
                if buf is None:
                    out.append(None if p < self.min_offset() else CorruptRecordError(
                        f"the unit's size {z} does not fit the CommitLog at {p} (which ends at {self.max_offset()})"))
                    continue
                try:
                    msg = codec.decode_record(buf, p - lo, p, check_crc=check_crc)
                except CorruptRecordError as exc:
                    out.append(exc)
                    continue
                out.append(msg if msg.size == z else CorruptRecordError(
                    f"record at {p} is {msg.size} bytes but its unit says {z}"))
        return out

    def read_chunk(self, offset: int, max_bytes: int) -> bytes:
        """Bytes from ``offset`` to at most the write position of its segment."""
        seg = self.find_segment(offset)
        if seg is None:
            return b""
        pos = offset - seg.start_offset
        size = min(max_bytes, seg.wrote - pos)
        return seg.read(pos, size) if size > 0 else b""

    def read_batch(self, start: int, max_bytes: int, check_crc: bool = False) -> tuple[DispatchBatch | None, int]:
        """Parse records from ``start``; returns (batch or None, the next offset).

        Jumps over BLANK fillers, deleted segments and quarantined records (a batch
        ends before one); raises CorruptRecordError on another invalid record below
        the write position.
        """
        if start < self.min_offset():
            return None, self.min_offset()
        damaged = self.quarantine.covering(start)
        if damaged is not None:
            return None, damaged.end
        stop = self.quarantine.next_start(start)
        max_bytes = max_bytes if stop is None else min(max_bytes, stop - start)
        chunk = self.read_chunk(start, max_bytes)
        if not chunk:
            return None, self.next_segment_offset(start) if start < self.max_offset() else start
        result = scan_chunk(chunk, start, check_crc=check_crc, store_host=self.store_host)
        if result.stop is ScanStop.SHORT and result.consumed == 0:
            total = int.from_bytes(chunk[:4], "big")
            result = scan_chunk(self.read_chunk(start, total), start, check_crc=check_crc, store_host=self.store_host)
        if result.stop is ScanStop.INVALID or (result.stop is ScanStop.SHORT and result.consumed == 0):
            raise CorruptRecordError(f"invalid CommitLog record at {start + result.consumed}: {result.reason}")
        nxt = self.next_segment_offset(start) if result.stop is ScanStop.BLANK else start + result.consumed
        result.batch.end_offset = nxt  # a BLANK filler counts as covered
        return (result.batch if len(result.batch) else None), nxt

    def next_segment_offset(self, offset: int) -> int:
        seg_size = self.queue.segment_size
        return offset - offset % seg_size + seg_size

    # -- lifecycle -------------------------------------------------------
    def flush(self) -> int:
        return self.queue.flush()

    def close(self) -> None:
        self.queue.close()
