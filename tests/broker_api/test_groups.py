"""Consumer group offsets: commit, read, lag, persistence, slow-consumer protection."""

from __future__ import annotations

import time
from typing import Any

import httpx


def _fill(c: httpx.Client, topic: str, per_queue: int, queues: int = 2) -> None:
    c.post("/v1/topics", json={"name": topic, "queues": queues})
    msgs = [{"body": f"m{i}", "queue_id": q} for q in range(queues) for i in range(per_queue)]
    assert c.post(f"/v1/topics/{topic}/messages", json={"messages": msgs}).status_code == 200
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if all(q["max_offset"] == per_queue for q in c.get(f"/v1/topics/{topic}/queues").json()):
            return
        time.sleep(0.01)
    raise AssertionError("messages never became visible")


def test_offsets_commit_read_and_lag(client: httpx.Client) -> None:
    _fill(client, "t", 10)
    assert client.get("/v1/groups/g1/offsets", params={"topic": "t"}).json() == {"topic": "t", "offsets": {}}
    resp = client.put("/v1/groups/g1/offsets", json={"topic": "t", "offsets": {"0": 4}})
    assert resp.json() == {"ok": True}
    assert client.get("/v1/groups/g1/offsets", params={"topic": "t"}).json() == {"topic": "t", "offsets": {"0": 4}}
    group = client.get("/v1/groups/g1").json()
    assert group["queues"] == [{"topic": "t", "queue_id": 0, "committed_offset": 4, "max_offset": 10, "lag": 6}]
    assert group["total_lag"] == 6 and group["consume_enabled"] is True
    listed = client.get("/v1/groups").json()
    assert listed == [{"group": "g1", "topics": ["t"], "total_lag": 6, "consume_enabled": True}]


def test_offsets_survive_a_restart(fast_broker: Any) -> None:
    b = fast_broker()
    with httpx.Client(base_url=b.url) as c:
        _fill(c, "t", 5)
        c.put("/v1/groups/g/offsets", json={"topic": "t", "offsets": {"0": 3, "1": 5}})
    assert b.stop() == 0
    b.start()
    with httpx.Client(base_url=b.url) as c:
        assert c.get("/v1/groups/g/offsets", params={"topic": "t"}).json()["offsets"] == {"0": 3, "1": 5}
        assert [q["max_offset"] for q in c.get("/v1/topics/t/queues").json()] == [5, 5]


def test_offsets_are_persisted_periodically_even_without_clean_stop(fast_broker: Any) -> None:
    b = fast_broker({"SPARKMQ_GROUPS__OFFSETS_FLUSH_INTERVAL_S": "0.2"})
    with httpx.Client(base_url=b.url) as c:
        _fill(c, "t", 2)
        c.put("/v1/groups/g/offsets", json={"topic": "t", "offsets": {"1": 2}})
    time.sleep(1.0)
    b.kill()
    b.start()
    with httpx.Client(base_url=b.url) as c:
        assert c.get("/v1/groups/g/offsets", params={"topic": "t"}).json()["offsets"] == {"1": 2}


def test_slow_consumer_protection_disables_a_lagging_group(fast_broker: Any) -> None:
    b = fast_broker({"SPARKMQ_PROTECTION__DISABLE_SLOW_CONSUMERS": "true",
                     "SPARKMQ_PROTECTION__MAX_LAG_MESSAGES": "5",
                     "SPARKMQ_PROTECTION__CHECK_INTERVAL_S": "0.1"})
    with httpx.Client(base_url=b.url) as c:
        _fill(c, "t", 10)
        c.put("/v1/groups/slow/offsets", json={"topic": "t", "offsets": {"0": 0}})
        c.put("/v1/groups/fast/offsets", json={"topic": "t", "offsets": {"0": 9}})
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and c.get("/v1/groups/slow").json()["consume_enabled"]:
            time.sleep(0.05)
        pull = "/v1/topics/t/queues/0/messages"
        resp = c.get(pull, params={"offset": 0, "group": "slow"})
        assert resp.status_code == 403 and resp.json()["error"] == "group_disabled"
        assert "PUT /v1/groups/slow" in resp.json()["message"]
        assert c.get(pull, params={"offset": 9, "group": "fast"}).status_code == 200
        c.put("/v1/groups/slow/offsets", json={"topic": "t", "offsets": {"0": 10}})
        assert c.put("/v1/groups/slow", json={"consume_enabled": True}).status_code == 200
        assert c.get(pull, params={"offset": 10, "group": "slow"}).status_code == 200
