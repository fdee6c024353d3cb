"""Overload: admission bounds answer 503 at once, every refusal is counted, control routes stay quick.

Storms are small (150 connections for a few seconds) with the in-flight bound
set low to force refusals; latency itself is measured by benchmarks/bench_storm.py.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
from typing import Any

import httpx
import orjson
import pytest

_REQUEST = (b"POST /v1/topics/storm/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s")


def _control_url(broker: Any) -> str:
    m = re.search(r"control .*? on (http://[\d.]+:\d+)", broker.log_tail())
    assert m, f"no control listener in the ready line:\n{broker.log_tail()}"
    return m.group(1)


async def _read_answer(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, v in (ln.split(":", 1) for ln in head[1:] if ":" in ln)}
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return int(head[0].split(" ", 2)[1]), headers, body


async def _connection(port: int, stop_at: float, out: dict[str, Any], n: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        for i in range(n):  # bounded in count and in time
            if time.monotonic() > stop_at:
                break
            body = orjson.dumps({"messages": [{"body": f"m-{id(out)}-{i}"}]})
            writer.write(_REQUEST % (len(body), body))
            status, headers, answer = await asyncio.wait_for(_read_answer(reader), 30)
            if status == 200:
                out["acked"] += 1
            elif status == 503:
                out["refused"] += 1
                out["retry_after"].add(headers.get("retry-after"))
                out["errors"].add(orjson.loads(answer)["error"])
            else:
                out["other"].append(status)
    finally:
        writer.close()


def _storm(port: int, connections: int, seconds: float) -> dict[str, Any]:
    out: dict[str, Any] = {"acked": 0, "refused": 0, "retry_after": set(), "errors": set(), "other": []}

    async def main() -> None:
        stop_at = time.monotonic() + seconds
        await asyncio.gather(*(_connection(port, stop_at, out, 10_000) for _ in range(connections)))

    asyncio.run(main())
    return out


def _probe(url: str, stop: threading.Event, seen: list[tuple[int, float]]) -> None:
    with httpx.Client(timeout=30) as c:
        for _ in range(1000):
            if stop.is_set():
                return
            started = time.monotonic()
            seen.append((c.get(url).status_code, time.monotonic() - started))
            time.sleep(0.05)


def _rejected(text: str, route: str) -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("sparkmq_requests_rejected_total{") and f'route="{route}"' in line)


def test_storm_past_the_bound_is_refused_at_once_and_counted(fast_broker: Any) -> None:
    b = fast_broker({"SPARKMQ_SERVER__PRODUCE_INFLIGHT": "2", "SPARKMQ_SERVER__PRODUCE_WAIT_MS": "0"})
    control = _control_url(b)
    stop, health = threading.Event(), []  # type: ignore[var-annotated]
    prober = threading.Thread(target=_probe, args=(control + "/healthz", stop, health))
    prober.start()
    try:
        out = _storm(b.port, 150, 3.0)
    finally:
        stop.set()
        prober.join(60)
    assert out["refused"] > 0 and out["acked"] > 0, out
    assert out["other"] == []
    assert out["retry_after"] == {"1"} and out["errors"] == {"broker_busy"}
    with httpx.Client(base_url=b.url, timeout=30) as c:
        ready = c.get("/readyz")  # a refusal within the last 2 s: not ready, but alive
        assert ready.status_code == 503 and "overloaded" in ready.json()["message"]
        assert c.get("/healthz").status_code == 200
        metrics = c.get("/metrics").text
        assert _rejected(metrics, "produce") == out["refused"]
        assert "sparkmq_requests_in_flight" in metrics and "sparkmq_admission_wait_seconds_bucket" in metrics
        queues = c.get("/v1/topics/storm/queues").json()
        assert sum(q["max_offset"] for q in queues) == out["acked"]  # nothing acked lost, nothing refused stored
    assert health and {status for status, _ in health} == {200}
    assert max(took for _, took in health) < 10  # quick: the storm cannot starve the control listener


def test_readiness_recovers_after_the_storm(fast_broker: Any) -> None:
    b = fast_broker({"SPARKMQ_SERVER__PRODUCE_INFLIGHT": "1", "SPARKMQ_SERVER__PRODUCE_WAIT_MS": "0"})
    out = _storm(b.port, 60, 1.5)
    assert out["refused"] > 0
    with httpx.Client(base_url=_control_url(b), timeout=30) as c:
        deadline = time.monotonic() + 20
        while c.get("/readyz").status_code != 200 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert c.get("/readyz").json() == {"status": "ready"}
        assert c.get("/healthz").json() == {"status": "ok"}
        assert c.get("/v1/broker").json()["admission"]["produce"]["refused"] == out["refused"]


@pytest.mark.parametrize("flush_mode", ["async", "sync"])
def test_a_single_producer_never_gets_503(fast_broker: Any, flush_mode: str) -> None:
    # The broker's own fast-failure defaults (the test suite raises them elsewhere); with SYNC
    # flush every put waits for fdatasync, which is not "busy".
    b = fast_broker({"SPARKMQ_FAST_FAILURE__MAX_QUEUE_WAIT_MS": "0", "SPARKMQ_FAST_FAILURE__BUSY_PUT_MS": "1000",
                     "SPARKMQ_STORE__FLUSH_MODE": flush_mode})
    import pyarrow as pa

    table = pa.table({"body": pa.array([b"y" * 100] * 20_000, pa.binary())})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    arrow = sink.getvalue().to_pybytes()
    statuses: list[int] = []
    with httpx.Client(base_url=b.url, timeout=60) as c:
        deadline = time.monotonic() + 4
        for i in range(400):
            if time.monotonic() > deadline:
                break
            if i % 4 == 0:
                r = c.post("/v1/topics/solo/messages", content=arrow,
                           headers={"content-type": "application/vnd.apache.arrow.stream"})
            else:
                r = c.post("/v1/topics/solo/messages", json={"messages": [{"body": f"s{i}"}] * 50})
            statuses.append(r.status_code)
        assert set(statuses) == {200}, [s for s in statuses if s != 200][:5]
        assert _rejected(c.get("/metrics").text, "produce") == 0


def test_parked_long_polls_hold_no_slot(fast_broker: Any) -> None:
    b = fast_broker({"SPARKMQ_SERVER__PULL_INFLIGHT": "2", "SPARKMQ_SERVER__PULL_WAIT_MS": "0"})
    with httpx.Client(base_url=b.url, timeout=30) as c:
        c.post("/v1/topics", json={"name": "lp", "queues": 1})
    answers: list[int] = []

    def park() -> None:
        with httpx.Client(base_url=b.url, timeout=30) as c:
            answers.append(c.get("/v1/topics/lp/queues/0/messages", params={"offset": 0, "wait_ms": 3000}).status_code)

    parked = [threading.Thread(target=park) for _ in range(6)]
    for t in parked:
        t.start()
    with httpx.Client(base_url=b.url, timeout=30) as c:
        deadline = time.monotonic() + 10
        while c.get("/v1/broker").json()["parked_pulls"] < 6 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert c.get("/v1/broker").json()["parked_pulls"] == 6
        assert c.get("/v1/topics/lp/queues/0/messages", params={"offset": 0}).status_code == 200
        assert c.post("/v1/topics/lp/messages", json={"messages": [{"body": "wake"}]}).status_code == 200
    for t in parked:
        t.join(30)
    assert answers == [200] * 6


def test_recovery_after_a_crash_is_logged_and_shown(fast_broker: Any) -> None:
    b = fast_broker()
    with httpx.Client(base_url=b.url, timeout=30) as c:
        for i in range(20):
            assert c.post("/v1/topics/crash/messages", json={"messages": [{"body": f"c{i}"}] * 10}).status_code == 200
        assert c.get("/v1/broker").json()["last_recovery"]["abnormal"] is False
    b.kill()
    b.start()
    assert "WARNING" in b.log_tail() and "unclean shutdown detected" in b.log_tail()
    with httpx.Client(base_url=b.url, timeout=30) as c:
        last = c.get("/v1/broker").json()["last_recovery"]
        assert last["abnormal"] is True and last["valid_end"] >= last["scanned_from"] >= 0
        queues = c.get("/v1/topics/crash/queues").json()
        assert sum(q["max_offset"] for q in queues) == 200  # every acknowledged message survived
