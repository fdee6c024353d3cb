"""End to end through a real broker process: produce, mirror, /v1/sql, sparkmq sql, SIGKILL."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

_REPO = Path(__file__).resolve().parents[2]
_FAST = {"SPARKMQ_MIRROR__BATCH_INTERVAL_S": "0.1", "SPARKMQ_STORE__COMMITLOG_SEGMENT_BYTES": str(1 << 20)}


def _produce(url: str, topic: str, start: int, n: int) -> list[dict[str, Any]]:
    msgs = [{"body": f"msg-{i}", "keys": [f"key-{i}"], "properties": {"n": str(i)}} for i in range(start, start + n)]
    resp = httpx.post(f"{url}/v1/topics/{topic}/messages", json={"messages": msgs}, timeout=30)
    assert resp.status_code == 200, resp.text
    return resp.json()["results"]


def _wait_mirrored(url: str, timeout_s: float = 60.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        lag = httpx.get(f"{url}/v1/broker", timeout=10).json()["mirror"]
        if lag["lag_bytes"] == 0:
            return lag
        time.sleep(0.1)
    raise AssertionError(f"mirror still behind after {timeout_s}s: {lag}")


def _sql(url: str, sql: str, **extra: Any) -> httpx.Response:
    return httpx.post(f"{url}/v1/sql", json={"sql": sql, **extra}, timeout=60)


def test_produced_messages_are_mirrored_and_answer_sql(broker_factory: Callable[..., Any]) -> None:
    b = broker_factory(env=_FAST)
    results = _produce(b.url, "orders", 0, 300) + _produce(b.url, "payments", 0, 120)
    lag = _wait_mirrored(b.url)
    assert lag["mirrored_offset"] == lag["commitlog_offset"] > 0 and lag["lag_seconds"] == 0
    counts = _sql(b.url, "SELECT topic, count(*) AS n FROM messages GROUP BY topic ORDER BY topic").json()
    assert counts == {"columns": ["topic", "n"], "rows": [["orders", 300], ["payments", 120]], "truncated": False}
    rows = _sql(b.url, "SELECT msg_id, queue_id, queue_offset, keys, body, properties['n'] FROM messages "
                       "WHERE topic = 'orders'").json()["rows"]
    got = {r[0]: (r[1], r[2], r[3], base64.b64decode(r[4]).decode(), r[5]) for r in rows}
    want = {r["msg_id"]: (r["queue_id"], r["queue_offset"], [f"key-{i}"], f"msg-{i}", str(i))
            for i, r in enumerate(results[:300])}
    assert got == want
    limited = _sql(b.url, "SELECT msg_id FROM messages", max_rows=5).json()
    assert len(limited["rows"]) == 5 and limited["truncated"] is True
    metrics = httpx.get(f"{b.url}/metrics", timeout=10).text
    assert "sparkmq_mirror_lag_bytes" in metrics and "sparkmq_mirror_lag_seconds" in metrics


def test_bad_sql_is_a_400_with_the_engines_message(broker_factory: Callable[..., Any]) -> None:
    b = broker_factory(env=_FAST)
    _produce(b.url, "orders", 0, 3)
    _wait_mirrored(b.url)
    bad = _sql(b.url, "SELECT nosuch FROM messages")
    assert bad.status_code == 400
    assert bad.json()["error"] == "bad_sql" and "No field named nosuch" in bad.json()["message"]
    write = _sql(b.url, "COPY (SELECT 1) TO '/tmp/x.csv'")
    assert write.status_code == 400 and "read-only" in write.json()["message"]


def test_sigkill_mid_mirror_then_restart_leaves_no_duplicate_and_no_gap(broker_factory: Callable[..., Any]) -> None:
    b = broker_factory(env={**_FAST, "SPARKMQ_MIRROR__BATCH_ROWS": "300", "SPARKMQ_MIRROR__COMPACT_EVERY_COMMITS": "7",
                            "SPARKMQ_MIRROR__CHECKPOINT_EVERY_COMMITS": "5"})
    acked: list[str] = []
    stop = threading.Event()

    def producer() -> None:
        i = 0
        while not stop.is_set() and i < 200:
            try:
                acked.extend(r["msg_id"] for r in _produce(b.url, "orders", i * 100, 100))
            except (httpx.HTTPError, AssertionError):
                return  # the broker was killed mid-request: that batch was never acknowledged
            i += 1

    thread = threading.Thread(target=producer)
    thread.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # kill once the mirror has committed something and is still going
        lag = httpx.get(f"{b.url}/v1/broker", timeout=10).json()["mirror"]
        if lag["mirrored_offset"] > 0 and lag["lag_bytes"] > 0 and len(acked) >= 3000:
            break
        time.sleep(0.05)
    b.kill()
    stop.set()
    thread.join(60)
    b.start()
    _produce(b.url, "orders", 100_000, 50)
    _wait_mirrored(b.url)
    stats = _sql(b.url, "SELECT queue_id, count(*), count(DISTINCT queue_offset), min(queue_offset), "
                        "max(queue_offset) FROM messages GROUP BY queue_id ORDER BY queue_id").json()["rows"]
    queues = {q["queue_id"]: q for q in httpx.get(f"{b.url}/v1/topics/orders/queues", timeout=10).json()}
    for qid, n, distinct, lo, hi in stats:
        assert n == distinct == hi - lo + 1  # no duplicate, no gap
        assert (lo, hi + 1) == (queues[qid]["min_offset"], queues[qid]["max_offset"])
    in_table = {r[0] for r in _sql(b.url, "SELECT msg_id FROM messages", max_rows=10_000).json()["rows"]}
    assert set(acked) <= in_table


def test_bodies_off_and_the_sparkmq_sql_command(broker_factory: Callable[..., Any], tmp_path: Path) -> None:
    b = broker_factory(env={**_FAST, "SPARKMQ_MIRROR__BODIES": "false"})
    _produce(b.url, "orders", 0, 40)
    _produce(b.url, "audit", 0, 2)
    _wait_mirrored(b.url)
    cmd = [sys.executable, "-m", "broker_api", "sql", "SELECT topic, count(*) AS n, count(body) AS bodies "
           "FROM messages GROUP BY topic ORDER BY topic", "--data-dir", str(b.data_dir), "--format", "json"]
    env = {**os.environ, "PYTHONPATH": str(_REPO)}
    out = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert '"rows":[["audit",2,0],["orders",40,0]]' in out.stdout
    bad = subprocess.run(cmd[:4] + ["SELEC 1", "--data-dir", str(b.data_dir)], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1 and "ParserError" in bad.stderr


def test_sql_answers_503_when_the_mirror_is_disabled(broker_factory: Callable[..., Any]) -> None:
    b = broker_factory(env={"SPARKMQ_MIRROR__ENABLED": "false"})
    resp = _sql(b.url, "SELECT 1")
    assert resp.status_code == 503 and resp.json()["error"] == "mirror_disabled"
    assert httpx.get(f"{b.url}/v1/broker", timeout=10).json()["mirror"] is None
