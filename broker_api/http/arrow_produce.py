"""Produce by columns: an Arrow IPC body goes to the store without an object per message.

When a request's Arrow table has the shape the store's column put takes
(:meth:`store.MessageStore.put_column_groups`), it is written from the
table's own buffers:

* ``body``: binary or string, no nulls; its data buffer and offsets become
  :class:`store.packed.PackedBodies` (no copy, no ``bytes`` per body);
* ``keys``: absent/all null, or one non-empty key per row (string, or lists of one);
* ``tags``: absent/all null, or one value for every row;
* ``queue_id``: absent/all null, or one value for every row;
* ``properties``, ``delay_level``, ``deliver_at_ms``: absent or all null.

A JSON batch of plain text bodies (``{"messages": [{"body": "..."}, ...]}``, nothing
else) is written the same way: its texts are joined and encoded once.

Queues are chosen as for any produce (explicit, else the key's CRC32, else
round robin), one store group per queue.  Anything else, and any request the
store refuses, takes the per-message path (``wire.parse_arrow_produce``), which
gives the precise error: the column put validates every group before it
writes any, so falling back never writes twice.
"""

from __future__ import annotations

import asyncio
import time
import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
from starlette.responses import Response

from store import ColumnPutResult, InvalidMessageError, MessageTooLargeError, PutResult
from store.codec import make_msg_ids
from store.errors import FlushTimeoutError
from store.packed import PackedBodies

from ..broker import Broker
from ..errors import BadRequestError
from ..model.topics import TopicConfig
from ..transactions.columns import ColumnFrame
from .produce_answer import Answer, column_summary
from .wire import check_count, load_json_produce, plain_json_bodies, read_arrow

__all__ = ["ArrowColumns", "arrow_columns", "check_body_sizes", "column_frame", "produce_columns",
           "put_arrow_columns"]

_INLINE_PARSE_BYTES = 1 << 20  # bigger bodies are parsed off the event loop
_INLINE_COLUMN_MESSAGES = 20_000  # bigger column puts run on the write pool even with ASYNC flush
# Smaller JSON batches go through the produce batcher, which groups concurrent requests into one put.
_MIN_JSON_COLUMN_MESSAGES = 64
_MUST_BE_NULL = ("properties", "delay_level", "deliver_at_ms")
_OFFSETS = {pa.binary(): np.int32, pa.string(): np.int32, pa.large_binary(): np.int64, pa.large_string(): np.int64}


@dataclass(slots=True)
class ArrowColumns:
    """A produce request as columns."""

    bodies: PackedBodies
    keys: list[str] | None
    tags: str | None
    queue_id: int | None


def _read(raw: bytes) -> pa.Table:
    return read_arrow(raw)


def _packed(column: pa.ChunkedArray) -> PackedBodies | None:
    arr = column.combine_chunks()
    width = _OFFSETS.get(arr.type)
    if width is None or arr.null_count:
        return None
    _, offsets_buf, data_buf = arr.buffers()
    offsets = np.frombuffer(offsets_buf, width)[arr.offset:arr.offset + len(arr) + 1].astype(np.int64)
    data = np.frombuffer(data_buf, np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    return PackedBodies(data, offsets)


def _one_value(table: pa.Table, name: str) -> tuple[bool, Any]:
    """(usable, value): absent or all null gives (True, None); one non-null value for all rows gives it."""
    if name not in table.column_names or table.column(name).null_count == table.num_rows:
        return True, None
    col = table.column(name)
    if col.null_count or pc.count_distinct(col).as_py() != 1:
        return False, None
    return True, col[0].as_py()


def _keys(table: pa.Table) -> tuple[bool, list[str] | None]:
    if "keys" not in table.column_names or table.column("keys").null_count == table.num_rows:
        return True, None
    col = table.column("keys")
    if col.null_count:
        return False, None
    if pa.types.is_list(col.type) or pa.types.is_large_list(col.type):
        lengths = pc.list_value_length(col)
        if pc.min(lengths).as_py() != 1 or pc.max(lengths).as_py() != 1:
            return False, None
        col = pc.list_flatten(col)
    if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)) or col.null_count:
        return False, None
    keys = col.to_pylist()
    return ("" not in keys), keys


def _shape(table: pa.Table) -> tuple[PackedBodies, list[str] | None, str | None] | None:
    """(bodies, keys, tag) when the table has the column put's shape but for its queue ids, else None."""
    if any(name in table.column_names and table.column(name).null_count != table.num_rows for name in _MUST_BE_NULL):
        return None
    bodies = _packed(table.column("body"))
    keys_ok, keys = _keys(table)
    tags_ok, tags = _one_value(table, "tags")
    if bodies is None or not (keys_ok and tags_ok) or not isinstance(tags, (str, type(None))):
        return None
    return bodies, keys, tags


def arrow_columns(raw: bytes, max_messages: int) -> ArrowColumns | None:
    """The request as columns, or None when it needs the per-message path."""
    table = _read(raw)
    if "body" not in table.column_names:
        raise BadRequestError("the Arrow stream needs a 'body' column (binary or string)")
    check_count(table.num_rows, max_messages)
    shape = _shape(table)
    qid_ok, qid = _one_value(table, "queue_id")
    if shape is None or not qid_ok or not isinstance(qid, (int, type(None))):
        return None
    return ArrowColumns(*shape, qid)


def column_frame(broker: Broker, cfg: TopicConfig, raw: bytes) -> ColumnFrame | None:
    """A staged sink body as columns, every row's queue chosen as a produce chooses it
    (:mod:`broker_api.tx_columns`); None when the body needs the per-message path, which
    also names what is wrong with it."""
    table = _read(raw)
    shape = _shape(table) if "body" in table.column_names and table.num_rows else None
    if shape is None:
        return None
    bodies, keys, tags = shape
    if "queue_id" in table.column_names and table.column("queue_id").null_count != table.num_rows:
        col = table.column("queue_id")
        if col.null_count or not pa.types.is_integer(col.type):
            return None
        qids = col.to_numpy().astype(np.int64)
        if int(qids.min()) < 0 or int(qids.max()) >= cfg.queues:
            return None
    else:
        qids = _queues(broker, cfg, ArrowColumns(bodies, keys, tags, None))
    return ColumnFrame(cfg.name, bodies, keys, tags, qids)


def check_body_sizes(broker: Broker, cols: ArrowColumns) -> None:
    """The per-message path's body limit, with the row's index in the request."""
    limit = broker.settings.store.max_message_bytes
    lengths = cols.bodies.lengths()
    if len(lengths) and int(lengths.max()) > limit:
        i = int(np.argmax(lengths > limit))
        raise MessageTooLargeError(f"message {i} has a {int(lengths[i])}-byte body; the limit is {limit} bytes")


def _queues(broker: Broker, cfg: TopicConfig, cols: ArrowColumns) -> np.ndarray:
    """Each row's queue: explicit, else the key's CRC32, else round robin (as the per-message path)."""
    n = len(cols.bodies)
    rr = broker.reserve_round_robin(cfg.name, n)
    if cols.queue_id is not None:
        cfg.check_queue(cols.queue_id)
        return np.full(n, cols.queue_id, np.int64)
    if cols.keys is not None:
        crcs = np.fromiter(map(zlib.crc32, map(str.encode, cols.keys)), np.int64, n)
        return crcs % cfg.queues
    return (rr + np.arange(n, dtype=np.int64)) % cfg.queues


def put_arrow_columns(broker: Broker, cfg: TopicConfig, cols: ArrowColumns,
                      form: Answer = "full") -> tuple[list[Any], list[PutResult], bool]:
    """Write the columns (on the write pool); (per-message results in request order, or with
    ``form="summary"`` the store's result per queue, the put's last record for replication,
    whether the flush confirmed it).  On InvalidMessageError nothing was written: the caller
    takes the message path, which names the culprit."""
    qids = _queues(broker, cfg, cols)
    groups, rows_of = [], []
    for q in np.unique(qids).tolist():
        rows = np.flatnonzero(qids == q)
        whole = len(rows) == len(qids)
        keys = None if cols.keys is None else cols.keys if whole else np.array(cols.keys, object)[rows].tolist()
        groups.append((q, cols.bodies if whole else cols.bodies.take(rows), keys))
        rows_of.append(rows)
    flushed = True
    try:
        results: list[ColumnPutResult] = broker.store.put_column_groups(cfg.name, groups, cols.tags)
    except FlushTimeoutError as exc:  # stored; fdatasync did not confirm it in time
        results, flushed = exc.results, False
    if form == "summary":  # queues in the order of their first row (see produce_answer)
        return [results[i] for i in np.argsort([rows[0] for rows in rows_of])], [_last(results)], flushed
    return _answer(qids, rows_of, results), [_last(results)], flushed


def _answer(qids: np.ndarray, rows_of: list[np.ndarray], results: list[ColumnPutResult]) -> list[dict[str, Any]]:
    qoffs, phys = np.empty(len(qids), np.int64), np.empty(len(qids), np.int64)
    for rows, res in zip(rows_of, results):
        qoffs[rows] = res.first_queue_offset + np.arange(len(rows))
        phys[rows] = res.phy_offsets
    ids = make_msg_ids(results[0].store_host, phys)
    return [{"msg_id": m, "queue_id": q, "queue_offset": o} for m, q, o in zip(ids, qids.tolist(), qoffs.tolist())]


def _last(results: list[ColumnPutResult]) -> PutResult:
    """The put's last record in the CommitLog (what a SYNC_MASTER slave must hold)."""
    res = max(results, key=lambda r: r.phy_offsets[-1])
    return PutResult("", res.topic, res.queue_id, res.first_queue_offset + len(res) - 1, int(res.phy_offsets[-1]),
                     int(res.sizes[-1]), res.store_timestamp)


def _json_columns(raw: bytes, max_messages: int, extras: dict[str, Any]) -> ArrowColumns | None:
    """A JSON batch of plain text bodies as columns; other shapes leave the parsed body in
    ``extras["json_doc"]`` for the per-message path."""
    doc = load_json_produce(raw)
    texts = plain_json_bodies(doc, max_messages)
    if texts is None or len(texts) < _MIN_JSON_COLUMN_MESSAGES:
        extras["json_doc"] = doc
        return None
    joined = "".join(texts)
    if joined.isascii():  # one encode for the whole batch: offsets are the text lengths
        offsets = np.zeros(len(texts) + 1, np.int64)
        np.cumsum(np.fromiter(map(len, texts), np.int64, len(texts)), out=offsets[1:])
        bodies = PackedBodies(np.frombuffer(joined.encode("ascii"), np.uint8), offsets)
    else:
        bodies = PackedBodies.from_bytes([t.encode("utf-8") for t in texts])
    return ArrowColumns(bodies, None, None, None)


def _columns(raw: bytes, arrow: bool, max_messages: int, extras: dict[str, Any]) -> ArrowColumns | None:
    return arrow_columns(raw, max_messages) if arrow else _json_columns(raw, max_messages, extras)


async def produce_columns(broker: Broker, cfg: TopicConfig, raw: bytes, arrow: bool, started: float,
                          extras: dict[str, Any]) -> Response | None:
    """An Arrow body, or a JSON batch of plain bodies, written by columns; None: take the
    per-message path (a parsed JSON body is left in ``extras["json_doc"]``)."""
    limit = broker.settings.limits.max_batch_messages
    if len(raw) <= _INLINE_PARSE_BYTES:
        cols = _columns(raw, arrow, limit, extras)
    else:
        cols = await asyncio.get_running_loop().run_in_executor(None, _columns, raw, arrow, limit, extras)
    if cols is None:
        return None
    n = len(cols.bodies)
    try:
        check_body_sizes(broker, cols)
        form: Answer = extras.get("answer", "full")
        results, last, flushed = await broker.gate.run(put_arrow_columns, broker, cfg, cols, form,
                                                       offload=n > _INLINE_COLUMN_MESSAGES)
        send_status = await broker.replication.confirm(last, flushed)
    except InvalidMessageError as exc:
        if isinstance(exc, MessageTooLargeError) and "body" in str(exc):
            broker.metrics.produce_requests.inc(outcome=type(exc).__name__)
            raise
        return None  # nothing was written: the message path names the culprit
    except Exception as exc:
        broker.metrics.produce_requests.inc(outcome=type(exc).__name__)
        raise
    m = broker.metrics
    m.produce_requests.inc(outcome="ok")
    m.produce_messages.inc(n, topic=cfg.name)
    m.produce_bytes.inc(cols.bodies.nbytes(), topic=cfg.name)
    m.produce_latency.observe(time.perf_counter() - started)
    body = column_summary(send_status, results) if form == "summary" else {"status": send_status, "results": results}
    return Response(orjson.dumps(body), media_type="application/json")
