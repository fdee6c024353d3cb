"""The source's Spark schema and the Arrow conversions around it.

Broker page (``Accept: application/vnd.apache.arrow.stream``) -> Spark rows::

    broker column                       Spark column     Arrow type Spark expects
    ---------------------------------   --------------   ------------------------------
    topic            string             topic            string
    queue_id         int32              queue_id         int32
    offset           int64              offset           int64
    msg_id           string             msg_id           string
    keys[0]          (derived)          key              string (null when no key)
    keys             list<string>       keys             list<element: string>
    tags             string             tags             string
    properties       map<string,string> properties       map<key: string not null, value: string>
    body             binary             value            binary
    store_timestamp  timestamp[ms,UTC]  timestamp        timestamp[us, tz=UTC]
    born_timestamp   timestamp[ms,UTC]  born_timestamp   timestamp[us, tz=UTC]

Spark checks a ``RecordBatch`` yielded by ``read()`` against
``to_arrow_schema(schema, timezone="UTC")``; :data:`ARROW_SCHEMA` is exactly
that, so batches are built with it and pass unconverted.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["SCHEMA_DDL", "ARROW_SCHEMA", "spark_schema", "page_to_batch", "empty_batch"]

SCHEMA_DDL = (
    "topic string, queue_id int, offset bigint, msg_id string, key string, "
    "keys array<string>, tags string, properties map<string,string>, value binary, "
    "timestamp timestamp, born_timestamp timestamp"
)

_TS = pa.timestamp("us", tz="UTC")
_KEYS = pa.list_(pa.field("element", pa.string()))
_PROPS = pa.map_(pa.string(), pa.string())

ARROW_SCHEMA = pa.schema(
    [
        pa.field("topic", pa.string()),
        pa.field("queue_id", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("msg_id", pa.string()),
        pa.field("key", pa.string()),
        pa.field("keys", _KEYS),
        pa.field("tags", pa.string()),
        pa.field("properties", _PROPS),
        pa.field("value", pa.binary()),
        pa.field("timestamp", _TS),
        pa.field("born_timestamp", _TS),
    ]
)


def spark_schema() -> "object":
    """The source schema as a pyspark ``StructType`` (needs no SparkSession)."""
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        LongType,
        MapType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    s = StringType()
    return StructType(
        [
            StructField("topic", s),
            StructField("queue_id", IntegerType()),
            StructField("offset", LongType()),
            StructField("msg_id", s),
            StructField("key", s),
            StructField("keys", ArrayType(s)),
            StructField("tags", s),
            StructField("properties", MapType(s, s)),
            StructField("value", BinaryType()),
            StructField("timestamp", TimestampType()),
            StructField("born_timestamp", TimestampType()),
        ]
    )


def empty_batch() -> pa.RecordBatch:
    """A zero-row batch with :data:`ARROW_SCHEMA`."""
    return pa.RecordBatch.from_arrays(
        [pa.array([], type=f.type) for f in ARROW_SCHEMA], schema=ARROW_SCHEMA
    )


def _first_key(keys: pa.Array) -> pa.Array:
    """keys[i][0] for each row, null where the list is null or empty."""
    lengths = pc.fill_null(pc.list_value_length(keys), 0).to_numpy(zero_copy_only=False)
    starts = keys.offsets.to_numpy()[:-1]
    empty = lengths == 0
    idx = pa.array(np.where(empty, 0, starts), mask=empty, type=pa.int64())
    values = keys.values
    if len(values) == 0:
        return pa.nulls(len(keys), pa.string())
    return pc.take(values, idx).cast(pa.string())


def _as(arr: pa.Array, typ: pa.DataType) -> pa.Array:
    return arr if arr.type == typ else arr.cast(typ)


def _properties(arr: pa.Array) -> pa.Array:
    if arr.type == _PROPS:
        return arr
    if isinstance(arr, pa.MapArray):
        return pa.MapArray.from_arrays(
            arr.offsets, _as(arr.keys, pa.string()), _as(arr.items, pa.string()),
            mask=arr.is_null() if arr.null_count else None,
        )
    return arr.cast(_PROPS)


def _column(batch: pa.RecordBatch, name: str) -> pa.Array:
    if isinstance(batch, pa.Table):
        return batch.column(name).combine_chunks()
    return batch.column(name)


def page_to_batch(page: pa.RecordBatch | pa.Table) -> pa.RecordBatch:
    """Convert one broker Arrow page into a batch with :data:`ARROW_SCHEMA`."""
    if page.num_rows == 0:
        return empty_batch()
    keys = _as(_column(page, "keys"), _KEYS)
    arrays = [
        _as(_column(page, "topic"), pa.string()),
        _as(_column(page, "queue_id"), pa.int32()),
        _as(_column(page, "offset"), pa.int64()),
        _as(_column(page, "msg_id"), pa.string()),
        _first_key(keys),
        keys,
        _as(_column(page, "tags"), pa.string()),
        _properties(_column(page, "properties")),
        _as(_column(page, "body"), pa.binary()),
        _as(_column(page, "store_timestamp"), _TS),
        _as(_column(page, "born_timestamp"), _TS),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)
