"""Read paths: a page of one queue, lookups by key.

A pull walks ConsumeQueue units from the requested offset, filters on the
tag code stored in each unit (then on the tag itself, since codes can
collide), and reads the records from the CommitLog.  Units whose record is
gone (retention) are skipped.  Status and corrected offsets follow
RocketMQ's GetMessageStatus.

Every record read is checked against its unit (topic, queue, queue offset,
size) and, unless ``verify_crc_on_read`` is off, its CRC (the whole-record
CRC, :mod:`.wcrc`; the body CRC of a record written before it).  A page stops
before the first damaged record; a pull starting at one answers
CORRUPT_MESSAGE with ``next_offset`` past it and the record named, so a
damaged record is never served and never skipped silently.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from . import codec
from .commitlog import CommitLog
from .consume_queue import ConsumeQueue
from .errors import CorruptRecordError, DamagedMessageError, InvalidOffsetError, MessageNotFoundError
from .dispatch import DispatchBatch
from .message import DamagedRecord, GetResult, GetStatus, StoredMessage
from .commitlog import _SPAN
from .page_bytes import equal_at, gather
from .quarantine import DAMAGED_TAG  # a quarantined record's unit: every tag filter takes it (and answers CORRUPT)
from .scanner import _crc_ok, _headers, parse_at  # the header checks of parse_at, without its columns

__all__ = ["pull", "pull_batch", "PullBatch", "pull_page", "PullColumns", "read_many", "page_is_recent",
           "MAX_UNITS_EXAMINED"]

# A filtered pull stops after looking at this many units, matches or not.
MAX_UNITS_EXAMINED = 16_384
_HS = codec.HEADER_SIZE


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
    codes = frozenset([*map(codec.tag_code, tags), DAMAGED_TAG]) if tags else None
    messages, examined, damaged = _collect(commitlog, cq, offset, max(1, max_count), codes, tags, max_bytes, hi)
    if damaged is not None and not examined:
        return GetResult(GetStatus.CORRUPT_MESSAGE, [], offset + 1, lo, hi, damaged)
    status = GetStatus.FOUND if messages else GetStatus.NO_MATCHED_MESSAGE
    return GetResult(status, messages, offset + examined, lo, hi)


def _damage(cq: ConsumeQueue, queue_offset: int, phy: int, found: StoredMessage | CorruptRecordError) -> \
        DamagedRecord | None:
    """Why the record read for unit ``queue_offset`` is damaged, or None when it is the unit's record."""
    if isinstance(found, CorruptRecordError):
        return DamagedRecord(cq.topic, cq.queue_id, queue_offset, phy, str(found))
    if found.topic != cq.topic or found.queue_id != cq.queue_id or found.queue_offset != queue_offset:
        return DamagedRecord(cq.topic, cq.queue_id, queue_offset, phy,
                             f"the record there belongs to {found.topic!r} queue {found.queue_id} "
                             f"offset {found.queue_offset}")
    return None


def _collect(
    commitlog: CommitLog,
    cq: ConsumeQueue,
    offset: int,
    max_count: int,
    codes: frozenset[int] | None,
    tags: frozenset[str] | None,
    max_bytes: int | None,
    hi: int,
) -> tuple[list[StoredMessage], int, DamagedRecord | None]:
    """Walk units from ``offset``; returns the messages, how many units were examined and,
    when the walk stopped at a damaged record, that record (it is not counted as examined)."""
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
        found = commitlog.read_messages([phys[k] for k in picked], [sizes[k] for k in picked],
                                        check_crc=commitlog.verify_crc)
        for k, msg in zip(picked, found):
            if msg is None:
                continue  # gone (retention)
            damaged = _damage(cq, pos + k, phys[k], msg)
            if damaged is not None:
                return out, pos + k - offset, damaged
            assert isinstance(msg, StoredMessage)
            if tags is not None and msg.tags not in tags:
                continue  # a tag-code collision
            if out and msg.size > budget:
                return out, k + pos - offset, None
            budget -= msg.size
            out.append(msg)
        pos += take
    return out, pos - offset, None


def read_records(commitlog: CommitLog, phys: Iterable[int], chunk_bytes: int = 8 << 20) -> DispatchBatch:
    """The records starting at ``phys``, as columns in CommitLog order; records that are gone are left out.

    Records written by one put lie side by side, so runs of them are parsed a chunk at a
    time instead of one read per record; the reader jumps over the gaps between runs.
    """
    wanted = sorted({int(p) for p in phys})
    parts: list[DispatchBatch] = []
    i, end = 0, 0
    while i < len(wanted):
        batch, nxt = commitlog.read_batch(wanted[i], chunk_bytes, commitlog.verify_crc)
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
        except DamagedMessageError:
            raise  # a damaged record is named, never skipped
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
    damaged: DamagedRecord | None = None  # see GetResult


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
        codes = np.array([*map(codec.tag_code, tags), DAMAGED_TAG], np.int64)
        picked = np.flatnonzero(np.isin(units["tag"].astype(np.int64), codes))
    picked = picked[: max(1, max_count)]
    examined = int(picked[-1]) + 1 if len(picked) == max(1, max_count) else len(units)
    phys = units["phy"][picked].astype(np.int64)
    batch, rows, damaged = _read_columns(commitlog, cq, phys, units["size"][picked].astype(np.int64),
                                         picked + offset)
    if damaged is not None:
        if damaged.queue_offset == offset:
            return PullBatch(GetStatus.CORRUPT_MESSAGE, _empty(), offset + 1, lo, hi, damaged)
        examined = damaged.queue_offset - offset  # the page stops before it
    keep = np.ones(len(batch), bool)
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


def _read_columns(commitlog: CommitLog, cq: ConsumeQueue, phys: np.ndarray, sizes: np.ndarray,
                  qoffs: np.ndarray) -> tuple[DispatchBatch, np.ndarray, DamagedRecord | None]:
    """Parse the records of units at queue offsets ``qoffs``, one read per run (see CommitLog.read_spans).

    Returns the good records before the first damaged one, the index (into ``phys``) of each, and
    the first damaged record, if any.  Records gone by retention are left out.
    """
    parts, rows, bad = [], [], []
    for i, j, lo, buf in commitlog.read_spans(phys, sizes):
        if buf is None:
            if phys[i] >= commitlog.min_offset():
                bad.append((i, f"the unit's size {sizes[i]} does not fit the CommitLog at {phys[i]}"))
            continue
        part, failed = parse_at(buf, lo, phys[i:j] - lo, commitlog.store_host, sizes=sizes[i:j],
                                check_crc=commitlog.verify_crc)
        if len(failed):
            bad.append((i + int(failed[0]), "magic code, lengths or body CRC do not hold"))
        parts.append(part)
        rows.append(np.setdiff1d(np.arange(i, j), i + failed, assume_unique=True))
    batch = DispatchBatch.concat(parts, 0) if parts else _empty()
    idx = np.concatenate(rows) if rows else np.zeros(0, np.int64)
    other = batch.topics.count(cq.topic) != len(batch) and np.array([t != cq.topic for t in batch.topics], bool)
    mismatch = (batch.queue_ids != cq.queue_id) | (batch.queue_offsets != qoffs[idx]) | other
    for r in np.flatnonzero(mismatch)[:1].tolist():
        bad.append((int(idx[r]), f"the record there belongs to {batch.topics[r]!r} queue {batch.queue_ids[r]} "
                                 f"offset {batch.queue_offsets[r]}"))
    if not bad:
        return batch, idx, None
    first, reason = min(bad)
    before = np.flatnonzero(idx < first)
    damaged = DamagedRecord(cq.topic, cq.queue_id, int(qoffs[first]), int(phys[first]), reason)
    return batch.take(before), idx[before], damaged


def _empty() -> DispatchBatch:
    return DispatchBatch.concat([], 0)


# -- the Arrow pull's page: flat buffers, no per-message objects ------------------------------------------


@dataclass(frozen=True, slots=True)
class PullColumns:
    """A page of one queue as flat numpy columns and byte buffers (what an Arrow page is built from).

    Row ``i``'s body is ``bodies[body_offsets[i]:body_offsets[i+1]]``; its properties, in the
    codec's ``name\\x01value\\x02`` layout with TAGS and KEYS first, are ``properties[...]`` likewise.
    """

    status: GetStatus
    next_offset: int
    min_offset: int
    max_offset: int
    topic: str
    queue_id: int
    queue_offsets: np.ndarray  # int64
    phy_offsets: np.ndarray  # int64
    store_hosts: np.ndarray  # uint64, each record's own (a slave serves the master's)
    born_timestamps: np.ndarray  # int64 ms
    store_timestamps: np.ndarray  # int64 ms
    bodies: np.ndarray  # uint8
    body_offsets: np.ndarray  # int32, n + 1
    properties: np.ndarray  # uint8
    property_offsets: np.ndarray  # int32, n + 1
    damaged: DamagedRecord | None = None  # always None: a page with damage takes the PullBatch path

    def __len__(self) -> int:
        return len(self.queue_offsets)


def pull_page(
    commitlog: CommitLog,
    cq: ConsumeQueue | None,
    offset: int,
    max_count: int,
    tags: frozenset[str] | None,
    max_bytes: int | None,
) -> PullColumns | PullBatch:
    """Like :func:`pull_batch`; a page of whole, valid records with no tag filter comes back as
    :class:`PullColumns`, built per page with numpy (such a page stops at a segment's end).
    Anything else (a tag filter, records gone or damaged) takes :func:`pull_batch`, which says
    what is wrong."""
    if tags or cq is None or _outside(cq, offset) is not None:
        return pull_batch(commitlog, cq, offset, max_count, tags, max_bytes)
    lo, hi = cq.min_offset(), cq.max_offset()
    units = _read_units(cq, offset, min(hi, offset + max(1, max_count)))
    page = _columns_of(commitlog, cq, units, offset, max_bytes) if len(units) else None
    if page is None:
        return pull_batch(commitlog, cq, offset, max_count, tags, max_bytes)
    n = len(page["queue_offsets"])
    return PullColumns(GetStatus.FOUND, offset + n, lo, hi, cq.topic, cq.queue_id, **page)


def page_is_recent(commitlog: CommitLog, cq: ConsumeQueue | None, offset: int, window: int) -> bool:
    """Whether a page from ``offset`` reads nothing or starts in the newest ``window`` bytes of the log."""
    if cq is None or offset < 0:
        return True
    try:
        units = cq.read_units(offset, 1)
    except ValueError:  # a segment closed meanwhile (deleted, or the store stopping)
        return False
    return not len(units) or int(units["phy"][0]) >= commitlog.max_offset() - window


def _columns_of(commitlog: CommitLog, cq: ConsumeQueue, units: np.ndarray, offset: int,
                max_bytes: int | None) -> dict | None:
    """The columns of the records of ``units`` that lie in one segment; None if any fails a check."""
    phys, sizes = units["phy"].astype(np.int64), units["size"].astype(np.int64)
    seg = commitlog.find_segment(int(phys[0]))
    if seg is None:
        return None
    room = min(seg.start_offset + seg.wrote, int(phys[0]) + _SPAN)
    ends = phys + sizes  # ascending: a queue's records lie in log order
    n = int(np.searchsorted(ends, room, side="right"))
    if max_bytes is not None:
        n = min(n, max(1, int(np.searchsorted(np.cumsum(sizes[:n]), max_bytes, side="right"))))
    if n == 0:
        return None
    lo = int(phys[0])
    try:
        with seg.view(lo - seg.start_offset, int(ends[n - 1]) - lo) as buf:  # no copy of the span
            return _checked_columns(buf, lo, cq, phys[:n], sizes[:n], offset, commitlog.verify_crc)
    except ValueError:  # deleted by retention meanwhile
        return None


def _checked_columns(buf: memoryview, lo: int, cq: ConsumeQueue, phys: np.ndarray, sizes: np.ndarray,
                     offset: int, check_crc: bool) -> dict | None:
    """Check the records at ``phys`` (in ``buf``, which starts at log offset ``lo``) as the scanner
    does, and against their units; copy their columns out of ``buf`` (nothing refers to it after)."""
    n, st = len(phys), phys - lo
    if not ((st >= 0) & (sizes >= _HS + 3) & (st + sizes <= len(buf))).all():  # units that do not fit
        return None
    h = _headers(buf, lo, st)  # type: ignore[arg-type]  # any buffer will do
    topic = np.frombuffer(cq.topic.encode(), np.uint8)
    ok = h.ok & (h.total == sizes) & (h.tlen == len(topic)) & (h.hdr["queue_id"] == cq.queue_id)
    ok &= h.hdr["queue_offset"] == np.arange(offset, offset + n)
    u8 = np.frombuffer(buf, np.uint8)
    if not ok.all() or not equal_at(u8, h.t_at + 1, topic):
        return None
    if check_crc and not _crc_ok(buf, h).all():  # type: ignore[arg-type]  # any buffer will do
        return None
    bodies, body_offsets = gather(u8, h.st + _HS, h.blen)
    props, prop_offsets = gather(u8, h.p_at + 2, h.ulen) if h.ulen.any() else \
        (np.zeros(0, np.uint8), np.zeros(n + 1, np.int32))  # no properties (a bulk produce's records)
    del u8
    return {"queue_offsets": h.hdr["queue_offset"].astype(np.int64), "phy_offsets": phys,
            "store_hosts": h.hdr["store_host"].astype(np.uint64),
            "born_timestamps": h.hdr["born_ts"].astype(np.int64),
            "store_timestamps": h.hdr["store_ts"].astype(np.int64),
            "bodies": bodies, "body_offsets": body_offsets, "properties": props, "property_offsets": prop_offsets}

