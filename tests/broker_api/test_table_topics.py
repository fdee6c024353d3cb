"""Table topics through the broker: a real broker process, real Delta tables, SQL, metrics, the CLI.

A topic created (or altered) with ``table`` settings gets a Delta table of its
own; these tests drive that over HTTP and the CLI and read the results the way
a user does: ``POST /v1/sql``, ``GET /v1/topics/{t}``, ``/metrics``, Spark.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx
import orjson
import pytest
from typer.testing import CliRunner

from broker_api.cli import app

ORDERS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "order_id": {"type": "string"},
        "amount": {"type": "number"},
        "region": {"type": "string", "enum": ["eu", "us"]},
        "customer": {"type": "object", "properties": {"name": {"type": "string"}, "vip": {"type": "boolean"}}},
        "ts": {"type": "string", "format": "date-time"},
    },
    "required": ["order_id", "amount"],
}
_LAG = 0.3  # table.target_lag_s: commits come quickly in tests
runner = CliRunner()


@pytest.fixture
def broker(fast_broker: Callable[..., Any]) -> Any:
    return fast_broker()


@pytest.fixture
def http(broker: Any) -> Any:
    with httpx.Client(base_url=broker.url, timeout=60) as c:
        yield c


def _create(http: httpx.Client, name: str, table: dict[str, Any] | None, queues: int = 2) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, "queues": queues}
    if table is not None:
        body["table"] = table
    resp = http.post("/v1/topics", json=body)
    assert resp.status_code == 201, resp.text
    return dict(resp.json())


def _produce(http: httpx.Client, topic: str, bodies: list[Any], keys: list[str] | None = None) -> None:
    messages = []
    for i, body in enumerate(bodies):
        m: dict[str, Any] = {"body": body if isinstance(body, str) else orjson.dumps(body).decode()}
        if keys is not None:
            m["keys"] = [keys[i]]
        messages.append(m)
    resp = http.post(f"/v1/topics/{topic}/messages", json={"messages": messages})
    assert resp.status_code == 200, resp.text


def _status(http: httpx.Client, topic: str) -> dict[str, Any]:
    return dict(http.get(f"/v1/topics/{topic}").json()["table_status"])


def _wait_rows(http: httpx.Client, topic: str, rows: int, dlq_rows: int = 0, timeout_s: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    status: dict[str, Any] = {}
    while time.monotonic() < deadline:
        status = _status(http, topic)
        if status["rows"] == rows and status["dlq_rows"] == dlq_rows and status["lag_bytes"] == 0:
            return status
        time.sleep(0.2)
    raise AssertionError(f"table {topic} did not reach {rows} rows / {dlq_rows} dead letters: {status}")


def _sql(http: httpx.Client, sql: str) -> list[dict[str, Any]]:
    resp = http.post("/v1/sql", json={"sql": sql})
    assert resp.status_code == 200, resp.text
    answer = resp.json()
    return [dict(zip(answer["columns"], row)) for row in answer["rows"]]


def _error(resp: httpx.Response, status: int, code: str) -> str:
    assert resp.status_code == status, resp.text
    assert resp.json()["error"] == code, resp.text
    return str(resp.json()["message"])


def test_typed_topic_is_queried_by_field_and_bad_bodies_land_in_its_dlq(http: httpx.Client) -> None:
    created = _create(http, "orders", {"mode": "typed", "schema": ORDERS_SCHEMA, "target_lag_s": _LAG})
    assert created["table"]["mode"] == "typed" and created["table"]["schema"] == ORDERS_SCHEMA
    good = [{"order_id": f"o{i}", "amount": 1.5 * i, "region": "eu" if i % 3 else "us",
             "customer": {"name": f"c{i}", "vip": i == 4}, "ts": "2026-11-23T10:00:00Z"} for i in range(1, 7)]
    bad = ["not json at all", {"order_id": "x1"}, {"order_id": "x2", "amount": "lots"}]
    _produce(http, "orders", [*good, *bad])
    _wait_rows(http, "orders", rows=6, dlq_rows=3)

    by_region = _sql(http, "SELECT region, sum(amount) AS total, count(*) AS n FROM orders GROUP BY region "
                           "ORDER BY region")
    assert by_region == [{"region": "eu", "total": 1.5 * (1 + 2 + 4 + 5), "n": 4},
                         {"region": "us", "total": 1.5 * (3 + 6), "n": 2}]
    vip = _sql(http, "SELECT order_id, customer['name'] AS name FROM orders WHERE customer['vip']")
    assert vip == [{"order_id": "o4", "name": "c4"}]

    letters = _sql(http, "SELECT error_field, error FROM orders__dlq ORDER BY commitlog_offset")
    assert len(letters) == 3
    assert "JSON" in letters[0]["error"] or "json" in letters[0]["error"]
    assert letters[1]["error_field"] == "amount" and "amount" in letters[1]["error"]
    assert letters[2]["error_field"] == "amount" and "amount" in letters[2]["error"]

    status = _status(http, "orders")
    assert status["dlq_rows"] == 3 and status["writing"] and status["last_error"] is None
    metrics = http.get("/metrics").text
    assert 'sparkmq_table_dlq_rows{topic="orders"} 3' in metrics
    assert 'sparkmq_table_rows{topic="orders"} 6' in metrics
    assert 'sparkmq_table_lag_bytes{topic="orders"} 0' in metrics
    tables = http.get("/v1/broker").json()["tables"]
    assert tables["orders"]["rows"] == 6 and tables["orders"]["lag_seconds"] == 0


def test_unknown_keys_are_400_naming_them(http: httpx.Client) -> None:
    message = _error(http.post("/v1/topics", json={"name": "t1", "table": {"mode": "raw", "scheme": "x"}}),
                     400, "bad_table")
    assert "scheme" in message
    message = _error(http.post("/v1/topics", json={"name": "t1", "tabel": {"mode": "raw"}}), 400, "bad_request")
    assert "tabel" in message
    assert http.get("/v1/topics/t1").status_code == 404  # nothing was created
    _create(http, "t2", None)
    assert "partiton_by" in _error(http.put("/v1/topics/t2", json={"table": {"partiton_by": "x"}}), 400, "bad_table")
    assert "schema" in _error(http.put("/v1/topics/t2", json={"table": {"mode": "typed"}}), 400, "bad_table")
    assert http.get("/v1/topics/t2").json()["table"]["mode"] == "off"


def test_narrowing_is_409_and_adding_an_optional_field_adds_a_column(http: httpx.Client) -> None:
    _create(http, "accounts", {"mode": "typed", "schema": "id STRING NOT NULL, balance DOUBLE",
                               "target_lag_s": _LAG})
    _produce(http, "accounts", [{"id": "a", "balance": 1.0}])
    _wait_rows(http, "accounts", rows=1)
    narrowing = http.put("/v1/topics/accounts", json={"table": {"schema": "id STRING NOT NULL, balance INT"}})
    assert "balance" in _error(narrowing, 409, "schema_change_refused")
    removing = http.put("/v1/topics/accounts", json={"table": {"schema": "id STRING NOT NULL"}})
    assert "balance" in _error(removing, 409, "schema_change_refused")

    resp = http.put("/v1/topics/accounts", json={"table": {"schema": "id STRING NOT NULL, balance DOUBLE, note STRING"}})
    assert resp.status_code == 200, resp.text
    assert resp.json()["table"]["schema"].endswith("note STRING") and resp.json()["table"]["target_lag_s"] == _LAG
    _produce(http, "accounts", [{"id": "b", "balance": 2.0, "note": "new"}])
    _wait_rows(http, "accounts", rows=2)
    assert _sql(http, "SELECT id, note FROM accounts ORDER BY id") == [{"id": "a", "note": None},
                                                                       {"id": "b", "note": "new"}]


def test_enabling_a_table_on_an_existing_topic_backfills_it(http: httpx.Client) -> None:
    _create(http, "events", None)
    _produce(http, "events", [{"kind": "click", "n": i} for i in range(25)])
    assert http.get("/v1/topics/events").json()["table_status"] is None
    resp = http.put("/v1/topics/events", json={"table": {"mode": "typed", "schema": "kind STRING, n BIGINT",
                                                          "target_lag_s": _LAG}})
    assert resp.status_code == 200, resp.text
    _wait_rows(http, "events", rows=25)
    assert _sql(http, "SELECT sum(n) AS s FROM events") == [{"s": sum(range(25))}]


def test_a_restart_keeps_the_table_settings_and_resumes(broker: Any, http: httpx.Client) -> None:
    _create(http, "ledger", {"mode": "typed", "schema": "id STRING, amount DOUBLE", "target_lag_s": _LAG})
    _produce(http, "ledger", [{"id": f"l{i}", "amount": 1.0} for i in range(10)])
    _wait_rows(http, "ledger", rows=10)
    broker.restart()
    with httpx.Client(base_url=broker.url, timeout=60) as again:
        assert again.get("/v1/topics/ledger").json()["table"]["schema"] == "id STRING, amount DOUBLE"
        _produce(again, "ledger", [{"id": f"m{i}", "amount": 2.0} for i in range(5)])
        _wait_rows(again, "ledger", rows=15)  # resumed: nothing twice, nothing lost
        assert _sql(again, "SELECT count(DISTINCT id) AS n, sum(amount) AS s FROM ledger") == [{"n": 15, "s": 20.0}]


def test_cli_creates_alters_shows_and_replays(broker: Any, http: httpx.Client, tmp_path: Any) -> None:
    schema_file = tmp_path / "pay.json"
    schema_file.write_text(orjson.dumps({"type": "object", "properties": {"id": {"type": "string"},
                                                                         "cents": {"type": "integer"}},
                                         "required": ["id", "cents"]}).decode())
    created = runner.invoke(app, ["topic", "create", "pay", "--queues", "1", "--table-mode", "typed",
                                  "--table-schema", f"@{schema_file}", "--table-target-lag", str(_LAG),
                                  "--url", broker.url])
    assert created.exit_code == 0, created.output
    assert "table typed (append, target lag 0.3 s)" in created.stdout
    _produce(http, "pay", [{"id": "p1", "cents": 5}, {"id": "p2"}])  # p2 misses a required field
    _wait_rows(http, "pay", rows=1, dlq_rows=1)

    status = runner.invoke(app, ["table", "status", "pay", "--json", "--url", broker.url])
    assert status.exit_code == 0, status.output
    (per_topic,) = orjson.loads(status.stdout).values()
    assert per_topic["pay"]["rows"] == 1 and per_topic["pay"]["dlq_rows"] == 1

    relaxed = '{"type": "object", "properties": {"id": {"type": "string"}, "cents": {"type": "integer"}}, ' \
              '"required": ["id"]}'
    altered = runner.invoke(app, ["topic", "alter", "pay", "--table-schema", relaxed, "--url", broker.url])
    assert altered.exit_code == 0, altered.output
    replayed = runner.invoke(app, ["table", "replay-dlq", "pay", "--json", "--url", broker.url])
    assert replayed.exit_code == 0, replayed.output
    (answer,) = orjson.loads(replayed.stdout).values()
    assert answer == {"replayed": 1, "remaining": 0}
    _wait_rows(http, "pay", rows=2, dlq_rows=0)
    assert _sql(http, "SELECT id, cents FROM pay ORDER BY id") == [{"id": "p1", "cents": 5},
                                                                  {"id": "p2", "cents": None}]

    narrowing = runner.invoke(app, ["topic", "alter", "pay", "--table-schema", "id STRING", "--url", broker.url])
    assert narrowing.exit_code == 1 and "cents" in narrowing.stderr and "409" in narrowing.stderr
    offline = runner.invoke(app, ["sql", "SELECT count(*) AS n FROM pay", "--json", "--data-dir",
                                  str(broker.data_dir)])
    assert offline.exit_code == 0, offline.output
    assert orjson.loads(offline.stdout)["rows"] == [[2]]


def test_a_slave_keeps_the_masters_table_settings_and_writes_no_table(broker_factory: Callable[..., Any]) -> None:
    from .ha_support import start_pair, wait_for

    pair = start_pair(broker_factory)
    m, s = pair.master.url, pair.slave.url
    created = httpx.post(f"{m}/v1/topics", json={"name": "synced", "table": {"mode": "typed", "schema": "id STRING",
                                                                            "target_lag_s": _LAG}}, timeout=30)
    assert created.status_code == 201, created.text
    with httpx.Client(base_url=m, timeout=30) as master:
        _produce(master, "synced", [{"id": "x"}])
    wait_for(lambda: httpx.get(f"{s}/v1/topics/synced").json().get("table", {}).get("schema") == "id STRING", 20,
             "the table settings on the slave")
    status = httpx.get(f"{s}/v1/topics/synced").json()["table_status"]
    assert status["writing"] is False and "slave" in status["last_error"]
    assert not (pair.slave.data_dir / "tables").exists()
    refused = httpx.put(f"{s}/v1/topics/synced", json={"table": {"mode": "off"}})
    assert refused.status_code == 403 and refused.json()["error"] == "slave_read_only"


def test_spark_reads_a_typed_upsert_table_and_its_change_feed(spark: Any, broker: Any, http: httpx.Client,
                                                              tmp_path: Any) -> None:
    from connectors import register_table_topics, table_changes
    from connectors.spark_view import delta_jars_loadable

    _create(http, "balances", {"mode": "typed", "schema": "acct STRING, balance DOUBLE", "write_mode": "upsert",
                               "target_lag_s": _LAG})
    _produce(http, "balances", [{"acct": "a", "balance": 1.0}, {"acct": "b", "balance": 2.0},
                                {"acct": "c", "balance": 3.0}], keys=["a", "b", "c"])
    _wait_rows(http, "balances", rows=3)
    _produce(http, "balances", [{"acct": "a", "balance": 10.0}, ""], keys=["a", "b"])  # update a, delete b
    _wait_rows(http, "balances", rows=2)

    names = register_table_topics(spark, broker.url)
    assert {"balances", "balances__dlq"} <= set(names)
    rows = spark.sql("SELECT acct, balance FROM balances ORDER BY acct").collect()
    assert [(r.acct, r.balance) for r in rows] == [("a", 10.0), ("c", 3.0)]
    if not delta_jars_loadable(spark):
        pytest.skip("the session has no delta-spark jars: the change feed needs them")
    query = (table_changes(spark, broker.url, "balances").writeStream.format("memory").queryName("balance_changes")
             .option("checkpointLocation", str(tmp_path / "cdf-checkpoint")).trigger(availableNow=True).start())
    query.awaitTermination(120)
    changes = spark.sql("SELECT acct, _change_type AS kind FROM balance_changes").collect()
    seen = sorted((r.acct, r.kind) for r in changes)
    assert ("a", "update_postimage") in seen and ("a", "update_preimage") in seen
    assert ("b", "delete") in seen
    assert sorted(a for a, kind in seen if kind == "insert") == ["a", "b", "c"]


def test_a_broker_without_tables_refuses_to_enable_one(fast_broker: Callable[..., Any]) -> None:
    off = fast_broker(env={"SPARKMQ_TABLES__ENABLED": "false"})
    with httpx.Client(base_url=off.url, timeout=30) as c:
        message = _error(c.post("/v1/topics", json={"name": "t", "table": {"mode": "raw"}}), 503, "tables_disabled")
        assert "[tables] enabled" in message
        assert c.post("/v1/topics", json={"name": "t"}).status_code == 201
        assert c.get("/v1/tables").json() == {"tables": {}}


def test_deleting_a_topic_deletes_its_table(broker: Any, http: httpx.Client) -> None:
    table = {"mode": "typed", "schema": "id STRING", "target_lag_s": _LAG}
    _create(http, "gone", table)
    _produce(http, "gone", [{"id": "old"}, "bad"])
    _wait_rows(http, "gone", rows=1, dlq_rows=1)
    deleted = http.delete("/v1/topics/gone")
    assert deleted.status_code == 200, deleted.text
    assert not (broker.data_dir / "tables" / "gone").exists()
    assert not (broker.data_dir / "tables" / "gone__dlq").exists()
    _create(http, "gone", table)  # the same name again starts empty
    _produce(http, "gone", [{"id": "new"}])
    _wait_rows(http, "gone", rows=1)
    assert _sql(http, "SELECT id FROM gone") == [{"id": "new"}]


def test_spark_without_delta_reads_a_partitioned_table_snapshot(spark: Any, broker: Any, http: httpx.Client) -> None:
    from connectors import register_table_topics

    _create(http, "visits", {"mode": "typed", "schema": "page STRING, ts TIMESTAMP", "partition_by": "day(ts)",
                             "target_lag_s": _LAG})
    _produce(http, "visits", [{"page": "/a", "ts": "2026-11-22T10:00:00Z"}, {"page": "/b", "ts": "2026-11-23T09:00:00Z"},
                              {"page": "/c", "ts": "2026-11-23T11:00:00Z"}])
    _wait_rows(http, "visits", rows=3)
    names = register_table_topics(spark, str(broker.data_dir / "tables"), topics=["visits"], mode="snapshot")
    assert sorted(names) == ["visits", "visits__dlq"]
    rows = spark.sql("SELECT CAST(_sparkmq_day AS STRING) AS day, count(*) AS n FROM visits GROUP BY 1 ORDER BY 1")
    assert [(r.day, r.n) for r in rows.collect()] == [("2026-11-22", 1), ("2026-11-23", 2)]
