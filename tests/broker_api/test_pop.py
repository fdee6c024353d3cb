"""POP consumption, retry topics and the DLQ over HTTP against real brokers (restarts and SIGKILL included)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

# Short back-off (every level 100 ms) and a fast revive thread keep these tests quick.
POP_ENV = {"SPARKMQ_DELAY__LEVELS": "100ms", "SPARKMQ_DELAY__POLL_INTERVAL_MS": "20", "SPARKMQ_POP__REVIVE_INTERVAL_MS": "50",
           "SPARKMQ_GROUPS__OFFSETS_FLUSH_INTERVAL_S": "0.2"}
DLQ = "/v1/topics/%25DLQ%25g/queues/0/messages"


@pytest.fixture
def pop_broker(fast_broker: Callable[..., Any]) -> Any:
    return fast_broker(POP_ENV)


def _produce(c: httpx.Client, topic: str, n: int, queues: int = 2, **extra: Any) -> None:
    c.post("/v1/topics", json={"name": topic, "queues": queues})
    msgs = [{"body": f"m{i}", "queue_id": i % queues, **extra} for i in range(n)]
    assert c.post(f"/v1/topics/{topic}/messages", json={"messages": msgs}).status_code == 200


def _pop(c: httpx.Client, topic: str = "t", n: int = 32, invisible_ms: int = 500, **kw: Any) -> list[dict[str, Any]]:
    resp = c.post("/v1/groups/g/pop", json={"topic": topic, "max_messages": n, "invisible_ms": invisible_ms, **kw})
    assert resp.status_code == 200, resp.text
    return list(resp.json()["messages"])


def _pop_until(c: httpx.Client, want: int, timeout_s: float = 10, **kw: Any) -> list[dict[str, Any]]:
    got: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < want and time.monotonic() < deadline:
        got += _pop(c, wait_ms=200, **kw)
    return got


def _dlq(c: httpx.Client) -> list[dict[str, Any]]:
    resp = c.get(DLQ, params={"offset": 0, "max_messages": 1000})
    return list(resp.json()["messages"]) if resp.status_code == 200 else []


def test_pop_spreads_queues_and_ack_is_once(pop_broker: Any) -> None:
    with httpx.Client(base_url=pop_broker.url, timeout=30) as c:
        _produce(c, "t", 10)
        got = _pop(c, invisible_ms=800)
        assert sorted(m["body"] for m in got) == sorted(f"m{i}" for i in range(10))
        assert {m["queue_id"] for m in got} == {0, 1}
        assert all(m["reconsume_times"] == 0 and m["receipt"] for m in got)
        assert _pop(c) == []  # in flight: invisible
        receipts = [m["receipt"] for m in got]
        first = c.post("/v1/groups/g/ack", json={"receipts": receipts}).json()
        assert first["acked"] == 10
        again = c.post("/v1/groups/g/ack", json={"receipts": receipts[:2]}).json()
        assert [r["status"] for r in again["results"]] == ["ALREADY_ACKED"] * 2 or again["acked"] == 0
        time.sleep(1.2)
        assert _pop(c) == []  # acked messages never come back
        bad = c.post("/v1/groups/g/ack", json={"receipts": ["nope"]})
        assert bad.status_code == 400 and bad.json()["error"] == "bad_receipt"


def test_unacked_is_redelivered_then_dead_lettered(pop_broker: Any) -> None:
    with httpx.Client(base_url=pop_broker.url, timeout=30) as c:
        _produce(c, "t", 1, queues=1)
        assert c.put("/v1/groups/g", json={"max_reconsume_times": 1}).json()["max_reconsume_times"] == 1
        first = _pop(c)
        assert [m["reconsume_times"] for m in first] == [0]
        second = _pop_until(c, 1)
        assert [(m["reconsume_times"], m["topic"], m["store_topic"], m["body"]) for m in second] == \
            [(1, "t", "%RETRY%g", "m0")]
        deadline = time.monotonic() + 10
        while not _dlq(c) and time.monotonic() < deadline:
            time.sleep(0.1)
        dead = _dlq(c)
        assert len(dead) == 1 and dead[0]["body"] == "m0"
        props = dead[0]["properties"]
        assert props["RETRY_TOPIC"] == "t" and props["ORIGIN_MESSAGE_ID"] == first[0]["msg_id"]
        assert props["RECONSUME_TIME"] == "1"
        assert _pop(c) == []
        metrics = c.get("/metrics").text
        assert 'sparkmq_dlq_messages_total{group="g"} 1' in metrics
        assert 'sparkmq_retry_messages_total{group="g"} 1' in metrics
        assert 'sparkmq_pop_inflight_messages{group="g"} 0' in metrics or "pop_inflight" in metrics


def test_invisible_time_can_be_extended(pop_broker: Any) -> None:
    with httpx.Client(base_url=pop_broker.url, timeout=30) as c:
        _produce(c, "t", 1, queues=1)
        [m] = _pop(c)
        resp = c.post("/v1/groups/g/invisible", json={"receipt": m["receipt"], "invisible_ms": 5000}).json()
        assert resp["status"] == "OK" and resp["receipt"] != m["receipt"]
        time.sleep(1.0)
        assert _pop(c) == []  # the original 500 ms passed; the extension holds it
        old = c.post("/v1/groups/g/ack", json={"receipts": [m["receipt"]]}).json()["results"][0]["status"]
        assert old == "EXPIRED"
        assert c.post("/v1/groups/g/ack", json={"receipts": [resp["receipt"]]}).json()["acked"] == 1


def test_pull_consumers_send_back_and_pop_filters(pop_broker: Any) -> None:
    with httpx.Client(base_url=pop_broker.url, timeout=30) as c:
        _produce(c, "t", 4, queues=1, properties={"a": "7"})
        page = c.get("/v1/topics/t/queues/0/messages", params={"offset": 0}).json()
        c.put("/v1/groups/g/offsets", json={"topic": "t", "offsets": {"0": 4}})
        ids = [m["msg_id"] for m in page["messages"]]
        assert c.post("/v1/groups/g/retry", json={"msg_id": ids[0]}).json()["status"] == "RETRY"
        assert c.post("/v1/groups/g/retry", json={"msg_id": ids[1], "delay_level": -1}).json()["status"] == "DLQ"
        back = _pop_until(c, 1)
        assert [(m["body"], m["reconsume_times"]) for m in back] == [("m0", 1)]
        assert [m["body"] for m in _dlq(c)] == ["m1"]
        _produce(c, "f", 6, queues=2, properties={"a": "3"})
        c.post("/v1/topics/f/messages", json={"messages": [{"body": "hit", "properties": {"a": "9"}}]})
        assert [m["body"] for m in _pop_until(c, 1, topic="f", filter="a > 5")] == ["hit"]
        bad = c.post("/v1/groups/g/pop", json={"topic": "f", "filter": "a >> 5"})
        assert bad.status_code == 400 and bad.json()["error"] == "bad_filter" and "position 3" in bad.text


def test_pop_long_polls(pop_broker: Any) -> None:
    with httpx.Client(base_url=pop_broker.url, timeout=30) as c:
        c.post("/v1/topics", json={"name": "t", "queues": 2})
        timer = threading.Timer(0.4, lambda: httpx.post(f"{pop_broker.url}/v1/topics/t/messages",
                                                        json={"messages": [{"body": "late"}]}))
        timer.start()
        t0 = time.monotonic()
        got = _pop(c, wait_ms=5000)
        timer.join()
        assert [m["body"] for m in got] == ["late"] and time.monotonic() - t0 < 3


def test_popped_unacked_messages_come_back_after_sigkill(pop_broker: Any) -> None:
    with httpx.Client(base_url=pop_broker.url, timeout=30) as c:
        _produce(c, "t", 6)
        got = _pop(c, invisible_ms=3000)
        assert len(got) == 6
        acked = {m["body"] for m in got[:2]}
        assert c.post("/v1/groups/g/ack", json={"receipts": [m["receipt"] for m in got[:2]]}).json()["acked"] == 2
    pop_broker.kill()
    pop_broker.start()
    with httpx.Client(base_url=pop_broker.url, timeout=30) as c:
        back = _pop_until(c, 4, invisible_ms=10_000)  # after the invisible time, as retries
        time.sleep(0.5)
        back += _pop(c, invisible_ms=10_000)
        assert sorted(m["body"] for m in back) == sorted({m["body"] for m in got} - acked)
        assert all(m["reconsume_times"] == 1 for m in back)
        assert c.post("/v1/groups/g/ack", json={"receipts": [m["receipt"] for m in back]}).json()["acked"] == 4
    pop_broker.stop()
    pop_broker.start()
    with httpx.Client(base_url=pop_broker.url, timeout=30) as c:
        time.sleep(1.0)
        assert _pop(c) == []


def test_dlq_move_happens_exactly_once_across_sigkill(pop_broker: Any) -> None:
    n = 40
    with httpx.Client(base_url=pop_broker.url, timeout=30) as c:
        _produce(c, "t", n)
        c.put("/v1/groups/g", json={"max_reconsume_times": 0})
        assert len(_pop_until(c, n, n=n, invisible_ms=300)) == n
        deadline = time.monotonic() + 5
        while not _dlq(c) and time.monotonic() < deadline:
            time.sleep(0.01)
    pop_broker.kill()  # most likely in the middle of the moves
    pop_broker.start()
    with httpx.Client(base_url=pop_broker.url, timeout=30) as c:
        deadline = time.monotonic() + 10
        while len(_dlq(c)) < n and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.5)
        bodies = [m["body"] for m in _dlq(c)]
        assert sorted(bodies) == sorted(f"m{i}" for i in range(n))  # each once
        assert _pop(c) == []
