"""Table topics over time: restart, schema evolution, refused changes, dead-letter replay, rebuild."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from deltalake import DeltaTable

from connectors.errors import SchemaChangeError
from connectors.tables import TableSpec, TableTopics, Upkeep
from store import MessageStore

from .conftest import put_json, wait_caught_up


def spec(regions: list[str], *, extra: dict | None = None, **kw: object) -> TableSpec:
    props: dict = {"id": {"type": "string"}, "region": {"enum": regions}, "amount": {"type": "number"}}
    props.update(extra or {})
    return TableSpec.from_json({"mode": "typed", "target_lag_s": 0.2, **kw,
                                "schema": {"type": "object", "properties": props, "required": ["id"]}})


def rows(uri: str, *cols: str) -> list[dict]:
    table = DeltaTable(uri).to_pyarrow_table(columns=list(cols))
    return sorted(table.to_pylist(), key=lambda r: [str(r[c]) for c in cols])


def test_restart_resumes_where_the_table_stopped_exactly_once(store: MessageStore, tmp_path: Path) -> None:
    written = 0
    for round_ in range(3):
        service = TableTopics(store, tmp_path / "tables", app_id="broker-a")
        service.configure("orders", spec(["eu"]))
        service.start()
        put_json(store, "orders", [{"id": f"{round_}-{i}", "region": "eu"} for i in range(100)] + [b"oops"])
        written += 100
        status = wait_caught_up(service, "orders")
        put_json(store, "orders", [{"id": f"{round_}-late-{i}"} for i in range(50)])  # lands while stopping
        written += 50
        service.stop()
    assert status["rows"] >= 200
    ids = [r["id"] for r in rows(str(tmp_path / "tables" / "orders"), "id")]
    assert len(ids) == written == len(set(ids))
    assert len(rows(str(tmp_path / "tables" / "orders__dlq"), "commitlog_offset")) == 3


def test_adding_an_optional_field_adds_a_column_old_rows_read_null(store: MessageStore, tables: TableTopics) -> None:
    tables.configure("orders", spec(["eu"]))
    put_json(store, "orders", [{"id": "a", "note": "early"}])
    wait_caught_up(tables, "orders")
    tables.configure("orders", spec(["eu"], extra={"note": {"type": "string"}}))
    put_json(store, "orders", [{"id": "b", "note": "late"}])
    wait_caught_up(tables, "orders")
    assert rows(tables.table_uri("orders"), "id", "note") == [{"id": "a", "note": None}, {"id": "b", "note": "late"}]


def test_a_narrowing_change_is_refused_and_the_table_keeps_working(store: MessageStore, tables: TableTopics) -> None:
    tables.configure("orders", spec(["eu"]))
    narrower = TableSpec.from_json({"mode": "typed", "schema": "id STRING, region STRING, amount INT"})
    with pytest.raises(SchemaChangeError) as err:
        tables.configure("orders", narrower)
    assert err.value.field == "amount" and "float64 -> int32" in str(err.value)
    with pytest.raises(SchemaChangeError):
        tables.configure("orders", spec(["eu"], write_mode="upsert"))
    put_json(store, "orders", [{"id": "a", "amount": 2.5}])
    status = wait_caught_up(tables, "orders")
    assert status["rows"] == 1 and tables.specs()["orders"] == spec(["eu"])


def test_replay_dlq_after_a_schema_fix_moves_rows_that_now_fit_exactly_once(
        store: MessageStore, tables: TableTopics) -> None:
    tables.configure("orders", spec(["eu", "us"]))
    put_json(store, "orders", [{"id": "a", "region": "eu"}, {"id": "b", "region": "apac"}, b"{broken",
                               {"id": "c", "region": "apac"}])
    assert wait_caught_up(tables, "orders")["dlq_rows"] == 3
    assert tables.replay_dlq("orders") == {"replayed": 0, "remaining": 3}
    tables.configure("orders", spec(["eu", "us", "apac"]))
    assert tables.replay_dlq("orders") == {"replayed": 2, "remaining": 1}
    assert tables.replay_dlq("orders") == {"replayed": 0, "remaining": 1}
    put_json(store, "orders", [{"id": "d", "region": "apac"}])
    status = wait_caught_up(tables, "orders")
    assert (status["rows"], status["dlq_rows"]) == (4, 1)
    assert [r["id"] for r in rows(tables.table_uri("orders"), "id")] == ["a", "b", "c", "d"]
    assert rows(tables.dlq_uri("orders"), "body")[0]["body"] == b"{broken"


def test_replay_into_an_upsert_table_respects_later_messages_of_the_key(
        store: MessageStore, tables: TableTopics) -> None:
    tables.configure("acct", spec(["eu"], write_mode="upsert"))
    put_json(store, "acct", [{"id": "1", "region": "eu"}, {"id": "1b", "region": "apac"}, b"",
                             {"id": "2", "region": "apac"},
                             {"id": "3a", "region": "apac"}, {"id": "3b", "region": "eu"}],
             keys=["k1", "k1", "k1", "k2", "k3", "k3"])
    assert wait_caught_up(tables, "acct")["dlq_rows"] == 3
    tables.configure("acct", spec(["eu", "apac"], write_mode="upsert"))
    assert tables.replay_dlq("acct") == {"replayed": 3, "remaining": 0}
    assert rows(tables.table_uri("acct"), "_sparkmq_key", "id") == [
        {"_sparkmq_key": "k2", "id": "2"}, {"_sparkmq_key": "k3", "id": "3b"}]


def test_re_enabling_with_another_layout_rebuilds_the_table_from_the_log(
        store: MessageStore, tables: TableTopics) -> None:
    tables.configure("orders", spec(["eu"]))
    put_json(store, "orders", [{"id": "a"}, {"id": "b"}], keys=["k", "k"])
    wait_caught_up(tables, "orders")
    tables.configure("orders", None)
    tables.configure("orders", spec(["eu"], write_mode="upsert"))
    status = wait_caught_up(tables, "orders")
    assert status["write_mode"] == "upsert" and status["rows"] == 1
    assert rows(tables.table_uri("orders"), "id") == [{"id": "b"}]


def test_small_commits_are_compacted_on_the_upkeep_cadence(store: MessageStore, tmp_path: Path) -> None:
    service = TableTopics(store, tmp_path / "tables", app_id="broker-a",
                          upkeep=Upkeep(compact_every_commits=4, vacuum_retention_hours=0))
    service.configure("orders", spec(["eu"], target_lag_s=0.05))
    service.start()
    try:
        for i in range(9):
            put_json(store, "orders", [{"id": f"{i}-{j}"} for j in range(20)])
            wait_caught_up(service, "orders")
            time.sleep(0.05)
        status = wait_caught_up(service, "orders")
    finally:
        service.stop()
    table = DeltaTable(service.table_uri("orders"))
    assert status["rows"] == 180 and table.version() >= 9
    assert len(table.file_uris()) <= 3, "small files were not compacted"
    assert len(list((tmp_path / "tables" / "orders").glob("*.parquet"))) <= 3, "compacted files were not vacuumed"
    assert len(rows(service.table_uri("orders"), "id")) == 180
