"""Long polling next to batch producers: a parked consumer gets every message once, in order,
while the reput thread dispatches other topics' batches in the same rounds."""

from __future__ import annotations

import threading
import time

import httpx


def _consume(base_url: str, expect: int, out: list[str]) -> None:
    offset = 0
    with httpx.Client(base_url=base_url, timeout=30) as c:
        while len(out) < expect:
            page = c.get("/v1/topics/tail/queues/0/messages",
                         params={"offset": offset, "max_messages": 50, "wait_ms": 3000}).json()
            out += [m["body"] for m in page["messages"]]
            offset = page["next_offset"]


def test_parked_consumer_gets_each_message_once_next_to_batch_producers(client: httpx.Client) -> None:
    client.post("/v1/topics", json={"name": "tail", "queues": 1})
    client.post("/v1/topics", json={"name": "bulk", "queues": 2})
    n, got = 300, []  # type: ignore[var-annotated]
    consumer = threading.Thread(target=_consume, args=(str(client.base_url), n, got))
    consumer.start()
    bulk_done = threading.Event()

    def bulk() -> None:
        with httpx.Client(base_url=client.base_url, timeout=30) as c:
            while not bulk_done.is_set():
                c.post("/v1/topics/bulk/messages", json={"messages": [{"body": "b" * 100}] * 200})

    loader = threading.Thread(target=bulk)
    loader.start()
    try:
        for i in range(n):
            assert client.post("/v1/topics/tail/messages", json={"messages": [{"body": f"m{i}"}]}).status_code == 200
        consumer.join(60)
    finally:
        bulk_done.set()
        loader.join(30)
    assert got == [f"m{i}" for i in range(n)]
    # the bulk topic's queues have no gap or double: every unit points at its own record
    for qid in range(2):
        page = client.get(f"/v1/topics/bulk/queues/{qid}/messages", params={"offset": 0, "max_messages": 1000}).json()
        assert [m["offset"] for m in page["messages"]] == list(range(len(page["messages"])))


def test_long_poll_right_after_a_produce_returns_it_without_waiting_out(client: httpx.Client) -> None:
    """Read your writes for a long poll: it parks at once if the message is not dispatched yet, and
    the dispatch wakes it (it does not sit out its wait, nor answer empty)."""
    client.post("/v1/topics", json={"name": "ryw", "queues": 1})
    started = time.monotonic()
    for i in range(20):
        client.post("/v1/topics/bulk2/messages", json={"messages": [{"body": "b" * 100}] * 500})  # reput backlog
        client.post("/v1/topics/ryw/messages", json={"messages": [{"body": f"r{i}"}]})
        page = client.get("/v1/topics/ryw/queues/0/messages",
                          params={"offset": i, "max_messages": 10, "wait_ms": 20_000}).json()
        assert page["status"] == "FOUND" and [m["body"] for m in page["messages"]] == [f"r{i}"]
    assert time.monotonic() - started < 15  # one pull that sat out its 20 s wait would fail this
