"""``answer=summary``: first and last offset per queue instead of one result per message."""

from __future__ import annotations

import httpx
import pyarrow as pa

from tests.broker_api.test_arrow_produce import ARROW, _arrow

QUEUES = 4


def _pull_all(client: httpx.Client, topic: str, qid: int, offset: int, n: int) -> list[str]:
    out: list[str] = []
    while len(out) < n:
        page = client.get(f"/v1/topics/{topic}/queues/{qid}/messages",
                          params={"offset": offset + len(out), "max_messages": n - len(out), "wait_ms": 2000}).json()
        assert page["messages"], page
        out += [m["body"] for m in page["messages"]]
    return out


def _check_summary(client: httpx.Client, topic: str, doc: dict, bodies: list[str]) -> None:
    """Every message is where the summary says: queue by queue, consecutive offsets, request order."""
    assert doc["status"] == "SEND_OK" and doc["count"] == len(bodies) and doc["scheduled"] == 0
    assert "results" not in doc
    queues = doc["queues"]
    assert sum(q["count"] for q in queues) == len(bodies)
    for k, q in enumerate(queues):
        assert q["last_offset"] - q["first_offset"] + 1 == q["count"]
        # round robin: row i went to the queue listed i % len(queues) places after the first
        expected = bodies[k::len(queues)]
        assert _pull_all(client, topic, q["queue_id"], q["first_offset"], q["count"]) == expected


def test_arrow_summary_names_each_queue_range(client: httpx.Client) -> None:
    client.post("/v1/topics/sum-a/messages", json={"messages": [{"body": "before"}]})  # offsets not at 0
    bodies = [f"row-{i}" for i in range(1000)]
    resp = client.post("/v1/topics/sum-a/messages", params={"answer": "summary"},
                       content=_arrow({"body": pa.array(bodies, pa.string())}), headers={"Content-Type": ARROW})
    assert resp.status_code == 200, resp.text
    assert len(resp.content) < 400  # a few dozen bytes per queue, not ~70 per message
    doc = resp.json()
    assert len(doc["queues"]) == QUEUES
    _check_summary(client, "sum-a", doc, bodies)


def test_json_summary_on_the_column_and_the_message_paths(client: httpx.Client) -> None:
    for n in (1000, 10):  # 64+ plain bodies take the column path; fewer the per-message path (batcher)
        bodies = [f"j{n}-{i}" for i in range(n)]
        resp = client.post("/v1/topics/sum-j/messages?answer=summary",
                           json={"messages": [{"body": b} for b in bodies]})
        assert resp.status_code == 200, resp.text
        _check_summary(client, "sum-j", resp.json(), bodies)


def test_keyed_summary_keeps_request_order_per_queue(client: httpx.Client) -> None:
    msgs = [{"body": f"k{i}", "keys": [f"user-{i % 7}"], "tags": "t"} for i in range(50)]
    full = client.post("/v1/topics/sum-k/messages", json={"messages": msgs}).json()
    doc = client.post("/v1/topics/sum-k/messages?answer=summary", json={"messages": msgs}).json()
    by_queue: dict[int, list[str]] = {}
    for m, r in zip(msgs, full["results"]):
        by_queue.setdefault(r["queue_id"], []).append(m["body"])
    assert {q["queue_id"]: q["count"] for q in doc["queues"]} == {q: len(b) for q, b in by_queue.items()}
    for q in doc["queues"]:
        assert _pull_all(client, "sum-k", q["queue_id"], q["first_offset"], q["count"]) == by_queue[q["queue_id"]]


def test_delayed_messages_are_counted_as_scheduled(client: httpx.Client) -> None:
    doc = client.post("/v1/topics/sum-d/messages?answer=summary",
                      json={"messages": [{"body": "now"}, {"body": "later", "delay_level": 3}]}).json()
    assert doc["count"] == 2 and doc["scheduled"] == 1
    assert sum(q["count"] for q in doc["queues"]) == 1


def test_full_stays_the_default_and_unknown_forms_are_refused(client: httpx.Client) -> None:
    body = {"messages": [{"body": "a"}, {"body": "b"}]}
    plain = client.post("/v1/topics/sum-f/messages", json=body).json()
    full = client.post("/v1/topics/sum-f/messages?answer=full", json=body).json()
    assert [set(r) for r in plain["results"] + full["results"]] == [{"msg_id", "queue_id", "queue_offset"}] * 4
    bad = client.post("/v1/topics/sum-f/messages?answer=brief", json=body)
    assert bad.status_code == 400 and "answer=summary" in bad.json()["message"]
