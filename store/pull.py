"""Read paths: a page of one queue, lookups by key.

A pull walks ConsumeQueue units from the requested offset, filters on the
tag code stored in each unit (then on the tag itself, since codes can
collide), and reads the records from the CommitLog.  Units whose record is
gone (retention) are skipped.  Status and corrected offsets follow
RocketMQ's GetMessageStatus.
"""

from __future__ import annotations

from collections.abc import Iterable

from . import codec
from .commitlog import CommitLog
from .consume_queue import ConsumeQueue
from .errors import InvalidOffsetError, MessageNotFoundError
from .message import GetResult, GetStatus, StoredMessage

__all__ = ["pull", "read_many", "MAX_UNITS_EXAMINED"]

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

