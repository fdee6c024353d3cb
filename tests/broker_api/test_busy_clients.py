"""Clients honour a busy broker's Retry-After: refused sends are waited out and land once each.

A real broker admits one produce at a time with no waiting room, so
concurrent senders get ``503 broker_busy`` + ``Retry-After`` at once.
"""

from __future__ import annotations

import threading
from typing import Any

import httpx

from broker_api.client import SparkMQClient
from streaming.client import BrokerClient
from streaming.options import ClientConfig

# one produce at a time, no waiting room, and each write holds its slot over an fdatasync (bodies are
# read before a slot is taken, so only the write itself can make a sender wait)
_BUSY = {"SPARKMQ_SERVER__PRODUCE_INFLIGHT": "1", "SPARKMQ_SERVER__PRODUCE_WAIT_MS": "0",
         "SPARKMQ_STORE__FLUSH_MODE": "sync"}


def _stored(url: str, topic: str) -> int:
    return sum(q["max_offset"] for q in httpx.get(f"{url}/v1/topics/{topic}/queues", timeout=30).json())


def _concurrently(send: Any, threads: int = 6) -> list[BaseException]:
    errors: list[BaseException] = []

    def run(t: int) -> None:
        try:
            send(t)
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            errors.append(exc)

    workers = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(120)
    return errors


def test_python_client_and_spark_client_wait_out_busy_answers(fast_broker: Any) -> None:
    b = fast_broker(_BUSY)
    httpx.post(f"{b.url}/v1/topics", json={"name": "busy", "queues": 4}, timeout=30)
    clients = [SparkMQClient(b.url, busy_retries=40) for _ in range(4)]
    batch = [f"m{i}" * 50 for i in range(1000)]
    try:
        assert _concurrently(lambda t: [clients[t].produce("busy", batch) for _ in range(2)], threads=4) == []
    finally:
        for c in clients:
            c.close()
    waited = sum(c.busy_retried for c in clients)
    assert waited > 0  # the broker did refuse, and the clients waited
    assert _stored(b.url, "busy") == 4 * 2 * 1000  # each send stored exactly once
    # the Spark-side client waits out busy answers within its request timeout: fewer senders share the slot
    spark_side = [BrokerClient(ClientConfig((b.url,))) for _ in range(2)]
    rows = [{"body": f"s{i}" * 50} for i in range(1000)]
    try:
        assert _concurrently(lambda t: [spark_side[t].produce("busy", rows) for _ in range(2)], threads=2) == []
    finally:
        for c in spark_side:
            c.close()
    assert _stored(b.url, "busy") == (4 + 2) * 2 * 1000
    metrics = httpx.get(f"{b.url}/metrics", timeout=30).text.splitlines()
    refused = sum(float(line.rsplit(" ", 1)[1]) for line in metrics
                  if line.startswith("sparkmq_requests_rejected_total{") and 'route="produce"' in line)
    assert refused > waited  # the Spark-side client was refused too, and waited it out
