"""Spark reads a topic whose old segments live in S3 (moto's server on loopback): every row, the same bytes."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

import streaming
from tests.s3_support import S3Server

from .support import NO_MIRROR, create_topic

pytestmark = pytest.mark.spark


def test_spark_reads_remote_segments_byte_for_byte(spark: Any, broker_factory: Any,
                                                   s3_server: S3Server) -> None:
    env = {**NO_MIRROR, **s3_server.env(), "SPARKMQ_TIERED__URI": f"s3://{s3_server.new_bucket()}/spark",
           "SPARKMQ_TIERED__LOCAL_RETENTION_S": "0", "SPARKMQ_TIERED__INTERVAL_S": "0.2",
           "SPARKMQ_TIERED__BLOCK_BYTES": str(16 << 10), "SPARKMQ_STORE__COMMITLOG_SEGMENT_BYTES": str(64 << 10),
           "SPARKMQ_STORE__CONSUMEQUEUE_SEGMENT_UNITS": "40"}  # old ConsumeQueue files move to S3 too
    b = broker_factory(env=env)
    create_topic(b.url, "tiered", queues=2)
    sent = [f"{i:05d}-".encode() + bytes([i % 251]) * 900 for i in range(400)]
    for lo in range(0, 400, 100):
        httpx.post(f"{b.url}/v1/topics/tiered/messages", timeout=30, json={"messages": [
            {"body": s.decode("latin-1"), "queue_id": i % 2} for i, s in enumerate(sent[lo:lo + 100], lo)]}
        ).raise_for_status()
    deadline = time.monotonic() + 30
    queue0 = b.data_dir / "store" / "consumequeue" / "tiered" / "0"
    while (t := httpx.get(f"{b.url}/v1/broker", timeout=10).json()["tiered"])["local_segments"] > 1 \
            or min(p.name for p in queue0.iterdir()) == "0" * 20:
        assert time.monotonic() < deadline, t
        time.sleep(0.1)
    assert t["remote_segments"] >= 5
    streaming.register(spark)
    rows = spark.read.format("sparkmq").option("endpoint", b.url).option("subscribe", "tiered").load() \
        .select("partition", "offset", "value").collect()
    got = sorted((r.partition, r.offset, bytes(r.value)) for r in rows)
    want = sorted((i % 2, i // 2, s.decode("latin-1").encode()) for i, s in enumerate(sent))
    assert got == want
