"""Long polling: a parked pull wakes promptly on a produce and times out on time."""

from __future__ import annotations

import threading
import time

import httpx


def test_long_poll_is_woken_by_a_produce_not_by_its_timeout(client: httpx.Client, quick: object) -> None:
    client.post("/v1/topics", json={"name": "lp", "queues": 1})
    client.get("/v1/topics/lp/queues/0/messages", params={"offset": 0})  # warm the route
    produced_at: list[float] = []

    def produce_later() -> None:
        with httpx.Client(base_url=client.base_url, timeout=10) as other:
            time.sleep(0.5)
            produced_at.append(time.monotonic())
            other.post("/v1/topics/lp/messages", json={"messages": [{"body": "wake"}]})

    worker = threading.Thread(target=produce_later)
    worker.start()
    resp = client.get("/v1/topics/lp/queues/0/messages", params={"offset": 0, "wait_ms": 5000})
    answered_at = time.monotonic()
    worker.join(10)
    page = resp.json()
    assert page["status"] == "FOUND" and page["messages"][0]["body"] == "wake"
    # Woken by the produce, long before the 5 s wait ends (the latency itself is a benchmark figure,
    # not a test bound: a loaded CI machine must not fail this).
    assert answered_at - produced_at[0] < 2.0


def test_long_poll_times_out_with_no_new_message(client: httpx.Client) -> None:
    client.post("/v1/topics", json={"name": "quiet", "queues": 1})
    started = time.monotonic()
    page = client.get("/v1/topics/quiet/queues/0/messages", params={"offset": 0, "wait_ms": 400}).json()
    waited = time.monotonic() - started
    assert page["status"] == "NO_NEW_MESSAGE" and page["messages"] == [] and page["next_offset"] == 0
    assert 0.35 <= waited < 3.0


def test_long_poll_ignores_other_queues_and_filtered_tags(client: httpx.Client) -> None:
    client.post("/v1/topics", json={"name": "lp2", "queues": 2})

    def produce_later() -> None:
        with httpx.Client(base_url=client.base_url, timeout=10) as other:
            time.sleep(0.2)
            other.post("/v1/topics/lp2/messages", json={"messages": [{"body": "q1", "queue_id": 1}]})
            other.post("/v1/topics/lp2/messages", json={"messages": [{"body": "b", "queue_id": 0, "tags": "B"}]})
            time.sleep(0.2)
            other.post("/v1/topics/lp2/messages", json={"messages": [{"body": "a", "queue_id": 0, "tags": "A"}]})

    worker = threading.Thread(target=produce_later)
    worker.start()
    page = client.get("/v1/topics/lp2/queues/0/messages",
                      params={"offset": 0, "wait_ms": 5000, "tags": "A"}).json()
    worker.join(10)
    assert [m["body"] for m in page["messages"]] == ["a"]
    assert page["next_offset"] == 2
