"""Typed and raw table topics on a real MessageStore and real Delta tables."""

from __future__ import annotations

import datetime as dt
import shutil
import threading
import time
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, QueryBuilder

from connectors.tables import TableSpec, TableTopics
from store import MessageStore

from .conftest import put_json, wait_caught_up

ORDER = {
    "type": "object",
    "properties": {
        "order_id": {"type": "string"},
        "amount": {"type": "number"},
        "ts": {"type": "string", "format": "date-time"},
        "customer": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "region": {"enum": ["eu", "us"]}},
            "required": ["name"],
        },
        "items": {"type": "array", "items": {"type": "object", "properties": {"sku": {"type": "string"}}}},
    },
    "required": ["order_id", "amount"],
}


def typed(**kw: object) -> TableSpec:
    return TableSpec.from_json({"mode": "typed", "schema": ORDER, "target_lag_s": 0.2, **kw})


def order(i: int, region: str = "eu") -> dict:
    return {"order_id": f"o{i}", "amount": i * 1.5, "ts": f"2026-03-0{1 + i % 3}T10:00:00Z",
            "customer": {"name": f"c{i % 4}", "region": region}, "items": [{"sku": f"s{i}"}], "extra": "ignored"}


def sql(uri: str, statement: str) -> list[dict]:
    return pa.table(QueryBuilder().register("orders", DeltaTable(uri)).execute(statement).read_all()).to_pylist()


def test_typed_table_from_json_bodies_is_queried_by_nested_field(store: MessageStore, tables: TableTopics) -> None:
    tables.configure("orders", typed())
    put_json(store, "orders", [order(i, "us" if i % 2 else "eu") for i in range(40)], keys=[f"k{i}" for i in range(40)])
    status = wait_caught_up(tables, "orders")
    assert status["rows"] == 40 and status["dlq_rows"] == 0
    got = sql(tables.table_uri("orders"), "SELECT customer['region'] AS region, sum(amount) AS total, count(*) AS n "
                                         "FROM orders GROUP BY customer['region'] ORDER BY region")
    assert got == [{"region": "eu", "total": sum(i * 1.5 for i in range(0, 40, 2)), "n": 20},
                   {"region": "us", "total": sum(i * 1.5 for i in range(1, 40, 2)), "n": 20}]
    row = sql(tables.table_uri("orders"), "SELECT * FROM orders WHERE order_id = 'o7'")[0]
    assert row["ts"] == dt.datetime(2026, 3, 2, 10, tzinfo=dt.timezone.utc)
    assert row["items"] == [{"sku": "s7"}] and row["_sparkmq_key"] == "k7" and row["_sparkmq_tags"] == "T"
    assert row["_sparkmq_properties"] == [("n", "7")] and row["_sparkmq_queue_offset"] == 7


def test_bad_bodies_go_to_the_dead_letter_table_with_the_field_and_reason(
        store: MessageStore, tables: TableTopics) -> None:
    tables.configure("orders", typed())
    bad = [b"not json", {"order_id": "x", "amount": "12"}, {"amount": 1}, b"[1, 2]",
           {"order_id": "y", "amount": 1, "customer": {"region": "eu"}},
           {"order_id": "z", "amount": 1, "customer": {"name": "n", "region": "mars"}},
           {"order_id": "w", "amount": 1, "ts": "yesterday"}]
    docs: list[object] = [order(0), *bad, order(1)]
    put_json(store, "orders", docs)
    status = wait_caught_up(tables, "orders")
    assert (status["rows"], status["dlq_rows"]) == (2, 7)
    letters = DeltaTable(tables.dlq_uri("orders")).to_pyarrow_table().sort_by("commitlog_offset").to_pylist()
    assert [(r["error_field"], r["body"]) for r in letters][:2] == [(None, b"not json"),
                                                                    ("amount", b'{"order_id":"x","amount":"12"}')]
    errors = [r["error"] for r in letters]
    assert errors[0].startswith("body is not JSON")
    assert errors[1] == 'field \'amount\': expected number, got string "12"'
    assert "'order_id'" in errors[2] and "required" in errors[2]
    assert "not a JSON object" in errors[3]
    assert "'customer.name'" in errors[4] and "'customer.region'" in errors[5] and "mars" not in errors[5].split(":")[0]
    assert "'ts'" in errors[6] and "date-time" in errors[6]
    assert [r["topic"] for r in letters] == ["orders"] * 7 and letters[0]["properties"] == [("n", "1")]
    assert [r["order_id"] for r in sql(tables.table_uri("orders"), "SELECT order_id FROM orders ORDER BY 1")] == \
        ["o0", "o1"]


def test_raw_table_keeps_the_mirror_columns_of_its_own_topic_only(store: MessageStore, tables: TableTopics) -> None:
    tables.configure("clicks", TableSpec.from_json({"mode": "raw", "target_lag_s": 0.2}))
    put_json(store, "clicks", [{"n": i} for i in range(10)])
    put_json(store, "other", [{"n": i} for i in range(5)])
    wait_caught_up(tables, "clicks")
    rows = DeltaTable(tables.table_uri("clicks")).to_pyarrow_table().sort_by("commitlog_offset").to_pylist()
    assert [r["body"] for r in rows] == [f'{{"n":{i}}}'.encode() for i in range(10)]
    assert {r["topic"] for r in rows} == {"clicks"} and rows[0]["store_date"] == dt.datetime.now(dt.timezone.utc).date()


def test_day_partitioned_table_has_one_partition_per_day(store: MessageStore, tables: TableTopics) -> None:
    tables.configure("orders", typed(partition_by="day(ts)"))
    put_json(store, "orders", [order(i) for i in range(9)])
    wait_caught_up(tables, "orders")
    table = DeltaTable(tables.table_uri("orders"))
    assert table.metadata().partition_columns == ["_sparkmq_day"]
    days = sorted({p["_sparkmq_day"] for p in table.partitions()})
    assert days == ["2026-03-01", "2026-03-02", "2026-03-03"]


def test_enabling_a_table_backfills_the_topic_from_its_oldest_message(store: MessageStore, tables: TableTopics) -> None:
    put_json(store, "noise", [{"n": i} for i in range(300)])
    put_json(store, "orders", [order(i) for i in range(100)], queue_id=1)
    put_json(store, "orders", [order(i) for i in range(100, 300)], queue_id=0)
    put_json(store, "noise", [{"n": i} for i in range(300)])
    tables.configure("orders", typed())
    put_json(store, "orders", [order(i) for i in range(300, 310)], queue_id=1)
    status = wait_caught_up(tables, "orders")
    assert status["rows"] == 310
    ids = DeltaTable(tables.table_uri("orders")).to_pyarrow_table(columns=["order_id"]).column(0).to_pylist()
    assert sorted(ids) == sorted(f"o{i}" for i in range(310))


def test_disabling_stops_writes_and_stop_joins_the_thread(store: MessageStore, tables: TableTopics) -> None:
    tables.configure("orders", typed())
    put_json(store, "orders", [order(0)])
    wait_caught_up(tables, "orders")
    tables.configure("orders", None)
    put_json(store, "orders", [order(1)])
    assert "orders" not in tables.status()
    tables.stop()
    tables.stop()
    assert DeltaTable(tables.table_uri("orders")).to_pyarrow_table().num_rows == 1
    assert not [t for t in threading.enumerate() if t.name == "sparkmq-table-topics"]


def test_spark_ddl_schema_types_and_their_dead_letters(store: MessageStore, tables: TableTopics) -> None:
    ddl = "order_id STRING NOT NULL, amount DECIMAL(8,2), qty SMALLINT, day DATE, tags ARRAY<STRING>"
    tables.configure("orders", TableSpec.from_json({"mode": "typed", "schema": ddl, "target_lag_s": 0.2}))
    put_json(store, "orders", [
        {"order_id": "a", "amount": "12.50", "qty": 3, "day": "2026-03-01", "tags": ["x", "y"]},
        {"order_id": "b", "amount": 7, "qty": 40000},
        {"order_id": "c", "amount": 1.234},
        {"order_id": "d", "day": 20260301},
    ])
    status = wait_caught_up(tables, "orders")
    assert (status["rows"], status["dlq_rows"]) == (1, 3)
    row = DeltaTable(tables.table_uri("orders")).to_pyarrow_table().to_pylist()[0]
    assert (str(row["amount"]), row["qty"], row["day"], row["tags"]) == ("12.50", 3, dt.date(2026, 3, 1), ["x", "y"])
    errors = DeltaTable(tables.dlq_uri("orders")).to_pyarrow_table().sort_by("commitlog_offset")["error"].to_pylist()
    assert errors == ["field 'qty': 40000 does not fit int16", "field 'amount': 1.234 has more than 2 decimal places",
                      "field 'day': expected ISO 8601 date string, got integer 20260301"]


def test_the_table_commits_on_the_target_lag_while_messages_arrive(store: MessageStore, tables: TableTopics) -> None:
    tables.configure("orders", typed(target_lag_s=0.5))
    seen_lag = []
    deadline = time.monotonic() + 3.0
    i = 0
    while time.monotonic() < deadline:
        put_json(store, "orders", [order(i)])
        i += 1
        time.sleep(0.05)
        seen_lag.append(tables.status()["orders"]["lag_seconds"])
    status = wait_caught_up(tables, "orders")
    assert status["rows"] == i
    assert status["version"] >= 4, "the table did not commit while messages kept arriving"
    assert max(seen_lag) < 3.0


def test_a_failing_table_shows_its_error_and_the_other_tables_go_on(
        store: MessageStore, tables: TableTopics, tmp_path: Path) -> None:
    tables.configure("orders", typed())
    tables.configure("clicks", TableSpec.from_json({"mode": "raw", "target_lag_s": 0.2}))
    put_json(store, "orders", [order(0)])
    wait_caught_up(tables, "orders")
    broken = Path(tables.table_uri("orders"))
    shutil.rmtree(broken)
    broken.write_text("not a directory")  # every later commit of 'orders' fails
    put_json(store, "orders", [order(1)])
    for i in range(3):
        put_json(store, "clicks", [{"n": i}])
        status = wait_caught_up(tables, "clicks")
    assert status["rows"] == 3 and status["last_error"] is None
    deadline = time.monotonic() + 30
    while tables.status()["orders"]["last_error"] is None and time.monotonic() < deadline:
        time.sleep(0.05)
    orders = tables.status()["orders"]
    assert orders["last_error"] and orders["lag_bytes"] > 0
