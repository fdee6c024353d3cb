"""Start-up recovery: find the CommitLog's valid end, then make the
ConsumeQueues and the index agree with it.

1. Scan records with CRC checks from the last safe point (the checkpoint's
   flushed offset; the first segment when there is no usable checkpoint).
   The first record that fails — torn, garbled, zeroes past the end —
   marks the end: everything from there on is truncated and never served.
2. Recover each ConsumeQueue: drop units that point past the new end.
3. Re-dispatch from the point where ConsumeQueues and index are known
   complete: the checkpoint's ``logics_flushed``, never later than the
   index's own end, and the start of the log when the consumequeue
   directory or the checkpoint is missing.  Re-dispatch is idempotent.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from .checkpoint import Checkpoint
from .commitlog import CommitLog
from .consume_queue_store import ConsumeQueueStore
from .index_service import IndexService
from .scanner import ScanStop, scan_chunk

__all__ = ["recover_commitlog", "redispatch_start", "RecoveryReport"]

_log = logging.getLogger(__name__)
_CHUNK = 16 << 20  # the most one scan reads (one buffer, reused)
_FIRST_CHUNK = 1 << 20  # the first read is small: a clean log ends just after the safe point


@dataclass(slots=True)
class RecoveryReport:
    scanned_from: int
    valid_end: int
    reason: str
    segments_dropped: int = 0  # whole segments past valid_end that were deleted


def recover_commitlog(commitlog: CommitLog, cp: Checkpoint, have_checkpoint: bool) -> RecoveryReport:
    """Scan from the safe point and truncate the log at the first bad record."""
    q = commitlog.queue
    q.load()
    tail = q.last()
    files_end = tail.end_offset if tail is not None else 0
    start = cp.commitlog_flushed if have_checkpoint else q.min_offset()
    if not q.min_offset() <= start <= files_end:
        start = q.min_offset()
    offset, reason = start, "end of segments"
    buf, want = bytearray(_CHUNK), _FIRST_CHUNK  # one buffer for every read; small reads first near the end
    while True:
        seg = q.find(offset)
        if seg is None:
            break
        pos = offset - seg.start_offset
        with memoryview(buf) as mv:
            got = seg.read_into(pos, mv[:want])
            view: bytes = mv[:got]  # type: ignore[assignment]  # (any buffer: the scan only reads it)
            res = scan_chunk(view, offset, check_crc=True, store_host=commitlog.store_host, collect=False)
        offset += res.consumed
        if res.stop is ScanStop.BLANK:
            offset = seg.end_offset
            continue
        at_seg_end = pos + got >= seg.size
        total = int.from_bytes(buf[:4], "big")
        if res.stop is ScanStop.SHORT and res.consumed == 0 and want < total <= seg.size - pos:
            want = total  # a record longer than this read: read it whole
            buf = buf if total <= len(buf) else bytearray(total)
            continue
        want = min(len(buf), want * 4)
        if res.stop is ScanStop.INVALID or (res.stop is ScanStop.SHORT and (at_seg_end or res.consumed == 0)):
            reason = res.reason or "record cut short"
            break
    dropped = sum(1 for f in q.files if f.start_offset > offset)
    q.truncate_dirty(offset)
    last = q.last()
    if last is not None:
        last.flushed = 0  # make the first flush after start cover the recovered tail
    _log.info("CommitLog recovered: scanned from %d, valid end %d (%s)", start, offset, reason)
    return RecoveryReport(start, offset, reason, dropped)


def redispatch_start(
    commitlog: CommitLog, queues: ConsumeQueueStore, index: IndexService, cp: Checkpoint, have_checkpoint: bool
) -> int:
    """The CommitLog offset from which dispatch must run again."""
    low = commitlog.min_offset()
    if queues.is_empty() or not have_checkpoint:
        return low
    start = min(cp.logics_flushed, commitlog.max_offset(), index.max_phy_offset())
    return max(start, low)
