"""SYNC flush over HTTP: a produce waits for its group fdatasync on the event loop, not on a
write-pool thread, so concurrent producers share fdatasyncs however small the pool is."""

from __future__ import annotations

import threading
from typing import Any

import httpx


def test_32_http_producers_share_fdatasyncs_beyond_the_write_pool(fast_broker: Any) -> None:
    # one write thread: before, each waiting produce held it, so an fdatasync answered one produce
    b = fast_broker({"SPARKMQ_STORE__FLUSH_MODE": "sync", "SPARKMQ_FAST_FAILURE__WRITE_THREADS": "1"})
    acked: list[tuple[int, int, str]] = []
    statuses: set[str] = set()
    lock = threading.Lock()
    barrier = threading.Barrier(32)

    def producer(w: int) -> None:
        with httpx.Client(base_url=b.url, timeout=30) as c:
            barrier.wait()
            for n in range(15):
                body = f"p{w}-{n}"
                r = c.post("/v1/topics/gchttp/messages", json={"messages": [{"body": body}]})
                assert r.status_code == 200, r.text
                [res] = r.json()["results"]
                with lock:
                    statuses.add(r.json()["status"])
                    acked.append((res["queue_id"], res["queue_offset"], body))

    workers = [threading.Thread(target=producer, args=(w,)) for w in range(32)]
    for t in workers:
        t.start()
    for t in workers:
        t.join(120)
    assert statuses == {"SEND_OK"} and len(acked) == 32 * 15
    with httpx.Client(base_url=b.url, timeout=30) as c:
        store = c.get("/v1/broker").json()["store"]
        seen: dict[tuple[int, int], str] = {}
        for q in c.get("/v1/topics/gchttp/queues").json():
            page = c.get(f"/v1/topics/gchttp/queues/{q['queue_id']}/messages",
                         params={"offset": 0, "max_messages": 1000}).json()
            seen.update(((q["queue_id"], m["offset"]), m["body"]) for m in page["messages"])
    assert all(seen.get((qid, off)) == body for qid, off, body in acked)  # every SEND_OK is stored
    # several produce groups, each waiting on the loop, were answered by one fdatasync
    assert store["largest_group_commit"] > 1, store
    assert store["flushes"] < len(acked) / 2, f"{store['flushes']} fdatasyncs for {len(acked)} produces"
    assert store["commitlog_flushed_offset"] == store["commitlog_max_offset"]  # nothing answered unflushed
