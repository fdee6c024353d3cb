"""Turn a :class:`store.DispatchBatch` into Arrow rows of the mirror table.

Table layout (one row per user message, partitioned by ``store_date``)::

    topic            string
    queue_id         int32
    queue_offset     int64
    commitlog_offset int64            physical offset of the record
    msg_id           string
    keys             list<string>
    tags             string           nullable
    properties       map<string, string>
    born_timestamp   timestamp[us, UTC]
    store_timestamp  timestamp[us, UTC]
    size             int32            whole record size in the CommitLog
    body             binary           null when bodies are off
    store_date       date32           UTC date of store_timestamp (partition)

Records whose sys flag marks a PREPARED or ROLLBACK transaction state are half
messages, not user data, and are left out, as are records of the broker's
internal topics (prefix ``RMQ_SYS_``, RocketMQ's convention).  Properties arrive in the codec's
``name\\x01value\\x02`` layout and are decoded column-wise with Arrow compute.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from store import DispatchBatch, SysFlag
from store.readonly import raw_columns

from .span_columns import key_column, msg_id_column, span_binary, tag_column, topic_column

__all__ = ["MESSAGE_SCHEMA", "PARTITION_COLUMN", "SYSTEM_TOPIC_PREFIX", "batch_to_table", "keep_mask"]

SYSTEM_TOPIC_PREFIX = "RMQ_SYS_"

PARTITION_COLUMN = "store_date"
_TS = pa.timestamp("us", tz="UTC")
MESSAGE_SCHEMA = pa.schema(
    [
        pa.field("topic", pa.string()),
        pa.field("queue_id", pa.int32()),
        pa.field("queue_offset", pa.int64()),
        pa.field("commitlog_offset", pa.int64()),
        pa.field("msg_id", pa.string()),
        pa.field("keys", pa.list_(pa.string())),
        pa.field("tags", pa.string()),
        pa.field("properties", pa.map_(pa.string(), pa.string())),
        pa.field("born_timestamp", _TS),
        pa.field("store_timestamp", _TS),
        pa.field("size", pa.int32()),
        pa.field("body", pa.binary()),
        pa.field(PARTITION_COLUMN, pa.date32()),
    ]
)
_HIDDEN_STATES = np.array(
    [int(SysFlag.TRANSACTION_PREPARED), int(SysFlag.TRANSACTION_ROLLBACK)], dtype=np.int64
)
_TX_MASK = int(SysFlag.TRANSACTION_ROLLBACK)  # bits 2-3


def keep_mask(batch: DispatchBatch, from_offset: int) -> np.ndarray:
    """Rows that are user data at or past ``from_offset``."""
    states = np.asarray(batch.sys_flags, dtype=np.int64) & _TX_MASK
    visible = ~np.isin(states, _HIDDEN_STATES)
    visible &= np.asarray(batch.phy_offsets, dtype=np.int64) >= from_offset
    if any(t.startswith(SYSTEM_TOPIC_PREFIX) for t in set(batch.topics)):
        system = pc.starts_with(pa.array(batch.topics, pa.string()), SYSTEM_TOPIC_PREFIX)
        visible &= ~np.asarray(system)
    return visible


def batch_to_table(batch: DispatchBatch, *, from_offset: int, bodies: bool) -> pa.Table:
    """Rows of ``batch`` at or past ``from_offset``, half messages dropped."""
    mask = keep_mask(batch, from_offset)
    n = len(batch)
    if n == 0 or not mask.any():
        return MESSAGE_SCHEMA.empty_table()
    store_ts = _timestamps(batch.store_timestamps)
    fixed = [
        pa.array(np.asarray(batch.queue_ids, dtype=np.int32)),
        pa.array(np.asarray(batch.queue_offsets, dtype=np.int64)),
        pa.array(np.asarray(batch.phy_offsets, dtype=np.int64)),
    ]
    varying = _span_columns(batch, bodies) or _list_columns(batch, bodies)
    topic, msg_id, keys, tags, properties, body = varying
    columns = [topic, *fixed, msg_id, keys, tags, properties, _timestamps(batch.born_timestamps), store_ts,
               pa.array(np.asarray(batch.sizes, dtype=np.int32)), body, pc.cast(store_ts, pa.date32())]
    table = pa.Table.from_arrays(columns, schema=MESSAGE_SCHEMA)
    return table if mask.all() else table.filter(pa.array(mask))


def _list_columns(batch: DispatchBatch, bodies: bool) -> list[pa.Array]:
    """topic, msg_id, keys, tags, properties, body from the batch's Python lists."""
    n = len(batch)
    return [
        pa.array(batch.topics, pa.string()),
        pa.array(batch.msg_ids, pa.string()),
        pa.array(batch.keys, pa.list_(pa.string())),
        pa.array(batch.tags, pa.string()),
        decode_properties_column(batch.properties_raw),
        pa.array(batch.bodies, pa.binary()) if bodies else pa.nulls(n, pa.binary()),
    ]


def _span_columns(batch: DispatchBatch, bodies: bool) -> list[pa.Array] | None:
    """The same columns gathered from the CommitLog bytes (None: not parsed from bytes, or odd records)."""
    raw = raw_columns(batch)
    if raw is None or raw.has_slow:
        return None
    try:
        props = span_binary(raw.buf, raw.rest_start, raw.rest_end)
        return [
            topic_column(batch.topics),
            msg_id_column(raw.hosts, batch.phy_offsets),
            key_column(raw),
            tag_column(raw),
            decode_properties_column(props),
            span_binary(raw.buf, raw.body_start, raw.body_end) if bodies else pa.nulls(len(batch), pa.binary()),
        ]
    except pa.ArrowInvalid:  # e.g. a key that is not UTF-8: the list path replaces bad bytes
        return None


def _timestamps(ms: np.ndarray) -> pa.Array:
    micros = np.asarray(ms, dtype=np.int64) * 1000
    return pa.array(micros, pa.int64()).cast(_TS)


def decode_properties_column(raw: list[bytes] | pa.Array) -> pa.MapArray:
    """Decode ``name\\x01value\\x02`` pairs of every row into one map column."""
    n = len(raw)
    binary = raw if isinstance(raw, pa.Array) else pa.array(raw, pa.binary())
    if n == 0 or not pc.max(pc.binary_length(binary)).as_py():
        return pa.MapArray.from_arrays(
            pa.array(np.zeros(n + 1, dtype=np.int32)),
            pa.array([], pa.string()),
            pa.array([], pa.string()),
        )
    text = binary.cast(pa.string())
    pairs = pc.split_pattern(text, "\x02")
    flat = pc.list_flatten(pairs)
    parents = np.asarray(pc.list_parent_indices(pairs))
    nonempty = np.asarray(pc.greater(pc.utf8_length(flat), 0).fill_null(False))
    flat = flat.filter(pa.array(nonempty))
    counts = np.bincount(parents[nonempty], minlength=n)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    kv = pc.split_pattern(flat, "\x01", max_splits=1)
    names = pc.list_element(kv, 0)
    has_value = np.asarray(pc.greater(pc.list_value_length(kv), 1))
    padded = pc.list_slice(kv, 1, 2)
    values = pc.list_flatten(padded)
    value_col = _scatter(values, has_value)
    return pa.MapArray.from_arrays(pa.array(offsets), names, value_col)


def _scatter(values: pa.Array, present: np.ndarray) -> pa.Array:
    """Values at positions where ``present`` holds, "" elsewhere."""
    if present.all():
        return values
    out = np.full(len(present), "", dtype=object)
    out[present] = values.to_numpy(zero_copy_only=False)
    return pa.array(out, pa.string())
