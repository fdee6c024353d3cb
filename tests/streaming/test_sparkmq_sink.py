"""writeStream/write into sparkmq: exactly once, even when Spark replays a batch."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import httpx
import pytest

import streaming

from .support import NO_MIRROR, checkpoint, create_topic, produce, queue_max, wait_visible

pytestmark = pytest.mark.spark


def _copy_query(spark: Any, url: str, ckpt: str, sink_id: str) -> Any:
    streaming.register(spark)
    df = (spark.readStream.format("sparkmq").option("endpoint", url).option("subscribe", "in")
          .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "100")
          .option("includeHeaders", "true").load())
    return (df.selectExpr("key", "value", "headers")
            .writeStream.format("sparkmq").option("endpoint", url).option("topic", "out")
            .option("sinkId", sink_id).option("checkpointLocation", ckpt)
            .trigger(availableNow=True).start())


def _values(spark: Any, url: str, topic: str) -> list[bytes]:
    df = (spark.read.format("sparkmq").option("endpoint", url).option("subscribe", topic).load())
    return sorted(bytes(r.value) for r in df.select("value").collect())


def test_sink_writes_exactly_once_when_a_committed_batch_is_replayed(
    spark: Any, broker_factory: Any, tmp_path: Path
) -> None:
    b = broker_factory(env=NO_MIRROR)
    create_topic(b.url, "in")
    create_topic(b.url, "out")
    produce(b.url, "in", 300)
    wait_visible(b.url, "in", 300)
    ckpt = checkpoint(tmp_path, "copy")
    q = _copy_query(spark, b.url, ckpt, "copy-1")
    q.awaitTermination(180)
    assert q.exception() is None
    wait_visible(b.url, "out", 300)
    sink = httpx.get(f"{b.url}/v1/sinks/copy-1").json()
    assert sink["last_batch_id"] == 2  # 300 rows, 100 per trigger

    # Crash between the sink commit and Spark's commit log: Spark replays batch 2.
    commits = Path(ckpt) / "commits"
    for name in ("2", ".2.crc"):
        if (commits / name).exists():
            os.remove(commits / name)
    q = _copy_query(spark, b.url, ckpt, "copy-1")
    q.awaitTermination(180)
    assert q.exception() is None
    assert [p["batchId"] for p in q.recentProgress if p["numInputRows"]] == [2]  # replayed

    assert sum(queue_max(b.url, "out").values()) == 300
    assert _values(spark, b.url, "out") == sorted(f"in-{i}".encode() for i in range(300))

    # Reusing the sinkId with a fresh checkpoint would silently drop batches 0..2; it fails.
    q = _copy_query(spark, b.url, checkpoint(tmp_path, "fresh"), "copy-1")
    with pytest.raises(Exception, match="sinkId 'copy-1' already committed batch 2"):
        q.awaitTermination(180)
    assert sum(queue_max(b.url, "out").values()) == 300


def test_batch_write_then_batch_read_with_tags_and_ending_offsets(
    spark: Any, broker_factory: Any
) -> None:
    b = broker_factory(env=NO_MIRROR)
    streaming.register(spark)
    create_topic(b.url, "t")
    rows = [(f"v{i}".encode(), f"k{i}", "A" if i % 3 == 0 else "B", {"n": str(i)}, i % 4)
            for i in range(120)]
    src = spark.createDataFrame(rows, "value binary, key string, tags string, "
                                "properties map<string,string>, queue_id int")
    src.write.format("sparkmq").option("endpoint", b.url).option("topic", "t").mode("append").save()
    maxes = wait_visible(b.url, "t", 120)
    assert maxes == {0: 30, 1: 30, 2: 30, 3: 30}

    def read(**options: str) -> list[Any]:
        r = (spark.read.format("sparkmq").option("endpoint", b.url).option("subscribe", "t")
             .option("includeSparkmqColumns", "true").option("includeHeaders", "true"))
        for k, v in options.items():
            r = r.option(k, v)
        return r.load().orderBy("partition", "offset").collect()

    everything = read()
    assert sorted(bytes(r.value) for r in everything) == sorted(r[0] for r in rows)
    got = read(tags="A", endingOffsets='{"t": {"0": 10, "1": -1, "2": -1, "3": -1}}')
    # only tag A; queue 0 stops before offset 10, the others read to the end
    want = [r for r in everything if r.tags == "A" and (r.partition != 0 or r.offset < 10)]
    assert got == want and len(want) < 40
    v3 = next(r for r in got if r.value == b"v3")
    assert (v3.topic, v3.partition, v3.queue_id, v3.key, v3.keys) == ("t", 3, 3, b"k3", ["k3"])
    assert v3.tags == "A" and v3.timestampType == 0 and v3.broker is None
    headers = [(h.key, bytes(h.value)) for h in v3.headers]
    assert [h for h in headers if h[0] != "sparkmq.tx_id"] == [
        ("n", b"3"), ("TAGS", b"A"), ("KEYS", b"k3")]
    assert len(headers) == 4  # the sink's transaction id, added by the broker
    assert v3.timestamp is not None and v3.timestamp <= v3.store_timestamp
