"""Delay-level and timer messages end to end over HTTP, across restarts and SIGKILL."""

from __future__ import annotations

import time
from typing import Any

import httpx

# Short levels keep the tests quick: level 1 = 300 ms, 2 = 1 s, 3 = 2 s, 4 = 4 s.
DELAY_ENV = {"SPARKMQ_DELAY__LEVELS": "300ms 1s 2s 4s", "SPARKMQ_DELAY__POLL_INTERVAL_MS": "50",
             "SPARKMQ_DELAY__TIMER_PRECISION_MS": "100", "SPARKMQ_DELAY__PROGRESS_INTERVAL_S": "0.5"}


def _read(c: httpx.Client, topic: str, queues: int = 1) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for qid in range(queues):
        out.extend(_read_all(c, topic, qid))
    return out


def _wait_for(c: httpx.Client, topic: str, n: int, timeout_s: float, queues: int = 1) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout_s
    got = _read(c, topic, queues)
    while len(got) < n and time.monotonic() < deadline:
        time.sleep(0.05)
        got = _read(c, topic, queues)
    return got


def _topic(c: httpx.Client, name: str, queues: int = 1) -> None:
    assert c.post("/v1/topics", json={"name": name, "queues": queues}).status_code in (200, 201)


def test_delay_level_message_becomes_visible_at_its_due_time(fast_broker: Any) -> None:
    b = fast_broker(DELAY_ENV)
    with httpx.Client(base_url=b.url, timeout=30) as c:
        _topic(c, "late", 2)
        sent = time.time()
        resp = c.post("/v1/topics/late/messages", json={"messages": [
            {"body": "soon", "keys": ["k1"], "tags": "t", "queue_id": 1, "delay_level": 2,
             "properties": {"p": "v"}},
            {"body": "now"}]})
        assert resp.status_code == 200, resp.text
        r0 = resp.json()["results"][0]
        assert r0["scheduled"] is True and r0["queue_id"] == 1 and r0["queue_offset"] is None
        assert [m["body"] for m in _read(c, "late", 2)] == ["now"]
        got = _wait_for(c, "late", 2, 5.0, 2)
        waited = time.time() - sent
        m = next(x for x in got if x["body"] == "soon")
        assert m["queue_id"] == 1 and m["keys"] == ["k1"] and m["tags"] == "t" and m["properties"]["p"] == "v"
        assert "REAL_TOPIC" not in m["properties"]
        assert 1.0 <= waited < 2.5, waited
        time.sleep(0.5)
        assert len(_read(c, "late", 2)) == 2  # exactly once
        metrics = c.get("/metrics").text
        assert 'sparkmq_delay_pending_messages{level="2"} 0' in metrics


def test_bad_delay_requests_are_refused(fast_broker: Any) -> None:
    b = fast_broker(DELAY_ENV)
    with httpx.Client(base_url=b.url, timeout=30) as c:
        bad = [{"body": "x", "delay_level": 0}, {"body": "x", "delay_level": "2"},
               {"body": "x", "deliver_at_ms": int(time.time() * 1000) + 4 * 86400_000},
               {"body": "x", "delay_level": 1, "deliver_at_ms": 1}]
        for item in bad:
            resp = c.post("/v1/topics/t/messages", json={"messages": [item]})
            assert resp.status_code == 400, (item, resp.text)
        assert c.post("/v1/topics/SCHEDULE_TOPIC_XXXX/messages", json={"messages": [{"body": "x"}]}).status_code >= 400


def test_delayed_messages_due_during_downtime_are_delivered_once_after_sigkill(fast_broker: Any) -> None:
    b = fast_broker(DELAY_ENV)
    with httpx.Client(base_url=b.url, timeout=30) as c:
        _topic(c, "dk")
        # level 1 (300 ms) is delivered before the kill; level 3 (2 s) falls due while the broker is down
        c.post("/v1/topics/dk/messages", json={"messages": [{"body": f"a{i}", "delay_level": 1} for i in range(50)]})
        c.post("/v1/topics/dk/messages", json={"messages": [{"body": f"b{i}", "delay_level": 3} for i in range(50)]})
        assert len(_wait_for(c, "dk", 50, 5.0)) == 50
    b.kill()
    time.sleep(2.5)
    b.start()
    with httpx.Client(base_url=b.url, timeout=30) as c:
        got = _wait_for(c, "dk", 100, 5.0)
        time.sleep(1.0)
        bodies = [m["body"] for m in _read(c, "dk")]
    assert sorted(bodies) == sorted([f"a{i}" for i in range(50)] + [f"b{i}" for i in range(50)]), len(got)


def test_delivery_interrupted_by_sigkill_is_not_repeated(fast_broker: Any) -> None:
    """A kill while a level delivers, restarted at once: every message once, none twice."""
    b = fast_broker(DELAY_ENV)
    n = 0
    with httpx.Client(base_url=b.url, timeout=30) as c:
        _topic(c, "dx")
        for k in range(20):
            c.post("/v1/topics/dx/messages",
                   json={"messages": [{"body": f"m{k}-{i}", "delay_level": 1} for i in range(100)]})
            n += 100
        time.sleep(0.35)  # the first batches fall due: delivery is under way
    b.kill()
    b.start()
    with httpx.Client(base_url=b.url, timeout=30) as c:
        _wait_for(c, "dx", n, 10.0)
        time.sleep(1.0)
        bodies = [m["body"] for m in _read_all(c, "dx")]
    assert len(bodies) == len(set(bodies)) == n


def _read_all(c: httpx.Client, topic: str, qid: int = 0) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    offset = 0
    while True:
        page = c.get(f"/v1/topics/{topic}/queues/{qid}/messages", params={"offset": offset, "max_messages": 1000}).json()
        out.extend(page["messages"])
        if page["status"] != "FOUND":
            return out
        offset = page["next_offset"]


def test_timer_message_is_delivered_at_deliver_at_ms(fast_broker: Any) -> None:
    b = fast_broker(DELAY_ENV)
    with httpx.Client(base_url=b.url, timeout=30) as c:
        _topic(c, "tm")
        due = int(time.time() * 1000) + 1500
        resp = c.post(f"/v1/topics/tm/messages?deliver_at_ms={due}", content=b"raw-timer",
                      headers={"Content-Type": "application/octet-stream"})
        assert resp.status_code == 200 and resp.json()["results"][0]["scheduled"], resp.text
        c.post("/v1/topics/tm/messages", json={"messages": [{"body": "past", "deliver_at_ms": 1}]})
        assert [m["body"] for m in _read(c, "tm")] == ["past"]  # a past due time is delivered at once
        got = _wait_for(c, "tm", 2, 5.0)
        arrived = time.time() * 1000
        assert [m["body"] for m in got] == ["past", "raw-timer"]
        assert due <= arrived < due + 1000, arrived - due
        assert got[1]["store_timestamp"] >= due


def test_timer_messages_survive_sigkill_and_are_delivered_once(fast_broker: Any) -> None:
    b = fast_broker(DELAY_ENV)
    now = int(time.time() * 1000)
    with httpx.Client(base_url=b.url, timeout=30) as c:
        _topic(c, "tk")
        # due before the kill, due during the downtime, due after the restart (far enough out that a
        # slow restart on a loaded machine still comes first)
        for k, at in enumerate((now + 500, now + 2000, now + 15000)):
            resp = c.post("/v1/topics/tk/messages",
                          json={"messages": [{"body": f"t{k}-{i}", "deliver_at_ms": at + i} for i in range(200)]})
            assert resp.status_code == 200
        assert len(_wait_for(c, "tk", 200, 5.0)) == 200
    b.kill()
    time.sleep(2.0)
    b.start()
    with httpx.Client(base_url=b.url, timeout=30) as c:
        assert len(_wait_for(c, "tk", 400, 5.0)) == 400
        assert 'sparkmq_delay_pending_messages{level="timer"} 200' in c.get("/metrics").text
    b.restart()  # a clean restart in between keeps the rest pending
    with httpx.Client(base_url=b.url, timeout=30) as c:
        _wait_for(c, "tk", 600, max(8.0, (now + 15000) / 1000 - time.time() + 8.0))
        time.sleep(0.5)
        bodies = [m["body"] for m in _read(c, "tk")]
    assert sorted(bodies) == sorted(f"t{k}-{i}" for k in range(3) for i in range(200))
