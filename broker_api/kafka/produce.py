"""Produce: RecordBatch v2 in, messages to the store, with idempotent producers' sequence checks.

acks = 0 stores and answers nothing (as Kafka); acks = 1 answers once the store holds the batch
(with SYNC flush: once fdatasync covers it); acks = -1 (all) also waits for the SYNC_MASTER rule
(a slave holds it). A batch from an idempotent producer (producer id >= 0) must carry the next
sequence of its partition; a retried batch that was already stored is answered with its first
offset and is not stored again (the last five batches per producer and partition are remembered).

A batch whose records have no headers and either no keys or text keys is read by columns
(record_columns.py) and handed to the store's column append with each record's own timestamp as
its born time; other batches are stored one message per record (mapping.py).
"""

from __future__ import annotations

import logging
import struct
from dataclasses import replace
from typing import Any

from store import Message, PutResult
from store.columns import GroupRows
from store.errors import DiskFullError, FlushTimeoutError, InvalidMessageError, MessageTooLargeError

from ..errors import BrokerBusyError, PermissionDeniedError, SlaveReadOnlyError
from ..model.topics import LOG_APPEND_TIME
from .codec import ErrorCode, KafkaProtocolError, Request, decode_request
from .context import KafkaContext
from .handlers import has_partition
from .mapping import to_message
from .producer_state import SEQ_PROPERTY, recover, stamp
from .record_columns import RecordColumns, decode_columns
from .records import Batch, decode_batches

__all__ = ["produce", "refuse_legacy_produce"]

log = logging.getLogger(__name__)
_REMEMBERED = 5
_INT32_MAX = (1 << 31) - 1
_INLINE_COLUMN_MESSAGES = 20_000  # a bigger column put runs on the write pool even with ASYNC flush
_ERRORS: list[tuple[type[BaseException], ErrorCode]] = [
    (MessageTooLargeError, ErrorCode.message_too_large),
    (InvalidMessageError, ErrorCode.invalid_record),
    (KafkaProtocolError, ErrorCode.corrupt_message),
    (DiskFullError, ErrorCode.kafka_storage_error),
    (SlaveReadOnlyError, ErrorCode.not_leader_or_follower),
    (PermissionDeniedError, ErrorCode.topic_authorization_failed),
    (BrokerBusyError, ErrorCode.request_timed_out),
]


def _error_of(exc: BaseException) -> ErrorCode:
    for cls, code in _ERRORS:
        if isinstance(exc, cls):
            return code
    return ErrorCode.unknown_server_error


async def produce(ctx: KafkaContext, req: Request) -> dict[str, Any] | None:
    body = req.body
    if body.transactional_id is not None:
        code = ErrorCode.transactional_id_authorization_failed
        return _answer(body, {(t.name, p.index): _part(p.index, code, "transactions are not supported")
                              for t in body.topic_data for p in t.partition_data})
    out: dict[tuple[str, int], dict[str, Any]] = {}
    for t in body.topic_data:
        for p in t.partition_data:
            if not ctx.topic_allowed(req.session, t.name, "Pub"):
                out[(t.name, p.index)] = _part(p.index, ErrorCode.topic_authorization_failed,
                                               f"Topic:{t.name} Pub is not granted")
                continue
            out[(t.name, p.index)] = await _partition(ctx, t.name, p.index, p.records or b"", body.acks)
    return None if body.acks == 0 else _answer(body, out)


def _answer(body: Any, parts: dict[tuple[str, int], dict[str, Any]]) -> dict[str, Any]:
    topics = [{"name": t.name, "partition_responses": [parts[(t.name, p.index)] for p in t.partition_data]}
              for t in body.topic_data]
    return {"responses": topics, "throttle_time": 0}


def _part(index: int, error: ErrorCode | int = 0, message: str | None = None, base_offset: int = -1,
          log_start: int = -1, append_time: int | None = None) -> dict[str, Any]:
    return {"index": index, "error_code": error, "base_offset": base_offset, "log_append_time": append_time,
            "log_start_offset": log_start, "record_errors": [], "error_message": message}


async def _partition(ctx: KafkaContext, topic: str, index: int, records: bytes, acks: int) -> dict[str, Any]:
    broker = ctx.broker
    if not has_partition(ctx, topic, index):
        return _part(index, ErrorCode.unknown_topic_or_partition, f"topic {topic!r} has no partition {index}")
    try:
        broker.replication.check_writable()
        broker.topics.for_produce(topic)
        batches = decode_batches(records)
        return await _store(ctx, topic, index, batches, acks)
    except Exception as exc:
        code = _error_of(exc)
        if code == ErrorCode.unknown_server_error:
            log.exception("kafka produce to %s/%d failed", topic, index)
        return _part(index, code, str(exc))


async def _store(ctx: KafkaContext, topic: str, index: int, batches: list[Batch], acks: int) -> dict[str, Any]:
    broker = ctx.broker
    first = appended = -1
    for batch in batches:
        if batch.control:
            continue
        if batch.transactional:
            return _part(index, ErrorCode.transactional_id_authorization_failed, "transactions are not supported")
        duplicate = _check_sequence(ctx, topic, index, batch)
        if isinstance(duplicate, ErrorCode):
            return _part(index, duplicate, "out of order sequence number")
        if duplicate is not None:  # a retry of a stored batch: answered, not stored again
            first = duplicate if first < 0 else first
            continue
        seq = None if batch.producer_id < 0 else stamp(batch.producer_id, batch.producer_epoch, batch.base_sequence,
                                                        batch.base_sequence + batch.last_offset_delta)
        cols = decode_columns(batch.body, batch.count, batch.base_timestamp)
        if cols is not None:
            base, stored_at = await _put_columns(ctx, topic, index, cols, seq, acks)
        else:
            messages = [to_message(topic, index, r) for r in batch.records]
            if seq is not None and messages:
                messages[0] = replace(messages[0], properties={**messages[0].properties, SEQ_PROPERTY: seq})
            base, stored_at = await _put(ctx, messages, acks)
        _remember(ctx, topic, index, batch, base)
        first, appended = (base, stored_at) if first < 0 else (first, appended)
    lo, _ = broker.queue_range(topic, index)
    log_append_time = broker.topics.get(topic).timestamp_type == LOG_APPEND_TIME
    return _part(index, 0, None, first, lo, appended if log_append_time and appended >= 0 else None)


async def _put(ctx: KafkaContext, messages: list[Message], acks: int) -> tuple[int, int]:
    """The messages stored: (first offset, store time)."""
    broker = ctx.broker
    if not messages:
        return -1, -1
    flushed = True
    try:
        results = await broker.writer.put(messages)
    except FlushTimeoutError as exc:  # stored; fdatasync did not confirm it in time
        results, flushed = exc.results, False
    if acks == -1:
        status = await broker.replication.confirm(results, flushed)
        if status != "SEND_OK":
            raise _NotReplicated(status)
    return int(results[0].queue_offset), int(results[0].store_timestamp)


async def _put_columns(ctx: KafkaContext, topic: str, index: int, cols: RecordColumns, seq: str | None,
                       acks: int) -> tuple[int, int]:
    """The batch's records by columns, the idempotent producer's stamp on the first: (first offset, store time)."""
    broker = ctx.broker
    rows = [GroupRows(cols.born, None if seq is None else {SEQ_PROPERTY: seq})]
    flushed = True
    try:
        (res,) = await broker.gate.run(broker.store.put_column_groups, topic, [(index, cols.bodies, cols.keys)],
                                       None, None, rows, offload=len(cols) > _INLINE_COLUMN_MESSAGES)
    except FlushTimeoutError as exc:  # stored; fdatasync did not confirm it in time
        (res,), flushed = exc.results, False
    if acks == -1:
        last = PutResult("", topic, index, res.first_queue_offset + len(res) - 1, int(res.phy_offsets[-1]),
                         int(res.sizes[-1]), res.store_timestamp)
        status = await broker.replication.confirm([last], flushed)
        if status != "SEND_OK":
            raise _NotReplicated(status)
    return int(res.first_queue_offset), int(res.store_timestamp)


class _NotReplicated(BrokerBusyError):
    """Raised when acks=all was asked and the SYNC_MASTER rule or the SYNC flush did not confirm the write."""


_ERRORS.insert(0, (_NotReplicated, ErrorCode.not_enough_replicas_after_append))


def _check_sequence(ctx: KafkaContext, topic: str, index: int, batch: Batch) -> int | ErrorCode | None:
    """None: store it; an int: a duplicate stored at that offset; an ErrorCode: refuse it."""
    if batch.producer_id < 0:
        return None
    state = ctx.sequence(batch.producer_id, topic, index, batch.producer_epoch)
    if not state.recovered:
        state.recovered = True
        if batch.producer_id < ctx.first_producer_id:  # handed out before a restart: read its stamps back
            lo, hi = ctx.broker.queue_range(topic, index)
            state.recent = recover(ctx.broker.store, topic, index, lo, hi, batch.producer_id,
                                   batch.producer_epoch)[-_REMEMBERED:]
    for first, _, base in state.recent:
        if first == batch.base_sequence:
            return base
    if not state.recent:
        return None  # a producer new to this partition (or to this broker since a restart)
    expected = state.recent[-1][1] + 1
    if expected > _INT32_MAX:
        expected = 0
    return None if batch.base_sequence == expected else ErrorCode.out_of_order_sequence_number


def _remember(ctx: KafkaContext, topic: str, index: int, batch: Batch, base: int) -> None:
    if batch.producer_id < 0:
        return
    state = ctx.sequence(batch.producer_id, topic, index, batch.producer_epoch)
    last = batch.base_sequence + batch.last_offset_delta
    state.recent.append((batch.base_sequence, last, base))
    del state.recent[:-_REMEMBERED]


def refuse_legacy_produce(frame: bytes, version: int) -> bytes:
    """The answer to a Produce v0-2 request (message formats v0/v1, before RecordBatch): every
    partition asked gets UNSUPPORTED_VERSION. kio has no schema for these versions, so the request
    is read with v3's (v3 only adds a leading transactional id) and the answer is packed by hand."""
    key, _, correlation = _LEGACY_HEAD.unpack_from(frame, 0)
    (client_len,) = struct.unpack_from(">h", frame, 8)
    body = bytes(frame[10 + max(client_len, 0):])
    v3 = decode_request(_LEGACY_HEAD.pack(key, 3, correlation) + b"\xff\xff" + b"\xff\xff" + body)
    out = [struct.pack(">ii", correlation, len(v3.body.topic_data))]
    for t in v3.body.topic_data:
        name = t.name.encode()
        out.append(struct.pack(">h", len(name)) + name + struct.pack(">i", len(t.partition_data)))
        for p in t.partition_data:
            out.append(struct.pack(">ihq", p.index, ErrorCode.unsupported_version.value, -1))
            if version >= 2:
                out.append(struct.pack(">q", -1))  # log_append_time
    if version >= 1:
        out.append(struct.pack(">i", 0))  # throttle_time_ms
    data = b"".join(out)
    return struct.pack(">i", len(data)) + data


_LEGACY_HEAD = struct.Struct(">hhi")
