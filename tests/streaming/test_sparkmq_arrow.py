"""Arrow conversion: broker pages → batches in exactly the schema Spark expects."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import to_arrow_schema

from streaming.errors import SinkError
from streaming.options import Columns
from streaming.schema import ARROW_SCHEMA, arrow_schema, page_to_batch, spark_schema
from streaming.sending import produce_tables

MS = pa.timestamp("ms", tz="UTC")


def broker_page() -> pa.Table:
    return pa.table({
        "topic": ["t"] * 3,
        "queue_id": pa.array([2] * 3, pa.int32()),
        "offset": pa.array([7, 8, 9], pa.int64()),
        "msg_id": ["m7", "m8", "m9"],
        "keys": pa.array([["k1", "k2"], [], None], pa.list_(pa.string())),
        "tags": ["A", None, "B"],
        "properties": pa.array([[("p", "1")], [], None], pa.map_(pa.string(), pa.string())),
        "body": pa.array([b"\x00\xff", b"hi", b""]),
        "born_timestamp": pa.array([1_700_000_000_000] * 3, MS),
        "store_timestamp": pa.array([1_700_000_000_123] * 3, MS),
    })


def test_arrow_schema_is_what_spark_checks_against() -> None:
    for cols in (Columns(), Columns(headers=True), Columns(sparkmq=True, broker=True),
                 Columns(broker=True)):
        assert to_arrow_schema(spark_schema(cols), timezone="UTC").equals(arrow_schema(cols))
    assert ARROW_SCHEMA.names == ["key", "value", "topic", "partition", "offset", "timestamp",
                                  "timestampType"]  # Kafka's columns, in Kafka's order


def test_page_conversion_gives_kafka_columns() -> None:
    batch = page_to_batch(broker_page())
    assert batch.schema.equals(ARROW_SCHEMA)
    rows = batch.to_pylist()
    assert [r["key"] for r in rows] == [b"k1", None, None]
    assert [r["partition"] for r in rows] == [2, 2, 2] and rows[2]["offset"] == 9
    assert rows[0]["value"] == b"\x00\xff" and rows[0]["timestampType"] == 0
    utc = dt.timezone.utc  # Kafka's default CreateTime: when the producer made it
    assert rows[0]["timestamp"] == dt.datetime(2023, 11, 14, 22, 13, 20, tzinfo=utc)


def test_headers_and_sparkmq_columns_on_request() -> None:
    cols = Columns(headers=True, sparkmq=True, broker=True)
    rows = page_to_batch(broker_page(), cols, "broker-a").to_pylist()
    assert rows[0]["headers"] == [{"key": "p", "value": b"1"}, {"key": "TAGS", "value": b"A"},
                                  {"key": "KEYS", "value": b"k1 k2"}]
    assert rows[1]["headers"] is None  # no properties, tags or keys: null, as in Kafka
    assert rows[2]["headers"] == [{"key": "TAGS", "value": b"B"}]
    assert rows[0]["keys"] == ["k1", "k2"] and rows[2]["tags"] == "B"
    assert (rows[0]["queue_id"], rows[0]["msg_id"], rows[0]["broker"]) == (2, "m7", "broker-a")
    utc = dt.timezone.utc
    assert rows[0]["store_timestamp"] == dt.datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=utc)
    # a sliced page (the trim to a partition's end) keeps each row's own entries
    sliced = page_to_batch(broker_page().slice(2), cols, "").to_pylist()
    assert sliced[0]["headers"] == [{"key": "TAGS", "value": b"B"}] and sliced[0]["broker"] is None


def test_sliced_page_derives_the_right_first_key() -> None:
    batch = page_to_batch(broker_page().slice(1))
    assert [r["key"] for r in batch.to_pylist()] == [None, None]
    assert page_to_batch(broker_page().slice(0, 0)).num_rows == 0


def test_sink_rows_become_arrow_produce_bodies_grouped_by_topic() -> None:
    batch = pa.record_batch({
        "value": pa.array([b"a", b"", b"\xff"]),
        "key": ["k", None, None],
        "keys": pa.array([None, ["x", "y"], []], pa.list_(pa.string())),
        "tags": ["T", None, "U"],
        "properties": pa.array([[("x", "1")], None, []], pa.map_(pa.string(), pa.string())),
        "topic": ["one", "two", "one"],
        "offset": pa.array([1, 2, 3], pa.int64()),  # extra columns are ignored
    })
    out = produce_tables(batch, None)
    assert sorted(out) == ["one", "two"]
    one = out["one"].to_pylist()
    assert one == [
        {"body": b"a", "keys": ["k"], "tags": "T", "properties": [("x", "1")]},
        {"body": b"\xff", "keys": [], "tags": "U", "properties": []},
    ]
    fixed = produce_tables(batch, "fixed")
    assert list(fixed) == ["fixed"] and fixed["fixed"].num_rows == 3


def test_sink_takes_kafka_rows_binary_key_partition_and_headers() -> None:
    header = pa.struct([("key", pa.string()), ("value", pa.binary())])
    batch = pa.record_batch({
        "key": pa.array([b"k1", None], pa.binary()),
        "value": pa.array([b"v1", b"v2"]),
        "partition": pa.array([3, None], pa.int32()),
        "headers": pa.array([[{"key": "h", "value": b"x"}, {"key": "TAGS", "value": b"T"},
                              {"key": "sparkmq.tx_id", "value": b"old"}],
                             [{"key": "KEYS", "value": b"a b"}]], pa.list_(header)),
    })
    rows = produce_tables(batch, "t")["t"].to_pylist()
    assert rows[0] == {"body": b"v1", "keys": "k1", "queue_id": 3, "properties": [("h", "x")],
                       "tags": "T"}
    assert rows[1] == {"body": b"v2", "keys": None, "queue_id": None, "properties": [],
                       "tags": None}
    # keys from a KEYS header only when the row has no key column
    keyless = produce_tables(batch.drop_columns(["key"]), "t")["t"].to_pylist()
    assert keyless[1]["keys"] == ["a", "b"]
    with pytest.raises(SinkError, match="null 'value'.*no tombstones"):
        produce_tables(pa.record_batch({"value": pa.array([b"a", None])}), "t")
    with pytest.raises(SinkError, match="binary 'key' is not UTF-8"):
        produce_tables(pa.record_batch({"value": [b"a"], "key": pa.array([b"\xff"])}), "t")
