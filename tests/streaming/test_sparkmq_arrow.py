"""Arrow conversion: broker pages → batches in exactly the schema Spark expects."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema

from streaming.schema import ARROW_SCHEMA, page_to_batch, spark_schema
from streaming.writer import produce_tables

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
    assert to_arrow_schema(spark_schema(), timezone="UTC").equals(ARROW_SCHEMA)


def test_page_conversion_keeps_values_and_derives_key() -> None:
    batch = page_to_batch(broker_page())
    assert batch.schema.equals(ARROW_SCHEMA)
    rows = batch.to_pylist()
    assert [r["key"] for r in rows] == ["k1", None, None]
    assert rows[0]["keys"] == ["k1", "k2"] and rows[0]["properties"] == [("p", "1")]
    assert rows[0]["value"] == b"\x00\xff" and rows[2]["tags"] == "B"
    utc = dt.timezone.utc
    assert rows[0]["timestamp"] == dt.datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=utc)
    assert rows[0]["born_timestamp"] == dt.datetime(2023, 11, 14, 22, 13, 20, tzinfo=utc)


def test_sliced_page_derives_the_right_first_key() -> None:
    batch = page_to_batch(broker_page().slice(1))
    assert [r["key"] for r in batch.to_pylist()] == [None, None]
    assert page_to_batch(broker_page().slice(0, 0)).num_rows == 0


def test_sink_rows_become_arrow_produce_bodies_grouped_by_topic() -> None:
    batch = pa.record_batch({
        "value": pa.array([b"a", None, b"\xff"]),
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
    assert out["two"].to_pylist()[0]["body"] == b""  # a null value is an empty body
    fixed = produce_tables(batch, "fixed")
    assert list(fixed) == ["fixed"] and fixed["fixed"].num_rows == 3
