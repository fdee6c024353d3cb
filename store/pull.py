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


def _outside(cq: ConsumeQueue | None, offset: int) -> GetResult | None:
    """The answer when ``offset`` is not a readable offset of the queue, else None."""
    if offset < 0:
        raise InvalidOffsetError(f"offset {offset} is negative; queue offsets start at 0")
    if cq is None:
        return GetResult(GetStatus.NO_QUEUE, [], 0, 0, 0)
    lo, hi = cq.min_offset(), cq.max_offset()
    if offset < lo:
        return GetResult(GetStatus.OFFSET_TOO_SMALL, [], lo, lo, hi)
    if offset == hi:
        return GetResult(GetStatus.NO_NEW_MESSAGE, [], offset, lo, hi)
    if offset > hi:
        return GetResult(GetStatus.OFFSET_OVERFLOW, [], hi, lo, hi)
    return None


def pull(
    commitlog: CommitLog,
    cq: ConsumeQueue | None,
    offset: int,
    max_count: int,
    tags: frozenset[str] | None,
    max_bytes: int | None,
) -> GetResult:
    outside = _outside(cq, offset)
    if outside is not None:
        return outside
    assert cq is not None
    lo, hi = cq.min_offset(), cq.max_offset()
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


def read_records(commitlog: CommitLog, phys: Iterable[int], chunk_bytes: int = 8 << 20) -> DispatchBatch:
    """The records starting at ``phys``, as columns in CommitLog order; records that are gone are left out.

    Records written by one put lie side by side, so runs of them are parsed a chunk at a
    time instead of one read per record; the reader jumps over the gaps between runs.
    """
    wanted = sorted({int(p) for p in phys})
    parts: list[DispatchBatch] = []
    i, end = 0, 0
    while i < len(wanted):
        batch, nxt = commitlog.read_batch(wanted[i], chunk_bytes)
        if batch is not None:
            rows = np.flatnonzero(np.isin(batch.phy_offsets, wanted[i:]))
            if len(rows):
                parts.append(batch.take(rows))
        if nxt <= wanted[i]:  # nothing readable there (the end of the log): the rest is gone too
            break
        end = nxt
        while i < len(wanted) and wanted[i] < nxt:
            i += 1
    return DispatchBatch.concat(parts, end)


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


def pull_batch(
    commitlog: CommitLog,
    cq: ConsumeQueue | None,
    offset: int,
    max_count: int,
    tags: frozenset[str] | None,
    max_bytes: int | None,
) -> PullBatch:
    """Like :func:`pull`, but parses the page's records with numpy into columns."""
    head = _outside(cq, offset)
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
    """Parse records at known offsets, one read per run (see CommitLog.read_spans)."""
    parts = [parse_at(buf, lo, phys[i:j] - lo, commitlog.store_host)
             for i, j, lo, buf in commitlog.read_spans(phys.tolist(), sizes.tolist()) if buf is not None]
    return DispatchBatch.concat(parts, 0) if parts else _empty()


def _empty() -> DispatchBatch:
    return DispatchBatch.concat([], 0)
