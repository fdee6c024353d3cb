"""Fetch: pages of the store's queues as RecordBatch v2, with Kafka's long poll.

Each partition's page is read by columns (:meth:`store.MessageStore.get_message_columns`: flat
body and property buffers, no message objects) and written (by numpy columns when no record has a
key or headers, :func:`.batch_columns.plain_batch`) as one uncompressed batch whose base
offset is the fetch offset, so a client never receives records below the offset it asked for.
A page of plain records fills the partition's byte limit, as Kafka's answers do (:func:`read_page`),
and once it is sent the partition's next page is built ahead (fetch_ahead.py).
The answer waits up to ``max_wait_ms`` for ``min_bytes``, woken by the broker's arrival events, or
until the client sends another request on the connection (answers go out in order: the parked Fetch
would hold that one back); ``max_bytes`` bounds the answer (the first non-empty partition is always
served whole, as Kafka).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
import struct
import time
from typing import Any

import numpy as np

from store import GetStatus
from store.pull import PullColumns

from ..model.topics import LOG_APPEND_TIME as LOG_APPEND_TIME_TYPE

from .codec import ErrorCode, Request, millis
from .context import KafkaContext
from .fetch_ahead import FetchAhead
from .handlers import has_partition
from .mapping import keys_only, split_properties, without_seq
from .batch_columns import plain_batch
from .records import LOG_APPEND_TIME, BatchWriter

__all__ = ["NEXT_REQUEST", "fetch", "next_offset", "page_batch", "read_page"]

NEXT_REQUEST = "next_request"  # the session's key for the listener's "the client sent another request" future

_MAX_RECORDS = 10_000
_WCRC_ONLY = b"WCRC\x01"  # a record whose properties hold only the store's checksum
_OUT_OF_RANGE = (GetStatus.OFFSET_TOO_SMALL, GetStatus.OFFSET_OVERFLOW)
_BASE = struct.Struct(">qi")  # a batch's base offset and length
_COUNT = struct.Struct(">i")  # its last offset delta (+23), its record count (+57)
_STORED_EXTRA = 88 + 3 + 14  # a CommitLog record beyond its body, topic and properties (header, lengths, WCRC)
_MAX_RATIO = 8.0
_UNDER = 0.98  # the store is asked for a little less than the ratio says: a batch cut to its limit is built twice


def page_batch(page: Any, log_append_time: bool = False, limit: int | None = None) -> bytes:
    """The RecordBatches of a page (PullColumns or PullBatch); b"" when it has no messages. The
    record times are the born times, or with ``log_append_time`` the store times, one batch per
    run of equal times flagged LOG_APPEND_TIME (a client reads every record's time from its batch).
    With ``limit`` only the first records whose batches fit in ``limit`` bytes (at least one)."""
    attributes = LOG_APPEND_TIME if log_append_time else 0
    out: list[bytes] = []
    left = limit
    if isinstance(page, PullColumns):
        times = page.store_timestamps if log_append_time else page.born_timestamps
        for lo, hi in _runs(times, log_append_time):
            batch = _columns_batch(page, times, lo, hi, attributes, left, not out)
            if batch:
                out.append(batch)
            if left is not None and (not batch or _COUNT.unpack_from(batch, 57)[0] < hi - lo):
                break  # the limit is reached
            left = None if left is None else left - len(batch)
        return b"".join(out)
    batch = page.batch
    times = batch.store_timestamps if log_append_time else batch.born_timestamps
    bodies, raws = list(batch.bodies), list(batch.properties_raw)
    offsets, stamps = batch.queue_offsets.tolist(), times.tolist()
    for lo, hi in _runs(times, log_append_time):
        w = BatchWriter(offsets[lo], stamps[lo])
        for i in range(lo, hi):
            key, headers = split_properties(raws[i])
            if not w.add(offsets[i], stamps[i], key, bodies[i], headers, left):
                break
        if out and left is not None and w.size > left:
            break
        out.append(w.finish(attributes=attributes))
        if left is not None and w.count < hi - lo:
            break
        left = None if left is None else left - w.size
    return b"".join(out)


def next_offset(records: bytes) -> int:
    """The offset after the last record of ``records`` (whole batches, at least one)."""
    pos = last = 0
    while pos < len(records):
        base, length = _BASE.unpack_from(records, pos)
        last = base + _COUNT.unpack_from(records, pos + 23)[0]
        pos += 12 + length
    return last + 1


def _runs(times: np.ndarray, split: bool) -> list[tuple[int, int]]:
    """(lo, hi) row ranges: the whole page, or with ``split`` each run of equal times."""
    n = len(times)
    if not n:
        return []
    if not split:
        return [(0, n)]
    cuts = [0, *(np.flatnonzero(np.diff(times)) + 1).tolist(), n]
    return list(zip(cuts[:-1], cuts[1:]))


def _columns_batch(page: PullColumns, times: np.ndarray, lo: int, hi: int, attributes: int, limit: int | None,
                   first_whole: bool) -> bytes:
    """Rows ``lo:hi`` of a column page as one batch: by numpy columns when no record has a key or
    headers, else record by record; the first rows that fit ``limit`` (see plain_batch)."""
    po = page.property_offsets
    props = page.properties[po[lo]:po[hi]].tobytes() if len(page.properties) else b""
    n = hi - lo
    bare, bare_offsets = without_seq(props, po[lo:hi + 1].astype(np.int64) - int(po[lo]))
    if not bare or bare.count(b"\x02") == bare.count(_WCRC_ONLY) == bare.count(b"\x01") == n:
        # no record has properties other than the store's checksum: no key, no headers
        return plain_batch(page.queue_offsets[lo:hi], times[lo:hi], page.bodies, page.body_offsets[lo:hi + 1],
                           attributes, None, limit, first_whole)
    keys = keys_only(bare, bare_offsets)
    if keys is not None:
        return plain_batch(page.queue_offsets[lo:hi], times[lo:hi], page.bodies, page.body_offsets[lo:hi + 1],
                           attributes, keys, limit, first_whole)
    offsets, stamps = page.queue_offsets[lo:hi].tolist(), times[lo:hi].tolist()
    bo, starts = page.body_offsets[lo:hi + 1].tolist(), po[lo:hi + 1].tolist()
    first, bodies = starts[0], page.bodies.tobytes()
    w = BatchWriter(offsets[0], stamps[0])
    for i in range(n):
        key, headers = split_properties(props[starts[i] - first:starts[i + 1] - first])
        if not w.add(offsets[i], stamps[i], key, bodies[bo[i]:bo[i + 1]], headers, limit):
            break
    if not first_whole and limit is not None and w.size > limit:
        return b""
    return w.finish(attributes=attributes)


async def _read(ctx: KafkaContext, topic: str, part: Any, limit: int, session: dict[str, Any]) -> dict[str, Any]:
    """One partition's answer: its error, offsets and records."""
    index = part.partition
    entry: dict[str, Any] = {"partition_index": index, "error_code": 0, "high_watermark": -1,
                             "last_stable_offset": -1, "log_start_offset": -1, "aborted_transactions": [],
                             "preferred_read_replica": -1, "records": b""}
    if not ctx.topic_allowed(session, topic, "Sub"):
        return {**entry, "error_code": ErrorCode.topic_authorization_failed}
    if not has_partition(ctx, topic, index):
        return {**entry, "error_code": ErrorCode.unknown_topic_or_partition}
    lo, hi = ctx.broker.queue_range(topic, index)
    entry.update(high_watermark=hi, last_stable_offset=hi, log_start_offset=lo)
    offset = part.fetch_offset
    if offset < lo or offset > hi:
        return {**entry, "error_code": ErrorCode.offset_out_of_range}
    if offset == hi or limit <= 0:
        return entry
    store, ahead = ctx.broker.store, ctx.ahead
    log_append_time = ctx.broker.topics.get(topic).timestamp_type == LOG_APPEND_TIME_TYPE
    queue = store.queues.get(topic, index)
    records = None if ahead is None else await ahead.take((topic, index, offset, limit, log_append_time), queue)
    if records is None:
        code, records = read_page(store, ahead, topic, index, offset, limit, log_append_time)
        if code:
            return {**entry, "error_code": code}
    if ahead is not None and records:
        after = next_offset(records)
        if after < hi:
            ahead.start((topic, index, after, limit, log_append_time), queue,
                        functools.partial(_ahead, store, ahead, topic, index, after, limit, log_append_time))
    return {**entry, "records": records}


def read_page(store: Any, ahead: FetchAhead | None, topic: str, index: int, offset: int, limit: int,
              log_append_time: bool) -> tuple[int, bytes]:
    """(error code, records) of the page at ``offset`` that fits ``limit`` bytes.

    A page of plain records takes far fewer bytes in a batch than in the CommitLog (no 88-byte
    header, topic or checksum property): the store is asked for ``limit`` times the ratio the last
    page of the partition showed, so that the batch fills ``limit`` as Kafka's answers do, and the
    batch is cut to ``limit`` (a record never takes more bytes in a batch than in the log)."""
    ratio = 1.0 if ahead is None else ahead.ratios.get((topic, index), 1.0)
    budget = limit if ratio == 1.0 else int(limit * ratio * _UNDER)  # rather one record short than a cut
    page = store.get_message_columns(topic, index, offset, _MAX_RECORDS, max_bytes=max(budget, 1), settle=False)
    if page.status in _OUT_OF_RANGE:
        return ErrorCode.offset_out_of_range, b""
    if page.status == GetStatus.CORRUPT_MESSAGE:
        return ErrorCode.corrupt_message, b""
    records = page_batch(page, log_append_time, limit)
    if ahead is not None and isinstance(page, PullColumns) and records:
        n, sent = len(page), next_offset(records) - offset
        stored = page.body_offsets[n] + page.property_offsets[n] + n * (_STORED_EXTRA + len(topic.encode()))
        ahead.ratios[(topic, index)] = min(max(stored / n / (len(records) / sent), 1.0), _MAX_RATIO)
    return 0, records


def _ahead(store: Any, ahead: FetchAhead, topic: str, index: int, offset: int, limit: int,
           log_append_time: bool) -> bytes | None:
    """A page built ahead (fetch_ahead.py): its records, or None when its read failed."""
    code, records = read_page(store, ahead, topic, index, offset, limit, log_append_time)
    return None if code else records


async def _read_all(ctx: KafkaContext, req: Any, session: dict[str, Any]) -> tuple[list[dict[str, Any]], int]:
    budget = req.max_bytes if getattr(req, "max_bytes", None) is not None else 50 << 20
    topics, total = [], 0
    for t in req.topics:
        parts = []
        for p in t.partitions:
            limit = min(p.partition_max_bytes, budget - total) if total else p.partition_max_bytes
            entry = await _read(ctx, t.topic, p, limit, session)
            total += len(entry["records"])
            parts.append(entry)
        topics.append({"topic": t.topic, "partitions": parts})
    return topics, total


async def fetch(ctx: KafkaContext, req: Request) -> dict[str, Any]:
    body = req.body
    deadline = time.monotonic() + millis(body.max_wait) / 1000
    min_bytes = max(1, body.min_bytes)
    topics, total = await _read_all(ctx, body, req.session)
    while total < min_bytes and not _has_error(topics) and time.monotonic() < deadline:
        if not await _wait(ctx, body, deadline - time.monotonic(), req.session.get(NEXT_REQUEST)):
            break
        topics, total = await _read_all(ctx, body, req.session)
    return {"throttle_time": 0, "error_code": 0, "session_id": 0, "responses": topics}


def _has_error(topics: list[dict[str, Any]]) -> bool:
    return any(p["error_code"] for t in topics for p in t["partitions"])


async def _wait(ctx: KafkaContext, body: Any, timeout_s: float,
                next_request: Callable[[], asyncio.Future[bytes]] | None) -> bool:
    """Park on every fetched partition until one gets a message or the time is up; False if stopping,
    or when the client sent another request meanwhile (``next_request``, from the listener: answers
    go out in order, so a parked Fetch would hold that request's answer back for up to max_wait;
    the Java consumer sends ListOffsets behind the Fetch it pipelines at the end of a partition)."""
    waiters = ctx.broker.waiters
    if waiters is None or timeout_s <= 0:
        return False
    arrival = next_request() if next_request is not None else None
    if arrival is not None and arrival.done():
        return False
    keys = [(t.topic, p.partition) for t in body.topics for p in t.partitions]
    if not keys:  # a fetch of nothing (every partition paused) waits out max_wait, as Kafka does
        if arrival is None:
            await asyncio.sleep(timeout_s)
        else:
            await asyncio.wait([arrival], timeout=timeout_s)
        return False
    events = [(k, waiters.register(*k)) for k in keys]
    try:
        if not any(ctx.broker.queue_range(*k)[1] > _offset(body, k) for k in keys):
            tasks = [asyncio.ensure_future(e.wait()) for _, e in events]
            try:
                await asyncio.wait(tasks + ([arrival] if arrival is not None else []), timeout=timeout_s,
                                   return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in tasks:
                    task.cancel()  # (not ``arrival``: the listener reads the next request from it)
    finally:
        for k, e in events:
            waiters.unregister(*k, e)
    if arrival is not None and arrival.done():
        return False
    return bool(getattr(ctx.broker, "ready", True))


def _offset(body: Any, key: tuple[str, int]) -> int:
    for t in body.topics:
        for p in t.partitions:
            if (t.topic, p.partition) == key:
                return int(p.fetch_offset)
    return 0
