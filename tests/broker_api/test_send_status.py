"""FLUSH_DISK_TIMEOUT: a SYNC put whose fdatasync does not confirm it in time is answered 200 with
that SendStatus (the message is stored), never an error that hides what was stored."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import httpx


def test_sync_flush_timeout_answers_flush_disk_timeout_and_the_messages_are_stored(fast_broker: Any) -> None:
    # 1 ms: a put that waits behind another put's fdatasync runs out of time
    b = fast_broker({"SPARKMQ_STORE__FLUSH_MODE": "sync", "SPARKMQ_STORE__SYNC_FLUSH_TIMEOUT_MS": "1"})
    statuses: Counter[str] = Counter()
    acked: list[tuple[int, int, str]] = []
    lock = threading.Lock()

    def producer(w: int) -> None:
        with httpx.Client(base_url=b.url, timeout=30) as c:
            for n in range(40):
                bodies = [f"w{w}-{n}-{i}" for i in range(5)]
                r = c.post("/v1/topics/flushy/messages", json={"messages": [{"body": x} for x in bodies]})
                assert r.status_code == 200, r.text
                with lock:
                    statuses[r.json()["status"]] += 1
                    acked.extend((x["queue_id"], x["queue_offset"], body)
                                 for body, x in zip(bodies, r.json()["results"]))

    workers = [threading.Thread(target=producer, args=(w,)) for w in range(12)]
    for t in workers:
        t.start()
    for t in workers:
        t.join(120)
    assert set(statuses) <= {"SEND_OK", "FLUSH_DISK_TIMEOUT"} and statuses["FLUSH_DISK_TIMEOUT"] > 0, statuses
    seen: dict[tuple[int, int], str] = {}
    with httpx.Client(base_url=b.url, timeout=30) as c:
        for q in c.get("/v1/topics/flushy/queues").json():
            page = c.get(f"/v1/topics/flushy/queues/{q['queue_id']}/messages",
                         params={"offset": 0, "max_messages": 1000}).json()
            seen.update(((q["queue_id"], m["offset"]), m["body"]) for m in page["messages"])
        metrics = c.get("/metrics").text
    assert all(seen.get((qid, off)) == body for qid, off, body in acked)  # every answer's messages stored
    assert len(seen) == len(acked) == 12 * 40 * 5
    assert 'sparkmq_produce_status_total{status="FLUSH_DISK_TIMEOUT"}' in metrics
