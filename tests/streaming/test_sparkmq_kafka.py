"""Code from Spark's Kafka integration guide, with only format and connection options changed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import streaming

from .support import NO_MIRROR, checkpoint, create_topic, produce, wait_until, wait_visible

pytestmark = pytest.mark.spark


def _rows(df: Any) -> list[tuple[str, int, int]]:
    return sorted((r.topic, r.partition, r.offset) for r in df.select("topic", "partition",
                                                                       "offset").collect())


def test_kafka_guide_examples_read_and_write_with_only_format_and_connection_changed(
    spark: Any, broker_factory: Any, tmp_path: Path
) -> None:
    b = broker_factory(env=NO_MIRROR)
    streaming.register(spark)
    create_topic(b.url, "topic1", queues=2)
    create_topic(b.url, "topic2", queues=1)
    produce(b.url, "topic1", 120, queues=2)
    produce(b.url, "topic2", 10, queues=1)
    wait_visible(b.url, "topic1", 120)
    wait_visible(b.url, "topic2", 10)

    # "Subscribe to multiple topics, specifying explicit Kafka offsets"
    df = spark \
        .read \
        .format("sparkmq") \
        .option("endpoint", b.url) \
        .option("subscribe", "topic1,topic2") \
        .option("startingOffsets", """{"topic1":{"0":23,"1":-2},"topic2":{"0":-2}}""") \
        .option("endingOffsets", """{"topic1":{"0":50,"1":-1},"topic2":{"0":-1}}""") \
        .load()
    assert df.columns == ["key", "value", "topic", "partition", "offset", "timestamp",
                          "timestampType"]
    assert _rows(df) == ([("topic1", 0, o) for o in range(23, 50)]
                         + [("topic1", 1, o) for o in range(60)]
                         + [("topic2", 0, o) for o in range(10)])
    got = df.selectExpr("CAST(key AS STRING)", "CAST(value AS STRING)").collect()
    assert ("k23", "topic2-3") not in got and ("k3", "topic2-3") in [tuple(r) for r in got]

    # "Subscribe to a pattern, at the earliest and latest offsets"; one queue over 4 tasks
    df = spark \
        .read \
        .format("sparkmq") \
        .option("endpoint", b.url) \
        .option("subscribePattern", "topic.*") \
        .option("startingOffsets", "earliest") \
        .option("endingOffsets", "latest") \
        .option("minPartitions", "6") \
        .load()
    assert df.rdd.getNumPartitions() >= 6 and len(_rows(df)) == 130 == len(set(_rows(df)))

    # "Subscribe to 1 topic, with headers" -> "Write ... to a specific topic specified in an option"
    create_topic(b.url, "copy", queues=2)
    df = spark \
        .readStream \
        .format("sparkmq") \
        .option("endpoint", b.url) \
        .option("subscribe", "topic1") \
        .option("includeHeaders", "true") \
        .option("startingOffsets", "earliest") \
        .load()
    ds = df \
        .selectExpr("CAST(key AS STRING)", "CAST(value AS STRING)", "headers") \
        .writeStream \
        .format("sparkmq") \
        .option("endpoint", b.url) \
        .option("topic", "copy") \
        .option("checkpointLocation", checkpoint(tmp_path, "copy")) \
        .trigger(availableNow=True) \
        .start()
    ds.awaitTermination(180)
    assert ds.exception() is None
    assert streaming.lag(ds.lastProgress) == {"topic1/0": 0, "topic1/1": 0}
    wait_visible(b.url, "copy", 120)
    copied = (spark.read.format("sparkmq").option("endpoint", b.url).option("subscribe", "copy")
              .option("includeHeaders", "true").load()
              .selectExpr("CAST(key AS STRING) AS k", "CAST(value AS STRING) AS v",
                          "filter(headers, h -> h.key = 'i')[0].value AS i").collect())
    assert sorted((r.k, r.v, bytes(r.i)) for r in copied) == sorted(
        (f"k{i}", f"topic1-{i}", str(i).encode()) for i in range(120))

    # "Write ... to Kafka using a topic specified in the data" (batch). PySpark refuses the
    # default save mode (ErrorIfExists) for every Python data source: add .mode("append").
    create_topic(b.url, "copy2", queues=1)
    spark.read.format("sparkmq").option("endpoint", b.url).option("subscribe", "topic2").load() \
        .selectExpr("'copy2' AS topic", "CAST(key AS STRING)", "CAST(value AS STRING)") \
        .write \
        .format("sparkmq") \
        .option("endpoint", b.url) \
        .mode("append") \
        .save()
    assert wait_visible(b.url, "copy2", 10) == {0: 10}


def test_complete_mode_rewrites_the_result_and_update_mode_fails_clearly(
    spark: Any, broker_factory: Any, tmp_path: Path
) -> None:
    b = broker_factory(env=NO_MIRROR)
    streaming.register(spark)
    create_topic(b.url, "clicks", queues=2)
    create_topic(b.url, "counts", queues=1)
    produce(b.url, "clicks", 30, queues=2)
    wait_visible(b.url, "clicks", 30)
    counts = (spark.readStream.format("sparkmq").option("endpoint", b.url)
              .option("subscribe", "clicks").option("startingOffsets", "earliest").load()
              .groupBy("partition").count()
              .selectExpr("CAST(partition AS STRING) AS key", "CAST(count AS STRING) AS value"))
    q = (counts.writeStream.format("sparkmq").outputMode("complete").option("endpoint", b.url)
         .option("topic", "counts").option("checkpointLocation", checkpoint(tmp_path, "counts"))
         .trigger(availableNow=True).start())
    q.awaitTermination(180)
    assert q.exception() is None
    got = (spark.read.format("sparkmq").option("endpoint", b.url).option("subscribe", "counts")
           .load().selectExpr("CAST(key AS STRING)", "CAST(value AS STRING)").collect())
    assert sorted(tuple(r) for r in got) == [("0", "15"), ("1", "15")]

    with pytest.raises(Exception, match="(?i)update"):
        (counts.writeStream.format("sparkmq").outputMode("update").option("endpoint", b.url)
         .option("topic", "counts").option("checkpointLocation", checkpoint(tmp_path, "upd"))
         .start().awaitTermination(60))


def test_a_latest_query_that_dies_in_its_first_batch_replays_exactly_that_range(
    spark: Any, broker_factory: Any, tmp_path: Path
) -> None:
    """Spark plans batch 0 at the first trigger, so its start (resolved from 'latest') is
    in the offset log from then on; the reader-level test replays a batch 0 holding data."""
    b = broker_factory(env=NO_MIRROR)
    streaming.register(spark)
    create_topic(b.url, "t", queues=2)
    produce(b.url, "t", 20, queues=2)  # before the query: 'latest' skips these
    wait_visible(b.url, "t", 20)
    ckpt = checkpoint(tmp_path, "first-batch")
    seen: dict[int, list[tuple[int, int]]] = {}

    def failing(df: Any, batch_id: int) -> None:
        seen[batch_id] = sorted((r.partition, r.offset) for r in df.collect())
        if seen[batch_id]:
            raise RuntimeError("the sink dies in the first batch with data")

    def reader() -> Any:
        return (spark.readStream.format("sparkmq").option("endpoint", b.url)
                .option("subscribe", "t").option("startingOffsets", "latest")
                .option("minOffsetsPerTrigger", "12").option("maxTriggerDelay", "10m").load())

    q = (reader().writeStream.foreachBatch(failing).option("checkpointLocation", ckpt)
         .trigger(processingTime="200 milliseconds").start())
    wait_until(lambda: 0 in seen or q.exception() is not None, 120, "batch 0 (the start taken)")
    produce(b.url, "t", 12, start=20, queues=2)
    with pytest.raises(Exception, match="dies in the first batch"):
        q.awaitTermination(120)
    first = [(qid, o) for qid in (0, 1) for o in range(10, 16)]
    assert seen == {0: [], 1: first}  # minOffsetsPerTrigger held batch 1 until 12 arrived

    produce(b.url, "t", 12, start=32, queues=2)
    wait_visible(b.url, "t", 44)
    again: dict[int, list[tuple[int, int]]] = {}

    def collect(df: Any, batch_id: int) -> None:
        again[batch_id] = sorted((r.partition, r.offset) for r in df.collect())

    q = (reader().writeStream.foreachBatch(collect).option("checkpointLocation", ckpt)
         .trigger(availableNow=True).start())
    q.awaitTermination(180)
    assert q.exception() is None
    assert again[1] == first  # the replay reads what was planned, though 'latest' moved on
    assert again[2] == [(qid, o) for qid in (0, 1) for o in range(16, 22)]
    assert streaming.lag(q.lastProgress) == {"t/0": 0, "t/1": 0}


def test_option_typos_fail_naming_the_option_and_the_valid_ones(
    spark: Any, broker_factory: Any
) -> None:
    b = broker_factory(env=NO_MIRROR)
    streaming.register(spark)
    create_topic(b.url, "t", queues=1)
    with pytest.raises(Exception, match="unknown reader option 'startingoffset'.*did you mean "
                                        "'startingOffsets'.*Valid reader options: .*assign"):
        (spark.read.format("sparkmq").option("endpoint", b.url).option("subscribe", "t")
         .option("startingOffset", "earliest").load().collect())
    with pytest.raises(Exception, match="unknown writer option 'sinkid2'"):
        (spark.createDataFrame([("v",)], "value string").write.format("sparkmq")
         .option("endpoint", b.url).option("topic", "t").option("sinkId2", "x")
         .mode("append").save())


def test_more_kafka_guide_examples_pattern_assign_and_kafka_rows_into_the_sink(
    spark: Any, broker_factory: Any, tmp_path: Path
) -> None:
    b = broker_factory(env=NO_MIRROR)
    streaming.register(spark)
    for name, queues in (("topic1", 2), ("topic2", 1), ("out-topic1", 2), ("out-topic2", 1),
                         ("kafka-rows", 3)):
        create_topic(b.url, name, queues=queues)
    produce(b.url, "topic1", 40, queues=2)
    produce(b.url, "topic2", 6, queues=1)
    wait_visible(b.url, "topic1", 40)
    wait_visible(b.url, "topic2", 6)

    # "Subscribe to multiple topics" -> "Write ... using a topic specified in the data"
    df = spark \
        .readStream \
        .format("sparkmq") \
        .option("endpoint", b.url) \
        .option("subscribe", "topic1,topic2") \
        .option("startingOffsets", "earliest") \
        .load()
    ds = df \
        .selectExpr("concat('out-', topic) AS topic", "CAST(key AS STRING)", "CAST(value AS STRING)") \
        .writeStream \
        .format("sparkmq") \
        .option("endpoint", b.url) \
        .option("checkpointLocation", checkpoint(tmp_path, "by-data")) \
        .trigger(availableNow=True) \
        .start()
    ds.awaitTermination(180)
    assert ds.exception() is None
    assert sum(wait_visible(b.url, "out-topic1", 40).values()) == 40  # queues by key hash
    assert wait_visible(b.url, "out-topic2", 6) == {0: 6}

    # "Subscribe to a pattern" (Kafka's partial match: 'out-topic1' contains 'topic1')
    q = spark \
        .readStream \
        .format("sparkmq") \
        .option("endpoint", b.url) \
        .option("subscribePattern", "topic1") \
        .option("startingOffsets", "earliest") \
        .load() \
        .selectExpr("topic", "CAST(key AS STRING)", "CAST(value AS STRING)") \
        .writeStream.format("memory").queryName("pattern_rows") \
        .option("checkpointLocation", checkpoint(tmp_path, "pattern")) \
        .trigger(availableNow=True).start()
    q.awaitTermination(180)
    assert q.exception() is None
    got = spark.sql("SELECT topic, key, value FROM pattern_rows").collect()
    assert sorted({r.topic for r in got}) == ["out-topic1", "topic1"] and len(got) == 80
    assert ("topic1", "k7", "topic1-7") in [tuple(r) for r in got]

    # "assign": only the named queues, in a stream and in a batch read
    def assigned(reader: Any) -> list[tuple[str, int]]:
        frame = reader.format("sparkmq").option("endpoint", b.url) \
            .option("assign", """{"topic1":[1],"topic2":[0]}""").load()
        return sorted({(r.topic, r.partition) for r in frame.select("topic", "partition").collect()})

    assert assigned(spark.read) == [("topic1", 1), ("topic2", 0)]

    # Kafka-shaped rows into the sink: binary key, partition and headers are honoured
    spark.createDataFrame(
        [(b"k0", b"v0", 2, [("h", b"x")]), (None, b"v1", 0, None), (b"k2", b"v2", None, [])],
        "key binary, value binary, partition int, headers array<struct<key:string,value:binary>>",
    ).write.format("sparkmq").option("endpoint", b.url).option("topic", "kafka-rows") \
        .mode("append").save()
    wait_visible(b.url, "kafka-rows", 3)
    back = spark.read.format("sparkmq").option("endpoint", b.url).option("subscribe", "kafka-rows") \
        .option("includeHeaders", "true").load() \
        .selectExpr("CAST(key AS STRING) AS k", "CAST(value AS STRING) AS v", "partition",
                    "filter(headers, h -> h.key = 'h') AS h").collect()
    rows = {r.v: r for r in back}
    assert (rows["v0"].k, rows["v0"].partition, [bytes(h.value) for h in rows["v0"].h]) == (
        "k0", 2, [b"x"])
    assert (rows["v1"].k, rows["v1"].partition) == (None, 0) and rows["v2"].k == "k2"
