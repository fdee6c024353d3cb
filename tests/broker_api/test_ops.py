"""Operations: health, broker info, metrics, OpenAPI, retention, fast failure, shutdown."""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx


def _fill(c: httpx.Client, topic: str, n: int, body: str = "x") -> None:
    for start in range(0, n, 500):
        msgs = [{"body": body, "queue_id": 0} for _ in range(min(500, n - start))]
        assert c.post(f"/v1/topics/{topic}/messages", json={"messages": msgs}).status_code == 200
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and c.get(f"/v1/topics/{topic}/queues").json()[0]["max_offset"] < n:
        time.sleep(0.01)


def test_health_ready_and_broker_info(client: httpx.Client, quick: Any) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/readyz").json() == {"status": "ready"}
    _fill(client, "info", 3)
    info = client.get("/v1/broker").json()
    assert info["name"] == "broker-a" and info["cluster"] == "DefaultCluster" and info["role"] == "master"
    assert info["data_dir"] == str(quick.data_dir.resolve())
    assert info["store"]["commitlog_max_offset"] > 0 and "dispatch_behind_bytes" in info
    assert info["mirror"] is None and info["topics"] == 1


def test_metrics_report_rates_depths_and_lag(client: httpx.Client) -> None:
    _fill(client, "m", 10)
    client.get("/v1/topics/m/queues/0/messages", params={"offset": 0})
    client.put("/v1/groups/g/offsets", json={"topic": "m", "offsets": {"0": 4}})
    text = client.get("/metrics").text
    assert 'sparkmq_produce_messages_total{topic="m"} 10' in text
    assert 'sparkmq_pull_requests_total{status="FOUND"}' in text
    assert 'sparkmq_queue_depth_messages{queue="0",topic="m"} 10' in text
    assert 'sparkmq_consumer_lag_messages{group="g",queue="0",topic="m"} 6' in text
    assert "sparkmq_produce_latency_seconds_bucket" in text and "sparkmq_store_flush_seconds_total" in text
    assert "sparkmq_store_dispatch_behind_bytes" in text


def test_openapi_documents_the_hot_routes(client: httpx.Client) -> None:
    spec = client.get("/openapi.json").json()
    produce = spec["paths"]["/v1/topics/{topic}/messages"]["post"]
    assert set(produce["requestBody"]["content"]) == {
        "application/json", "application/octet-stream", "application/vnd.apache.arrow.stream"}
    pull = spec["paths"]["/v1/topics/{topic}/queues/{queue_id}/messages"]["get"]
    assert {"offset", "max_messages", "wait_ms", "tags"} <= {p["name"] for p in pull["parameters"]}
    assert client.get("/docs").status_code == 200


def test_forced_retention_deletes_old_segments_and_moves_min_offsets(fast_broker: Any) -> None:
    b = fast_broker({"SPARKMQ_STORE__COMMITLOG_SEGMENT_BYTES": str(64 << 10)})
    with httpx.Client(base_url=b.url) as c:
        _fill(c, "old", 2000, body="y" * 100)
        assert c.get("/v1/topics/old/queues").json()[0]["min_offset"] == 0
        deleted = c.post("/v1/admin/retention", json={"force": True}).json()["deleted_segments"]
        assert deleted >= 2
        q0 = c.get("/v1/topics/old/queues").json()[0]
        assert 0 < q0["min_offset"] < 2000 and q0["max_offset"] == 2000
        page = c.get("/v1/topics/old/queues/0/messages", params={"offset": 0}).json()
        assert page["status"] == "OFFSET_TOO_SMALL" and page["next_offset"] == q0["min_offset"]


def test_fast_failure_answers_503_with_retry_after(fast_broker: Any) -> None:
    b = fast_broker({"SPARKMQ_STORE__FLUSH_MODE": "sync", "SPARKMQ_FAST_FAILURE__WRITE_THREADS": "1",
                     "SPARKMQ_FAST_FAILURE__MAX_QUEUE_WAIT_MS": "1", "SPARKMQ_FAST_FAILURE__BUSY_PUT_MS": "1"})
    statuses: list[httpx.Response] = []
    stop = threading.Event()

    def hammer() -> None:
        with httpx.Client(base_url=b.url, timeout=30) as c:
            while not stop.is_set():
                statuses.append(c.post("/v1/topics/busy/messages", json={"messages": [{"body": "x" * 1000}] * 50}))

    threads = [threading.Thread(target=hammer) for _ in range(8)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and not any(r.status_code == 503 for r in list(statuses)):
        time.sleep(0.05)
    stop.set()
    for t in threads:
        t.join(30)
    busy = [r for r in statuses if r.status_code == 503]
    assert busy, "no request was refused"
    assert busy[0].json()["error"] == "broker_busy" and busy[0].headers["Retry-After"] == "1"
    assert {r.status_code for r in statuses} <= {200, 503}
    with httpx.Client(base_url=b.url) as c:
        assert "sparkmq_fast_failures_total" in c.get("/metrics").text


def test_sigterm_shuts_down_cleanly(fast_broker: Any) -> None:
    b = fast_broker()
    with httpx.Client(base_url=b.url) as c:
        _fill(c, "t", 5)
        c.put("/v1/groups/g/offsets", json={"topic": "t", "offsets": {"0": 5}})
        parked: list[int | str] = []

        def pull() -> None:
            try:
                parked.append(httpx.get(b.url + "/v1/topics/t/queues/0/messages",
                                        params={"offset": 5, "wait_ms": 30000}, timeout=60).status_code)
            except httpx.HTTPError as exc:
                parked.append(repr(exc))

        t = threading.Thread(target=pull)
        t.start()
        deadline = time.monotonic() + 20
        while c.get("/v1/broker").json()["parked_pulls"] < 1 and time.monotonic() < deadline:
            time.sleep(0.05)  # the pull is parked at the broker before the SIGTERM
    started = time.monotonic()
    assert b.stop() == 0
    assert time.monotonic() - started < 10  # the parked pull did not hold the shutdown for 30 s
    t.join(10)
    assert parked == [200]
    assert not (b.data_dir / "store" / "abort").exists()
    assert (b.data_dir / "config" / "consumer_offsets.json").exists()
    assert "ready on http://127.0.0.1:" in b.log_tail()


def test_default_broker_runs_the_delta_mirror(broker: Any) -> None:
    with httpx.Client(base_url=broker.url, timeout=30) as c:
        _fill(c, "mirrored", 5)
        deadline = time.monotonic() + 30
        lag = c.get("/v1/broker").json()["mirror"]
        while time.monotonic() < deadline and lag["lag_bytes"] > 0:
            time.sleep(0.2)
            lag = c.get("/v1/broker").json()["mirror"]
        assert set(lag) >= {"mirrored_offset", "commitlog_offset", "lag_bytes", "lag_seconds"}
        assert lag["lag_bytes"] == 0
        text = c.get("/metrics").text
        assert "sparkmq_mirror_lag_bytes 0" in text and "sparkmq_mirror_lag_seconds" in text
        rows = c.post("/v1/sql", json={"sql": "SELECT count(*) AS n FROM messages WHERE topic = 'mirrored'"})
        assert rows.status_code == 200, rows.text
        assert rows.json()["rows"] == [[5]]
