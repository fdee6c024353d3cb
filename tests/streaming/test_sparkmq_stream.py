"""readStream end to end: real broker subprocess, real SparkSession (local[2])."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

import streaming

from .support import (
    NO_MIRROR,
    BatchCollector,
    assert_exactly_once_in_order,
    checkpoint,
    create_topic,
    produce,
    spans,
    wait_until,
    wait_visible,
)

pytestmark = pytest.mark.spark


def _reader(spark: Any, url: str, topic: str, **options: Any) -> Any:
    streaming.register(spark)
    r = spark.readStream.format("sparkmq").option("endpoint", url).option("subscribe", topic)
    for k, v in options.items():
        r = r.option(k, str(v))
    return r.load()


def _run_available_now(df: Any, sink: BatchCollector, ckpt: str) -> Any:
    q = (df.writeStream.foreachBatch(sink).option("checkpointLocation", ckpt)
         .trigger(availableNow=True).start())
    q.awaitTermination(180)
    if q.exception() is not None:
        raise q.exception()
    return q


def test_available_now_reads_exactly_what_was_produced_in_limited_micro_batches(
    spark: Any, broker_factory: Any, tmp_path: Path
) -> None:
    b = broker_factory(env=NO_MIRROR)
    create_topic(b.url, "orders", queues=4)
    produce(b.url, "orders", 400)
    maxes = wait_visible(b.url, "orders", 400)
    sink = BatchCollector()
    df = _reader(spark, b.url, "orders", startingOffsets="earliest", maxOffsetsPerTrigger=150)
    _run_available_now(df, sink, checkpoint(tmp_path, "limited"))

    sizes = [len(sink.batches[i]) for i in sorted(sink.batches)]
    assert sum(sizes) == 400 and len([s for s in sizes if s]) >= 3 and max(sizes) <= 150
    rows = sink.rows()
    assert_exactly_once_in_order(rows, spans(None, maxes))
    assert sorted(r[3] for r in rows) == sorted(f"orders-{i}".encode() for i in range(400))


def test_stop_mid_stream_then_restart_is_exactly_once_and_group_resumes(
    spark: Any, broker_factory: Any, tmp_path: Path
) -> None:
    b = broker_factory(env=NO_MIRROR)
    create_topic(b.url, "orders", queues=4)
    produce(b.url, "orders", 400)
    wait_visible(b.url, "orders", 400)
    sink, ckpt = BatchCollector(), checkpoint(tmp_path, "restart")
    df = _reader(spark, b.url, "orders", startingOffsets="earliest", maxOffsetsPerTrigger=40,
                 group="spark-g")
    q = (df.writeStream.foreachBatch(sink).option("checkpointLocation", ckpt)
         .trigger(processingTime="200 milliseconds").start())
    wait_until(lambda: len(sink.batches) >= 2, 120, "two micro-batches")
    q.stop()
    assert 0 < len(sink.rows()) < 400  # stopped mid-stream

    produce(b.url, "orders", 200, start=400)
    maxes = wait_visible(b.url, "orders", 600)
    df = _reader(spark, b.url, "orders", maxOffsetsPerTrigger=250, group="spark-g")
    _run_available_now(df, sink, ckpt)
    assert_exactly_once_in_order(sink.rows(), spans(None, maxes))

    # The source reported the consumed offsets to the group ...
    def group_done() -> bool:
        got = httpx.get(f"{b.url}/v1/groups/spark-g/offsets", params={"topic": "orders"}).json()
        return {int(k): v for k, v in got["offsets"].items()} == maxes

    wait_until(group_done, 10, "group offsets == queue max offsets")
    # ... so a new query (fresh checkpoint) with startingOffsets=group reads only what is new.
    produce(b.url, "orders", 40, start=600)
    new_maxes = wait_visible(b.url, "orders", 640)
    fresh = BatchCollector()
    df = _reader(spark, b.url, "orders", startingOffsets="group", group="spark-g")
    _run_available_now(df, fresh, checkpoint(tmp_path, "from-group"))
    assert_exactly_once_in_order(fresh.rows(), spans(maxes, new_maxes))


def test_fail_on_data_loss_both_ways_after_retention(
    spark: Any, broker_factory: Any, tmp_path: Path
) -> None:
    env = {**NO_MIRROR, "SPARKMQ_STORE__COMMITLOG_SEGMENT_BYTES": "65536"}
    b = broker_factory(env=env)
    create_topic(b.url, "logs", queues=2)
    produce(b.url, "logs", 40, queues=2, size=100)
    wait_visible(b.url, "logs", 40)
    ckpt = checkpoint(tmp_path, "loss")
    first = BatchCollector()
    _run_available_now(_reader(spark, b.url, "logs", startingOffsets="earliest"), first, ckpt)
    assert len(first.rows()) == 40

    produce(b.url, "logs", 2000, start=40, queues=2, size=100)
    maxes = wait_visible(b.url, "logs", 2040)
    r = httpx.post(f"{b.url}/v1/admin/retention", json={"force": True}, timeout=30)
    assert r.status_code == 200 and r.json()["deleted_segments"] > 0, r.text
    mins = {int(x["queue_id"]): int(x["min_offset"])
            for x in httpx.get(f"{b.url}/v1/topics/logs/queues").json()}
    assert all(m > 20 for m in mins.values())  # offsets 20.. of each queue are gone

    with pytest.raises(Exception) as failed:
        _run_available_now(_reader(spark, b.url, "logs"), BatchCollector(), ckpt)
    text = str(failed.value)
    assert "no longer on the broker" in text and "failOnDataLoss" in text and "logs/0" in text

    rest = BatchCollector()
    _run_available_now(_reader(spark, b.url, "logs", failOnDataLoss="false"), rest, ckpt)
    assert_exactly_once_in_order(rest.rows(), spans(mins, maxes))
