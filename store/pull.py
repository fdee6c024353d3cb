"""Read paths: a page of one queue, lookups by key.

A pull walks ConsumeQueue units from the requested offset, filters on the
tag code stored in each unit (then on the tag itself, since codes can
collide), and reads the records from the CommitLog.  Units whose record is
gone (retention) are skipped.  Status and corrected offsets follow
RocketMQ's GetMessageStatus.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from . import codec
from .commitlog import CommitLog
from .consume_queue import ConsumeQueue
from .errors import InvalidOffsetError, MessageNotFoundError
from .dispatch import DispatchBatch
from .message import GetResult, GetStatus, StoredMessage
from .scanner import parse_at

__all__ = ["pull", "pull_batch", "PullBatch", "read_many", "MAX_UNITS_EXAMINED"]

# A filtered pull stops after looking at this many units, matches or not.
MAX_UNITS_EXAMINED = 16_384


def _status_only(status: GetStatus, nxt: int, lo: int, hi: int) -> GetResult:
    return GetResult(status, [], nxt, lo, hi)


def pull(
    commitlog: CommitLog,
    cq: ConsumeQueue | None,
    offset: int,
    max_count: int,
    tags: frozenset[str] | None,
    max_bytes: int | None,
) -> GetResult:
    if offset < 0:
        raise InvalidOffsetError(f"offset {offset} is negative; queue offsets start at 0")
    if cq is None:
        return _status_only(GetStatus.NO_QUEUE, 0, 0, 0)
    lo, hi = cq.min_offset(), cq.max_offset()
    if offset < lo:
        return _status_only(GetStatus.OFFSET_TOO_SMALL, lo, lo, hi)
    if offset == hi:
        return _status_only(GetStatus.NO_NEW_MESSAGE, offset, lo, hi)
    if offset > hi:
        return _status_only(GetStatus.OFFSET_OVERFLOW, hi, lo, hi)
    codes = frozenset(codec.tag_code(t) for t in tags) if tags else None
    messages, examined = _collect(commitlog, cq, offset, max(1, max_count), codes, tags, max_bytes, hi)
    status = GetStatus.FOUND if messages else GetStatus.NO_MATCHED_MESSAGE
    return GetResult(status, messages, offset + examined, lo, hi)


def _collect(
    commitlog: CommitLog,
    cq: ConsumeQueue,
    offset: int,
    max_count: int,
    codes: frozenset[int] | None,
    tags: frozenset[str] | None,
    max_bytes: int | None,
    hi: int,
) -> tuple[list[StoredMessage], int]:
    """Walk units from ``offset``; returns the messages and how many units were examined."""
    out: list[StoredMessage] = []
    pos = offset
    budget = max_bytes if max_bytes is not None else 1 << 62
    limit = min(hi, offset + (max_count if codes is None else MAX_UNITS_EXAMINED))
    while pos < limit and len(out) < max_count:
        units = cq.read_units(pos, limit - pos)
        if not len(units):
            break
        phys, sizes, tag_codes = units["phy"].tolist(), units["size"].tolist(), units["tag"].tolist()
        take = len(phys)
        if codes is not None:
            picked = [k for k, c in enumerate(tag_codes) if c in codes]
        else:
            picked = list(range(take))
        picked = picked[: max_count - len(out)]
        if len(picked) == max_count - len(out) and picked:
            take = picked[-1] + 1  # stop right after the last message taken
        msgs = commitlog.read_messages([phys[k] for k in picked], [sizes[k] for k in picked])
        for k, msg in zip(picked, msgs):
            if msg is None or msg.topic != cq.topic or msg.queue_id != cq.queue_id:
                continue  # gone (retention), or a unit damaged by a power loss
            if tags is not None and msg.tags not in tags:
                continue  # a tag-code collision
            if out and msg.size > budget:
                return out, k + pos - offset
            budget -= msg.size
            out.append(msg)
        pos += take
    return out, pos - offset


def read_many(commitlog: CommitLog, phys: Iterable[int]) -> list[StoredMessage]:
    out = []
    for phy in phys:
        try:
            out.append(commitlog.read_message(int(phy)))
        except MessageNotFoundError:
            continue
    return out



@dataclass(frozen=True, slots=True)
class PullBatch:
    """A page of one queue as columns (see DispatchBatch): the fast path for Arrow pulls."""

    status: GetStatus
    batch: DispatchBatch
    next_offset: int
    min_offset: int
    max_offset: int


_EMPTY_UNITS = np.empty(0, np.int64)
_SPAN = 16 << 20


def pull_batch(
    commitlog: CommitLog,
    cq: ConsumeQueue | None,
    offset: int,
    max_count: int,
    tags: frozenset[str] | None,
    max_bytes: int | None,
) -> PullBatch:
    """Like :func:`pull`, but parses the page's records with numpy into columns."""
    head = pull(commitlog, cq, offset, 0, tags, max_bytes) if cq is None or not (
        cq.min_offset() <= offset < cq.max_offset()) else None
    if head is not None:
        return PullBatch(head.status, _empty(), head.next_offset, head.min_offset, head.max_offset)
    assert cq is not None
    lo, hi = cq.min_offset(), cq.max_offset()
    limit = min(hi, offset + (max_count if not tags else MAX_UNITS_EXAMINED))
    units = _read_units(cq, offset, limit)
    picked = np.arange(len(units))
    if tags:
        codes = np.array([codec.tag_code(t) for t in tags], np.int64)
        picked = np.flatnonzero(np.isin(units["tag"].astype(np.int64), codes))
    picked = picked[: max(1, max_count)]
    examined = int(picked[-1]) + 1 if len(picked) == max(1, max_count) else len(units)
    batch = _read_columns(commitlog, units["phy"][picked].astype(np.int64), units["size"][picked].astype(np.int64))
    keep = np.array([t == cq.topic for t in batch.topics], bool) & (batch.queue_ids == cq.queue_id)
    if tags:
        keep &= np.array([t in tags for t in batch.tags], bool)
    if max_bytes is not None and len(batch):
        fits = np.cumsum(np.where(keep, batch.sizes, 0)) <= max_bytes
        fits[0] = True
        if not fits.all():
            cut = int(np.flatnonzero(~fits)[0])
            keep[cut:] = False
            examined = int(batch.queue_offsets[cut]) - offset
    if not keep.all():
        batch = batch.take(np.flatnonzero(keep))
    status = GetStatus.FOUND if len(batch) else GetStatus.NO_MATCHED_MESSAGE
    return PullBatch(status, batch, offset + examined, lo, hi)


def _read_units(cq: ConsumeQueue, offset: int, limit: int) -> np.ndarray:
    parts, pos = [], offset
    while pos < limit:
        units = cq.read_units(pos, limit - pos)
        if not len(units):
            break
        parts.append(units)
        pos += len(units)
    return np.concatenate(parts) if len(parts) > 1 else (parts[0] if parts else cq.read_units(0, 0))


def _read_columns(commitlog: CommitLog, phys: np.ndarray, sizes: np.ndarray) -> DispatchBatch:
    """Parse records at known offsets, one read per run inside a segment (and a bounded span)."""
    parts: list[DispatchBatch] = []
    i, n = 0, len(phys)
    while i < n:
        seg = commitlog.queue.find(int(phys[i]))
        if seg is None:
            i += 1
            continue
        seg_end = seg.start_offset + seg.wrote
        ends = phys[i:] + sizes[i:]
        j = i + int(np.searchsorted(np.maximum.accumulate(ends) > min(seg_end, int(phys[i]) + _SPAN), True))
        j = max(j, i + 1) if ends[0] <= seg_end else i
        if j == i:
            i += 1
            continue
        lo, hi = int(phys[i]), int(ends[: j - i].max())
        try:
            buf = seg.read(lo - seg.start_offset, hi - lo)
        except ValueError:  # deleted by retention meanwhile
            i = j
            continue
        parts.append(parse_at(buf, lo, phys[i:j] - lo, commitlog.store_host))
        i = j
    return DispatchBatch.concat(parts, 0) if parts else _empty()


def _empty() -> DispatchBatch:
    return DispatchBatch.concat([], 0)
