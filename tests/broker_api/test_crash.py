"""SIGKILL of a SYNC-flush broker under load loses no acknowledged message."""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx


def _producer(url: str, worker: int, acked: list[tuple[int, int, str]], stop: threading.Event) -> None:
    with httpx.Client(base_url=url, timeout=10) as c:
        n = 0
        while not stop.is_set():
            bodies = [f"w{worker}-{n + i}" for i in range(20)]
            try:
                resp = c.post("/v1/topics/crash/messages", json={"messages": [{"body": b} for b in bodies]})
            except httpx.HTTPError:
                return  # the broker died mid-request: that batch was never acknowledged
            if resp.status_code == 200:
                for body, r in zip(bodies, resp.json()["results"]):
                    acked.append((r["queue_id"], r["queue_offset"], body))
            n += 20


def _read_all(c: httpx.Client, queues: int) -> dict[tuple[int, int], str]:
    seen: dict[tuple[int, int], str] = {}
    for qid in range(queues):
        offset = 0
        while True:
            page = c.get(f"/v1/topics/crash/queues/{qid}/messages",
                         params={"offset": offset, "max_messages": 1000}).json()
            for m in page["messages"]:
                seen[(qid, m["offset"])] = m["body"]
            if page["status"] != "FOUND":
                break
            offset = page["next_offset"]
    return seen


def test_sigkill_under_load_with_sync_flush_keeps_every_acknowledged_message(fast_broker: Any) -> None:
    b = fast_broker({"SPARKMQ_STORE__FLUSH_MODE": "sync", "SPARKMQ_STORE__COMMITLOG_SEGMENT_BYTES": str(256 << 10),
                     "SPARKMQ_FAST_FAILURE__MAX_QUEUE_WAIT_MS": "5000"})
    with httpx.Client(base_url=b.url) as c:
        c.post("/v1/topics", json={"name": "crash", "queues": 4})
    acked: list[tuple[int, int, str]] = []
    stop = threading.Event()
    workers = [threading.Thread(target=_producer, args=(b.url, w, acked, stop)) for w in range(4)]
    for w in workers:
        w.start()
    deadline = time.monotonic() + 20
    while len(acked) < 2000 and time.monotonic() < deadline:
        time.sleep(0.05)
    b.kill()
    stop.set()
    for w in workers:
        w.join(15)
    assert len(acked) >= 200
    b.start()
    with httpx.Client(base_url=b.url, timeout=30) as c:
        deadline = time.monotonic() + 20
        seen = _read_all(c, 4)
        while len(seen) < len(acked) and time.monotonic() < deadline:
            time.sleep(0.1)
            seen = _read_all(c, 4)
    missing = [(q, o, body) for q, o, body in acked if seen.get((q, o)) != body]
    assert not missing, f"{len(missing)} acknowledged messages lost, e.g. {missing[:3]}"
    assert all(body.startswith("w") for body in seen.values())
