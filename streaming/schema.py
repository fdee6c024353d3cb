"""The source's Spark schema (Kafka's columns) and the Arrow conversions around it.

Broker page (``Accept: application/vnd.apache.arrow.stream``) -> Spark rows::

    broker column                 Spark column      type                      when
    ---------------------------   ---------------   -----------------------   ----------------
    keys[0]                       key               binary (null: no key)     always
    body                          value             binary                    always
    topic                         topic             string                    always
    queue_id                      partition         int                       always
    offset                        offset            bigint                    always
    born_timestamp                timestamp         timestamp (CreateTime)    always
    (constant 0 = CreateTime)     timestampType     int                       always
    properties + tags + keys      headers           array<struct<key:string,  includeHeaders
                                                      value:binary>>
    queue_id                      queue_id          int                       includeSparkmqColumns
    msg_id                        msg_id            string                      "
    tags                          tags              string                      "
    keys                          keys              array<string>               "
    store_timestamp               store_timestamp   timestamp                   "
    (the partition's broker)      broker            string                    namesrv, or
                                                                              includeSparkmqColumns

``headers`` holds the message's properties in stored order, then ``TAGS``
and ``KEYS`` (space separated) as RocketMQ names them; a message with none
has ``headers = null``, as Kafka's records without headers do. With
``namesrv`` queue ids repeat across brokers, so ``(topic, partition,
offset, broker)`` names a message.

Spark checks a ``RecordBatch`` yielded by ``read()`` against
``to_arrow_schema(schema, timezone="UTC")``; :func:`arrow_schema` is exactly
that, so batches are built with it and pass unconverted.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .options import Columns

__all__ = [
    "SCHEMA_DDL", "ARROW_SCHEMA", "KAFKA_COLUMNS", "SPARKMQ_COLUMNS", "column_names", "arrow_schema", "spark_schema",
    "page_to_batch", "empty_batch", "headers_array",
]

KAFKA_COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp", "timestampType")
SPARKMQ_COLUMNS = ("queue_id", "msg_id", "tags", "keys", "store_timestamp")

_TS = pa.timestamp("us", tz="UTC")
_KEYS = pa.list_(pa.field("element", pa.string()))
_HEADER = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
_HEADERS = pa.list_(pa.field("element", _HEADER))

_ARROW = {
    "key": pa.binary(), "value": pa.binary(), "topic": pa.string(), "partition": pa.int32(),
    "offset": pa.int64(), "timestamp": _TS, "timestampType": pa.int32(), "headers": _HEADERS,
    "queue_id": pa.int32(), "msg_id": pa.string(), "tags": pa.string(), "keys": _KEYS,
    "store_timestamp": _TS, "broker": pa.string(),
}


SCHEMA_DDL = ("key binary, value binary, topic string, partition int, offset bigint, "
              "timestamp timestamp, timestampType int")


def column_names(cols: Columns = Columns()) -> tuple[str, ...]:
    """The source's columns, in order, for these options."""
    names = KAFKA_COLUMNS + (("headers",) if cols.headers else ())
    if cols.sparkmq:
        names += SPARKMQ_COLUMNS
    return names + (("broker",) if cols.broker else ())


@functools.lru_cache(maxsize=None)
def arrow_schema(cols: Columns = Columns()) -> pa.Schema:
    """The source's Arrow schema (built once per column choice: every page of a read uses it)."""
    return pa.schema([pa.field(n, _ARROW[n]) for n in column_names(cols)])


ARROW_SCHEMA = pa.schema([pa.field(n, _ARROW[n]) for n in KAFKA_COLUMNS])


def spark_schema(cols: Columns = Columns()) -> Any:
    """The source schema as a pyspark ``StructType`` (needs no SparkSession)."""
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    s, b, i = StringType(), BinaryType(), IntegerType()
    header = StructType([StructField("key", s), StructField("value", b)])
    types = {
        "key": b, "value": b, "topic": s, "partition": i, "offset": LongType(),
        "timestamp": TimestampType(), "timestampType": i, "headers": ArrayType(header),
        "queue_id": i, "msg_id": s, "tags": s, "keys": ArrayType(s),
        "store_timestamp": TimestampType(), "broker": s,
    }
    return StructType([StructField(n, types[n]) for n in column_names(cols)])


def empty_batch(cols: Columns = Columns()) -> pa.RecordBatch:
    """A zero-row batch with :func:`arrow_schema`."""
    schema = arrow_schema(cols)
    return pa.RecordBatch.from_arrays([pa.array([], type=f.type) for f in schema], schema=schema)


def _first_key(keys: pa.Array) -> pa.Array:
    """keys[i][0] as binary for each row, null where the list is null or empty."""
    if not len(keys.flatten()):  # no row has a key (a bulk produce's page): nothing to look at
        return pa.nulls(len(keys), pa.binary())
    lengths = pc.fill_null(pc.list_value_length(keys), 0).to_numpy(zero_copy_only=False)
    starts = keys.offsets.to_numpy()[:-1]
    empty = lengths == 0
    idx = pa.array(np.where(empty, 0, starts), mask=empty, type=pa.int64())
    return pc.take(keys.values, idx).cast(pa.binary())


def _as(arr: Any, typ: pa.DataType) -> pa.Array:
    return arr if arr.type == typ else arr.cast(typ)


def _column(page: pa.RecordBatch | pa.Table, name: str) -> pa.Array:
    if isinstance(page, pa.Table):
        col = page.column(name)
        return col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()  # one chunk: no copy
    return page.column(name)


def headers_array(props: pa.MapArray, tags: pa.Array, keys: pa.Array) -> pa.Array:
    """Kafka-style headers per row: properties, then TAGS and KEYS; null when none."""
    n = len(props)
    poff = props.offsets.to_numpy()
    plen = np.where(props.is_valid().to_numpy(zero_copy_only=False), np.diff(poff), 0)
    has_tags = tags.is_valid().to_numpy(zero_copy_only=False)
    klen = pc.fill_null(pc.list_value_length(keys), 0).to_numpy(zero_copy_only=False)
    has_keys = klen > 0
    count = plen + has_tags + has_keys
    pstart = int(poff[0])
    names = pa.concat_arrays([
        _as(props.keys.slice(pstart, int(plen.sum())), pa.string()),
        pa.array(np.full(int(has_tags.sum()), "TAGS", dtype=object), pa.string()),
        pa.array(np.full(int(has_keys.sum()), "KEYS", dtype=object), pa.string()),
    ])
    values = pa.concat_arrays([
        _as(props.items.slice(pstart, int(plen.sum())), pa.binary()),
        _as(tags.filter(pa.array(has_tags)), pa.binary()),
        _as(pc.binary_join(keys.filter(pa.array(has_keys)), " "), pa.binary()),
    ])
    rows = np.concatenate([np.repeat(np.arange(n), plen), np.flatnonzero(has_tags),
                           np.flatnonzero(has_keys)])
    order = pa.array(np.argsort(rows, kind="stable"))
    entries = pa.StructArray.from_arrays([names.take(order), values.take(order)],
                                         fields=list(_HEADER))
    offsets = pa.array(np.concatenate([[0], np.cumsum(count)]).astype(np.int32))
    return pa.ListArray.from_arrays(offsets, entries, type=_HEADERS,
                                    mask=pa.array(count == 0))


def page_to_batch(page: pa.RecordBatch | pa.Table, cols: Columns = Columns(),
                  broker: str = "", queue: tuple[str, int] | None = None) -> pa.RecordBatch:
    """Convert one broker Arrow page into a batch with :func:`arrow_schema`.

    ``queue`` (topic, queue id) fills those columns when the page leaves them out
    (the source asks only for the ``fields`` it needs). No column is copied: the
    page's columns are used as they are (or cast when their type differs), and
    constant columns are built from one value."""
    schema = arrow_schema(cols)
    n = page.num_rows
    if n == 0:
        return empty_batch(cols)
    keys = _as(_column(page, "keys"), _KEYS)
    names = page.schema.names
    if queue is not None and "queue_id" not in names:
        qids = pa.array(np.full(n, queue[1], np.int32))
    else:
        qids = _as(_column(page, "queue_id"), pa.int32())
    topics = (pa.repeat(pa.scalar(queue[0], pa.string()), n) if queue is not None and "topic" not in names
              else _as(_column(page, "topic"), pa.string()))
    arrays: dict[str, Any] = {
        "key": _first_key(keys),
        "value": _as(_column(page, "body"), pa.binary()),
        "topic": topics,
        "partition": qids,
        "offset": _as(_column(page, "offset"), pa.int64()),
        "timestamp": _as(_column(page, "born_timestamp"), _TS),
        "timestampType": pa.array(np.zeros(n, dtype=np.int32)),
    }
    if cols.broker:
        arrays["broker"] = (pa.nulls(n, pa.string()) if not broker
                            else pa.repeat(pa.scalar(broker, pa.string()), n))
    if cols.headers:
        props = _column(page, "properties")
        arrays["headers"] = headers_array(props, _column(page, "tags"), keys)
    if cols.sparkmq:
        arrays.update(queue_id=qids, msg_id=_as(_column(page, "msg_id"), pa.string()),
                      tags=_as(_column(page, "tags"), pa.string()), keys=keys,
                      store_timestamp=_as(_column(page, "store_timestamp"), _TS))
    return pa.RecordBatch.from_arrays([arrays[f.name] for f in schema], schema=schema)
