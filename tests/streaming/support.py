"""Helpers for the Spark end-to-end tests: produce over HTTP, wait, collect."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

NO_MIRROR = {"SPARKMQ_MIRROR__ENABLED": "false"}


def create_topic(url: str, name: str, queues: int = 4) -> None:
    r = httpx.post(f"{url}/v1/topics", json={"name": name, "queues": queues}, timeout=10)
    assert r.status_code in (200, 201), r.text


def produce(
    url: str,
    topic: str,
    n: int,
    *,
    start: int = 0,
    queues: int = 4,
    tags: Callable[[int], str | None] | None = None,
    size: int = 0,
) -> None:
    """Messages body ``"<topic>-<i>"`` (padded to ``size``), queue ``i % queues``."""
    for lo in range(start, start + n, 1000):
        msgs: list[dict[str, Any]] = []
        for i in range(lo, min(start + n, lo + 1000)):
            body = f"{topic}-{i}".ljust(size, ".")
            m: dict[str, Any] = {"body": body, "queue_id": i % queues, "keys": [f"k{i}"],
                                 "properties": {"i": str(i)}}
            tag = tags(i) if tags else None
            if tag:
                m["tags"] = tag
            msgs.append(m)
        r = httpx.post(f"{url}/v1/topics/{topic}/messages", json={"messages": msgs}, timeout=30)
        assert r.status_code == 200, r.text


def queue_max(url: str, topic: str) -> dict[int, int]:
    rows = httpx.get(f"{url}/v1/topics/{topic}/queues", timeout=10).json()
    return {int(r["queue_id"]): int(r["max_offset"]) for r in rows}


def wait_visible(url: str, topic: str, total: int, timeout_s: float = 20.0) -> dict[int, int]:
    """Wait until the topic's queues hold ``total`` messages (dispatch is asynchronous)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        maxes = queue_max(url, topic)
        if sum(maxes.values()) >= total:
            return maxes
        time.sleep(0.05)
    raise AssertionError(f"{topic}: only {queue_max(url, topic)} visible, wanted {total}")


def wait_until(cond: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")


class BatchCollector:
    """A foreachBatch sink keyed by batch id, so a replayed batch overwrites itself."""

    def __init__(self) -> None:
        self.batches: dict[int, list[tuple[str, int, int, bytes]]] = {}

    def __call__(self, df: Any, batch_id: int) -> None:
        rows = df.select("topic", "partition", "offset", "value").collect()
        self.batches[batch_id] = [(r[0], r[1], r[2], bytes(r[3])) for r in rows]

    def rows(self) -> list[tuple[str, int, int, bytes]]:
        return [row for b in sorted(self.batches) for row in self.batches[b]]


def assert_exactly_once_in_order(
    rows: list[tuple[str, int, int, bytes]], expected: dict[int, range]
) -> None:
    """Every queue's offsets appear once each, in increasing order, as ``expected``."""
    per_queue: dict[int, list[int]] = {}
    for _topic, qid, offset, _ in rows:
        per_queue.setdefault(qid, []).append(offset)
    assert sorted(per_queue) == sorted(q for q, r in expected.items() if len(r)), per_queue.keys()
    for qid, want in expected.items():
        assert per_queue.get(qid, []) == list(want), f"queue {qid}"


def spans(lo: dict[int, int] | None, hi: dict[int, int]) -> dict[int, range]:
    return {q: range((lo or {}).get(q, 0), top) for q, top in hi.items()}


def checkpoint(tmp_path: Path, name: str) -> str:
    return str(tmp_path / "checkpoints" / name)
