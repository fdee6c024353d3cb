"""Spark's own ``format("kafka")`` (spark-sql-kafka-0-10 4.2.0, kafka-clients 3.9.2) against the listener."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pytest

from tests.kafka.conftest import KafkaBroker, body_of, create_topic, http_messages

pytestmark = pytest.mark.spark


def _seed(kafka: KafkaBroker, topic: str, n: int) -> list[int]:
    create_topic(kafka.url, topic, 2)
    msgs = [{"body": f"v{i}", "keys": [f"k{i}"], "properties": {"i": str(i)}, "queue_id": i % 2} for i in range(n)]
    r = httpx.post(f"{kafka.url}/v1/topics/{topic}/messages", json={"messages": msgs}, timeout=10)
    assert r.status_code == 200, r.text
    return [int(x["queue_offset"]) for x in r.json()["results"]]


def _read(spark: Any, kafka: KafkaBroker, topic: str, **options: str) -> list[Any]:
    reader = spark.read.format("kafka").option("kafka.bootstrap.servers", kafka.bootstrap) \
        .option("subscribe", topic).option("includeHeaders", "true")
    for k, v in options.items():
        reader = reader.option(k, v)
    return sorted(reader.load().collect(), key=lambda r: (r.partition, r.offset))


def test_spark_kafka_batch_read_sees_the_brokers_messages(spark: Any, kafka: KafkaBroker) -> None:
    offsets = _seed(kafka, "sp", 10)
    rows = _read(spark, kafka, "sp")
    assert [(r.partition, r.offset, bytes(r.key), bytes(r.value)) for r in rows] == sorted(
        (i % 2, offsets[i], f"k{i}".encode(), f"v{i}".encode()) for i in range(10))
    assert all(r.topic == "sp" and r.timestampType == 0 for r in rows)
    assert {h.key: bytes(h.value) for h in rows[0].headers} == {"i": b"0"}
    # startingOffsets as JSON, endingOffsets too
    rows = _read(spark, kafka, "sp", startingOffsets=json.dumps({"sp": {"0": 3, "1": -2}}),
                 endingOffsets=json.dumps({"sp": {"0": 4, "1": -1}}))
    assert [(r.partition, r.offset) for r in rows] == [(0, 3)] + [(1, o) for o in range(5)]


def test_spark_kafka_starting_offsets_by_timestamp(spark: Any, kafka: KafkaBroker) -> None:
    _seed(kafka, "ts", 4)
    time.sleep(0.05)
    middle = int(time.time() * 1000)
    time.sleep(0.05)
    more = [{"body": "late", "queue_id": 0}, {"body": "late", "queue_id": 1}]
    assert httpx.post(f"{kafka.url}/v1/topics/ts/messages", json={"messages": more}, timeout=10).is_success
    rows = _read(spark, kafka, "ts", startingTimestamp=str(middle))
    assert [(r.partition, r.offset, bytes(r.value)) for r in rows] == [(0, 2, b"late"), (1, 2, b"late")]


def test_spark_kafka_sink_writes_with_its_idempotent_producer(spark: Any, kafka: KafkaBroker) -> None:
    create_topic(kafka.url, "sink", 1)
    df = spark.createDataFrame([(f"k{i}".encode(), f"w{i}".encode()) for i in range(50)], "key binary, value binary")
    df.coalesce(1).write.format("kafka").option("kafka.bootstrap.servers", kafka.bootstrap) \
        .option("topic", "sink").save()
    stored = http_messages(kafka.url, "sink", 0)
    assert [body_of(m) for m in stored] == [f"w{i}".encode() for i in range(50)]
    assert [m["keys"] for m in stored] == [[f"k{i}"] for i in range(50)]
    assert [m["offset"] for m in stored] == list(range(50))


def test_spark_kafka_stream_reads_available_now(spark: Any, kafka: KafkaBroker, tmp_path: Any) -> None:
    _seed(kafka, "st", 6)
    q = spark.readStream.format("kafka").option("kafka.bootstrap.servers", kafka.bootstrap) \
        .option("subscribe", "st").option("startingOffsets", "earliest").load() \
        .selectExpr("CAST(value AS STRING) AS v", "partition", "offset") \
        .writeStream.format("memory").queryName("kafka_st").trigger(availableNow=True) \
        .option("checkpointLocation", str(tmp_path / "ckpt")).start()
    q.awaitTermination(120)
    rows = sorted((r.partition, r.offset, r.v) for r in spark.sql("SELECT * FROM kafka_st").collect())
    assert rows == sorted((i % 2, i // 2, f"v{i}") for i in range(6))
