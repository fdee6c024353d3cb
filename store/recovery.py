"""Start-up recovery: find the CommitLog's valid end, then make the
ConsumeQueues and the index agree with it.

1. Scan records with CRC checks from the last safe point (the checkpoint's
   flushed offset; the first segment when there is no usable checkpoint, or
   when the checkpoint's offset is not a record start).  A record that
   fails its checks with a record start after it (:mod:`.resync`) is
   quarantined (:mod:`.quarantine`) and the scan goes on past it; damage
   with no record start after it in the log — torn, garbled, zeroes past
   the end — is the torn tail: truncated and never served.
2. Recover each ConsumeQueue: drop units that point past the new end.
3. Re-dispatch from the point where ConsumeQueues and index are known
   complete: the checkpoint's ``logics_flushed``, never later than the
   index's own end, and the start of the log when the consumequeue
   directory or the checkpoint is missing.  Re-dispatch is idempotent.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .checkpoint import Checkpoint
from .commitlog import CommitLog
from .consume_queue_store import ConsumeQueueStore
from .index_service import IndexService
from .mapped_file import MappedFile
from .mapped_file_queue import MappedFileQueue
from .quarantine import Quarantine, QuarantinedRecord
from .resync import describe, next_start, segment_has_start
from .scanner import ScanStop, scan_chunk

if TYPE_CHECKING:
    from .message_store import MessageStore

__all__ = ["recover_commitlog", "recover_store", "redispatch_start", "RecoveryReport"]

_log = logging.getLogger(__name__)
_CHUNK = 16 << 20  # the most one scan reads (one buffer, reused)
_FIRST_CHUNK = 1 << 20  # the first read is small: a clean log ends just after the safe point


@dataclass(slots=True)
class RecoveryReport:
    scanned_from: int
    valid_end: int
    reason: str
    segments_dropped: int = 0  # whole segments past valid_end that were deleted
    quarantined: int = 0  # damaged records found by this scan (kept, never served)


def recover_commitlog(commitlog: CommitLog, cp: Checkpoint, have_checkpoint: bool) -> RecoveryReport:
    """Scan from the safe point, quarantine damaged records, truncate the log at a torn tail."""
    q = commitlog.queue
    q.load()
    commitlog.quarantine.load()
    tail = q.last()
    files_end = tail.end_offset if tail is not None else 0
    start = cp.commitlog_flushed if have_checkpoint else q.min_offset()
    if not q.min_offset() <= start <= files_end:
        start = q.min_offset()
    found: list[QuarantinedRecord] = []
    offset, reason = _scan(q, start, found, commitlog.quarantine)
    if found and found[0].phy_offset == start != q.min_offset() and _mid_segment(q, start):
        _log.warning("the checkpoint's offset %d is not a record start; scanning the CommitLog from its start", start)
        start, found = q.min_offset(), []
        offset, reason = _scan(q, start, found, commitlog.quarantine)
    dropped = sum(1 for f in q.files if f.start_offset > offset)
    q.truncate_dirty(offset)
    last = q.last()
    if last is not None:
        last.flushed = 0  # make the first flush after start cover the recovered tail
    _keep(commitlog.quarantine, found, q.min_offset(), offset)
    _log.info("CommitLog recovered: scanned from %d, valid end %d (%s)", start, offset, reason)
    return RecoveryReport(start, offset, reason, dropped, len(found))


def _mid_segment(q: MappedFileQueue, offset: int) -> bool:
    seg = q.find(offset)
    return seg is not None and offset != seg.start_offset


def _keep(quarantine: Quarantine, found: list[QuarantinedRecord], lo: int, hi: int) -> None:
    for rec in found:
        quarantine.add(rec)
        _log.error("quarantined a damaged CommitLog record: %s; the records after it are kept, and a read of "
                   "its queue offset answers CORRUPT_MESSAGE", rec.describe())
    before = len(quarantine)
    quarantine.keep_within(lo, hi)
    if found or len(quarantine) != before:
        quarantine.save()


def _scan(q: MappedFileQueue, start: int, found: list[QuarantinedRecord], known: Quarantine) -> tuple[int, str]:
    """Scan records from ``start``; returns the valid end and why the scan stopped there.  Damaged records
    with a record start after them, or quarantined by an earlier start (``known``: the torn bytes that told
    then are cut by now), are appended to ``found`` and skipped."""
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
            res = scan_chunk(view, offset, check_crc=True, store_host=0, collect=False)
        offset += res.consumed
        if res.stop is ScanStop.BLANK:
            offset = seg.end_offset
            continue
        at_seg_end = pos + got >= seg.size
        total = int.from_bytes(buf[res.consumed:res.consumed + 4], "big") if res.consumed + 4 <= got else 0
        if res.stop is ScanStop.SHORT and res.consumed == 0 and want < total <= seg.size - pos:
            want = total  # a record longer than this read: read it whole
            buf = buf if total <= len(buf) else bytearray(total)
            continue
        want = min(len(buf), want * 4)
        if res.stop is ScanStop.INVALID or (res.stop is ScanStop.SHORT and (at_seg_end or res.consumed == 0)):
            reason = res.reason or "record cut short"
            nxt = _past_damage(q, seg, offset - seg.start_offset, reason, found, known.covering(offset))
            if nxt is None:
                break
            offset, want = nxt, _FIRST_CHUNK
    return offset, reason


def _past_damage(q: MappedFileQueue, seg: MappedFile, pos: int, reason: str, found: list[QuarantinedRecord],
                 prior: QuarantinedRecord | None) -> int | None:
    """Where the scan goes on after the damaged bytes at ``pos`` (recorded in ``found``), or None for a torn
    tail: no record starts after them in this segment nor in any later one."""
    if prior is not None and prior.phy_offset == seg.start_offset + pos and prior.end <= seg.end_offset:
        found.append(prior)
        return prior.end
    nxt = next_start(seg, pos)
    if nxt is None:
        later = [f for f in q.files if f.start_offset > seg.start_offset]
        if not any(segment_has_start(f) for f in later):
            return None
        nxt = seg.size  # the rest of this segment is unreadable; the next one starts afresh
    found.append(describe(seg, pos, nxt - pos, reason))
    return seg.start_offset + nxt


def redispatch_start(
    commitlog: CommitLog, queues: ConsumeQueueStore, index: IndexService, cp: Checkpoint, have_checkpoint: bool
) -> int:
    """The CommitLog offset from which dispatch must run again."""
    low = commitlog.min_offset()
    if queues.is_empty() or not have_checkpoint:
        return low
    start = min(cp.logics_flushed, commitlog.max_offset(), index.max_phy_offset())
    return max(start, low)


def recover_store(store: MessageStore, flush_logics: Callable[[], None]) -> dict[str, object]:
    """Start-up recovery of a whole store (see the module doc); returns what it did, for ``stats()``."""
    t0 = time.perf_counter()
    cp = store.checkpoint.load()
    report = recover_commitlog(store.commitlog, cp, store.checkpoint.loaded)
    store.queues.load_and_recover(store.commitlog.max_offset())
    store.queues.correct_min_offsets(store.commitlog.min_offset())
    store.index.load()
    store.index.delete_files_after(store.commitlog.max_offset())
    store.reput.reput_offset = redispatch_start(store.commitlog, store.queues, store.index, cp,
                                                store.checkpoint.loaded)
    redispatched = store.commitlog.max_offset() - store.reput.reput_offset
    dispatch_s = store.reput.catch_up()
    store.commitlog.topic_queue_table = store.queues.max_offsets()
    store.commitlog.flush()
    flush_logics()
    out: dict[str, object] = {
        "abnormal": store.abnormal_start, "scanned_from": report.scanned_from, "valid_end": report.valid_end,
        "stopped_at": report.reason, "segments_dropped": report.segments_dropped,
        "quarantined": report.quarantined, "redispatch_seconds": round(dispatch_s, 4),
        "redispatched_bytes": redispatched, "seconds": round(time.perf_counter() - t0, 3)}
    if store.abnormal_start:  # an operator must see this at the default log level
        _log.warning(
            "unclean shutdown detected (the abort marker was left): recovery scanned the CommitLog from "
            "offset %d, quarantined %d damaged record(s), truncated it at offset %d (%s; %d later segment(s) "
            "deleted), re-dispatched %d bytes to the queues and index, in %.3f s", report.scanned_from,
            report.quarantined, report.valid_end, report.reason, report.segments_dropped, redispatched,
            out["seconds"])
    else:
        _log.info("store recovered: %s", out)
    return out
