"""The lake on S3 (moto's server on loopback): the Delta mirror and a table topic write `s3://` tables, exactly
once across a SIGKILL and restart of the broker, and delta-rs reads them back there."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
from deltalake import DeltaTable

from tests.s3_support import S3Server

_FAST = {"SPARKMQ_MIRROR__BATCH_INTERVAL_S": "0.1", "SPARKMQ_STORE__COMMITLOG_SEGMENT_BYTES": str(1 << 20),
         "SPARKMQ_BROKER__LOG_LEVEL": "warning"}


def _storage(s3: S3Server) -> dict[str, str]:
    """delta-rs storage_options for reading the tables back (the broker takes the same from AWS_*)."""
    return {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1",
            "AWS_ENDPOINT_URL": s3.endpoint, "AWS_ALLOW_HTTP": "true"}


def _produce(url: str, topic: str, start: int, n: int) -> list[str]:
    msgs = [{"body": f'{{"n": {i}}}', "keys": [f"key-{i}"]} for i in range(start, start + n)]
    resp = httpx.post(f"{url}/v1/topics/{topic}/messages", json={"messages": msgs}, timeout=30)
    resp.raise_for_status()
    return [r["msg_id"] for r in resp.json()["results"]]


def _wait(check: Callable[[], bool], what: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"{what} after {timeout_s}s"
        time.sleep(0.1)


def _mirrored(url: str) -> bool:
    lag = httpx.get(f"{url}/v1/broker", timeout=10).json()["mirror"]
    return bool(lag["lag_bytes"] == 0 and lag["mirrored_offset"] > 0)


def test_mirror_on_s3_exactly_once_across_sigkill(broker_factory: Callable[..., Any], s3_server: S3Server) -> None:
    uri = f"s3://{s3_server.new_bucket()}/lake/messages"
    b = broker_factory(env={**_FAST, **s3_server.env(), "SPARKMQ_MIRROR__TABLE_URI": uri,
                            "SPARKMQ_MIRROR__BATCH_ROWS": "200"})
    acked: list[str] = []
    stop = threading.Event()

    def producer() -> None:
        for i in range(60):
            if stop.is_set():
                return
            try:
                acked.extend(_produce(b.url, "orders", i * 100, 100))
            except httpx.HTTPError:
                return  # killed mid-request: never acknowledged

    thread = threading.Thread(target=producer)
    thread.start()
    _wait(lambda: httpx.get(f"{b.url}/v1/broker", timeout=10).json()["mirror"]["mirrored_offset"] > 0
          and len(acked) >= 1000, "the mirror committed nothing")
    b.kill()
    stop.set()
    thread.join(60)
    b.start()
    acked += _produce(b.url, "orders", 100_000, 50)
    _wait(lambda: _mirrored(b.url), "the mirror is still behind")
    rows = DeltaTable(uri, storage_options=_storage(s3_server)).to_pyarrow_table(
        columns=["msg_id", "queue_id", "queue_offset"]).to_pylist()
    ids = [r["msg_id"] for r in rows]
    assert len(ids) == len(set(ids)), "duplicates in the mirror"
    assert set(acked) <= set(ids)
    by_queue: dict[int, list[int]] = {}
    for r in rows:
        by_queue.setdefault(r["queue_id"], []).append(r["queue_offset"])
    for offsets in by_queue.values():
        assert sorted(offsets) == list(range(min(offsets), max(offsets) + 1)), "a gap in the mirror"


def test_table_topic_on_s3_exactly_once_across_restart(broker_factory: Callable[..., Any],
                                                       s3_server: S3Server) -> None:
    bucket = s3_server.new_bucket()
    b = broker_factory(env={**_FAST, **s3_server.env(), "SPARKMQ_MIRROR__ENABLED": "false",
                            "SPARKMQ_TABLES__ROOT_DIR": f"s3://{bucket}/tables"})
    resp = httpx.post(f"{b.url}/v1/topics", json={"name": "events", "queues": 2,
                                                  "table": {"mode": "raw", "target_lag_s": 0.3}}, timeout=30)
    assert resp.status_code == 201, resp.text
    table_uri = resp.json().get("table_status", {}).get("table_uri") or f"s3://{bucket}/tables/events"
    sent = _produce(b.url, "events", 0, 300)

    def rows() -> int:
        return int(httpx.get(f"{b.url}/v1/topics/events", timeout=10).json()["table_status"]["rows"])

    _wait(lambda: rows() == 300, "the table topic did not reach 300 rows")
    b.kill()
    b.start()
    sent += _produce(b.url, "events", 300, 200)
    _wait(lambda: rows() == 500, "the table topic did not reach 500 rows")
    assert table_uri.startswith(f"s3://{bucket}/tables/")
    table = DeltaTable(table_uri, storage_options=_storage(s3_server)).to_pyarrow_table()
    assert table.num_rows == 500
    assert sorted(s3_server.keys(bucket, "tables/"))  # the table lives in the bucket, not on local disk
    assert not (b.data_dir / "tables").exists() or not any((b.data_dir / "tables").iterdir())
