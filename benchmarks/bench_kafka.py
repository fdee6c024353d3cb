"""sparkmq next to the peer Spark users would pick instead: a real Apache Kafka broker (issue 17, issue 14).

    python -m benchmarks.bench_kafka [--rows 1000000] [--sink-rows 200000] [--rounds 3] [--json-out PATH]

Opt-in (``sparkmq bench --only kafka``): it needs Java and Maven.  Set-up
fetches Kafka's jars with Maven (once, into ``~/.cache/sparkmq-bench``),
installs confluent-kafka with pip if it is missing and lets Spark resolve
``spark-sql-kafka-0-10`` through Ivy (its own Ivy directory there).  Then, in
one run on one machine, it starts a sparkmq broker and a single-node KRaft
Kafka broker on 127.0.0.1 and measures:

1. produce: ``--rows`` x 100 B, one Python client each: confluent-kafka
   (librdkafka defaults, explicit partition) vs sparkmq's Arrow IPC produce
   over HTTP (10,000 rows per request) and sparkmq's asynchronous ``Producer``
   (``send(..., queue_id=i % 4)`` then ``flush``; linger 5 ms), all counted
   until acknowledged;
2. read: Spark's Kafka source vs ``format("sparkmq")``, 4 partitions vs 4
   queues, local[2], Trigger.AvailableNow into ``noop``, in one SparkSession
   (one JVM), ``--rounds`` rounds in alternating order (``--first`` names the
   source that opens round 1); round 1 is "cold" (the JVM's first query of
   that source, after one small Parquet file-source query has warmed Spark's
   streaming engine for both), the best later round is "warm";
3. sink: the same in-memory rows (``value``, ``partition``) written by
   Spark's Kafka sink (at least once) vs ``writeStream.format("sparkmq")``
   (exactly once), rounds and order as for the read.  The rows come from a
   Python data source, so one query of it into ``noop`` first starts the
   Python workers both sinks need for their input: round 1 ("cold") is then
   each sink's own first query, whichever goes first.

Both brokers are stopped in ``finally``.  Ratios are sparkmq / Kafka.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from benchmarks import kafka_peer
from benchmarks.bench_producer import producer_rate
from benchmarks.bench_spark import (
    QUEUES,
    VALUE,
    ToySource,
    _available_now,
    produce_bulk,
    start_broker,
)
from benchmarks.kafka_peer import KafkaBroker, KafkaPeerError
from benchmarks.results import Measure, Recorder, Target

TOPIC = "bench"
KAFKA = "Kafka 4.1.1"
Runner = Callable[[int], tuple[float, float, int]]  # round -> (wall s, s in addBatch, rows)


# -- produce ---------------------------------------------------------------------------

def kafka_produce(bootstrap: str, topic: str, rows: int, timeout_s: float = 600) -> float:
    """``rows`` x 100 B with confluent-kafka, round robin over the 4 partitions, until all are acked; msg/s."""
    from confluent_kafka import KafkaError, Producer

    errors: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, _msg: Any) -> None:
        if err is not None:
            errors.append(err)

    producer = Producer({"bootstrap.servers": bootstrap, "log_level": 3})
    body, deadline = b"v" * VALUE, time.monotonic() + timeout_s
    started = time.perf_counter()
    for i in range(rows):
        while True:
            try:
                producer.produce(topic, body, partition=i % QUEUES, on_delivery=on_delivery)
                break
            except BufferError:  # librdkafka's local queue is full: serve delivery reports, retry
                producer.poll(0.01)
                if time.monotonic() > deadline:
                    raise KafkaPeerError(f"Kafka produce did not finish within {timeout_s:.0f} s") from None
    left = producer.flush(timeout_s)
    elapsed = time.perf_counter() - started
    if left or errors:
        raise KafkaPeerError(f"Kafka produce: {left} messages unsent, {len(errors)} failed, first: "
                             f"{errors[:1]}")
    return rows / elapsed


def bench_produce(rec: Recorder, kafka: KafkaBroker, url: str, rows: int) -> None:
    warm = max(1_000, rows // 10)
    rec.phase(f"produce warm-up, {warm:,} messages into each broker")
    kafka.create_topic("warm", QUEUES)
    kafka_produce(kafka.bootstrap, "warm", warm)
    produce_bulk(url, "warm", warm)
    producer_rate(url, "warm", warm)
    rec.phase(f"produce {rows:,} x {VALUE} B into Kafka (confluent-kafka)")
    kafka.create_topic(TOPIC, QUEUES)
    k_rate = kafka_produce(kafka.bootstrap, TOPIC, rows)
    rec.phase(f"produce {rows:,} x {VALUE} B into sparkmq (Arrow IPC over HTTP)")
    m_rate = produce_bulk(url, TOPIC, rows)
    rec.phase(f"produce {rows:,} x {VALUE} B into sparkmq (Producer)")
    httpx.post(f"{url}/v1/topics", json={"name": "producer", "queues": QUEUES}, timeout=30).raise_for_status()
    p_rate = producer_rate(url, "producer", rows)
    load = "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"produce confluent-kafka      : {k_rate:>10,.0f} msg/s\n"
          f"produce sparkmq Arrow batches: {m_rate:>10,.0f} msg/s; sparkmq / Kafka = {m_rate / k_rate:.2f}x\n"
          f"produce sparkmq Producer     : {p_rate:>10,.0f} msg/s; sparkmq / Kafka = {p_rate / k_rate:.2f}x ({load})")
    rec.add(Measure("kafka.produce", f"produce {rows:,} x 100 B over 4 queues, one Python client, Arrow IPC "
                    "(10k rows per request) until acknowledged", m_rate, "msg/s",
                    peer=f"{KAFKA}, confluent-kafka producer", peer_value=k_rate))
    rec.add(Measure("kafka.producer", f"produce {rows:,} x 100 B over 4 queues from one Python process, "
                    "Producer.send (linger 5 ms) until acknowledged", p_rate, "msg/s",
                    peer=f"{KAFKA}, confluent-kafka producer", peer_value=k_rate,
                    targets=(Target(">=", 1.0, "ratio"),), details={"load": load}))
    if kafka.end_offsets(TOPIC, QUEUES) != rows:
        raise KafkaPeerError(f"Kafka holds {kafka.end_offsets(TOPIC, QUEUES):,} records, expected {rows:,}")


# -- rounds: alternate the order, first round cold, best later round warm ---------------------------

def alternate(rec: Recorder, what: str, rounds: int, runners: dict[str, Runner],
              expect: int) -> dict[str, list[float]]:
    """Run each runner ``rounds`` times, the order reversed every round; rows/s per name and round.

    Also ``<name>_in_batches``: rows/s over the time Spark spent in addBatch (no query start and stop).
    """
    rates: dict[str, list[float]] = {key: [] for n in runners for key in (n, f"{n}_in_batches")}
    names = list(runners)
    for r in range(rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            rec.phase(f"{what}: round {r + 1}/{rounds}, {name}")
            wall, busy, rows = runners[name](r)
            if rows != expect:
                raise RuntimeError(f"{what} with {name} handled {rows:,} rows, expected {expect:,}")
            rates[name].append(rows / wall)
            rates[f"{name}_in_batches"].append(rows / max(busy, 1e-9))
            print(f"{what:<5} round {r + 1} {name:<8}: {rows:>9,} rows; wall {wall:6.2f} s = "
                  f"{rows / wall:>10,.0f} rows/s; in batches {busy:6.2f} s = {rows / max(busy, 1e-9):>10,.0f} rows/s")
    return rates


def add_cold_warm(rec: Recorder, key: str, what: str, peer: str, rates: dict[str, list[float]],
                  order: list[str]) -> None:
    """One measure for round 1 (cold) and one for the best later round (warm), sparkmq next to Kafka."""
    mq, kf = rates["sparkmq"], rates["kafka"]
    details = {"rows_s": rates, "round_1_order": order}
    rec.add(Measure(f"{key}_cold", f"{what}, cold (each source's first query in the JVM, {order[0]} first)", mq[0], "rows/s",
                    peer=peer, peer_value=kf[0], details=details))
    if len(mq) > 1:
        rec.add(Measure(f"{key}_warm", f"{what}, warm (best of rounds 2-{len(mq)})", max(mq[1:]), "rows/s",
                        peer=peer, peer_value=max(kf[1:]), details=details))
    print(f"{key}: sparkmq / Kafka cold {mq[0] / kf[0]:.2f}x"
          + (f", warm {max(mq[1:]) / max(kf[1:]):.2f}x" if len(mq) > 1 else ""))


# -- read and sink in one SparkSession --------------------------------------------------

def warm_engine(rec: Recorder, spark: Any, tmp: Path) -> None:
    """One small AvailableNow query over Parquet files, neither source's code: the JVM's very first
    streaming query (planning, codegen, the noop sink) then costs neither Kafka's nor sparkmq's round 1."""
    rec.phase("warming Spark's streaming engine with a Parquet file-source query")
    path = str(tmp / "warm-files")
    spark.range(10_000).selectExpr("id", "cast(id as string) AS s").write.parquet(path)
    df = spark.readStream.schema("id long, s string").parquet(path)
    wall, _busy, rows = _available_now(df, tmp, "warm-engine")
    print(f"warm  Parquet file source     : {rows:>9,} rows; wall {wall:6.2f} s")


def bench_read(rec: Recorder, spark: Any, kafka: KafkaBroker, url: str, rows: int, rounds: int,
               tmp: Path, first: str) -> None:
    def kafka_run(r: int) -> tuple[float, float, int]:
        df = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", kafka.bootstrap)
              .option("subscribe", TOPIC).option("startingOffsets", "earliest").load())
        return _available_now(df, tmp, f"read-kafka-{r}")

    def sparkmq_run(r: int) -> tuple[float, float, int]:
        df = (spark.readStream.format("sparkmq").option("endpoint", url).option("subscribe", TOPIC)
              .option("startingOffsets", "earliest").load())
        return _available_now(df, tmp, f"read-sparkmq-{r}")

    runners = _ordered({"kafka": kafka_run, "sparkmq": sparkmq_run}, first)
    rates = alternate(rec, "read", rounds, runners, rows)
    add_cold_warm(rec, "kafka.read", f"Spark readStream AvailableNow → noop, {rows:,} rows of 100 B, "
                  "4 queues vs 4 partitions, local[2]", f"Spark's Kafka source, {KAFKA}", rates, list(runners))


def _ordered(runners: dict[str, Runner], first: str) -> dict[str, Runner]:
    return {first: runners[first]} | {k: v for k, v in runners.items() if k != first}


def bench_sink(rec: Recorder, spark: Any, kafka: KafkaBroker, url: str, rows: int, rounds: int,
               tmp: Path, first: str) -> None:
    kafka.create_topic("sinkout", QUEUES)
    httpx.post(f"{url}/v1/topics", json={"name": "sinkout", "queues": QUEUES}, timeout=30).raise_for_status()

    def source() -> Any:
        return spark.readStream.format("toyarrow").option("rows", str(rows)).load().selectExpr("value", "partition")

    def timed(writer: Any, name: str) -> tuple[float, float, int]:
        started = time.perf_counter()
        q = writer.option("checkpointLocation", str(tmp / name)).trigger(availableNow=True).start()
        q.awaitTermination()
        busy = sum(p["durationMs"].get("addBatch", 0) for p in q.recentProgress) / 1000
        return time.perf_counter() - started, busy, sum(p["numInputRows"] for p in q.recentProgress)

    def kafka_run(r: int) -> tuple[float, float, int]:
        return timed(source().writeStream.format("kafka").option("kafka.bootstrap.servers", kafka.bootstrap)
                     .option("topic", "sinkout"), f"sink-kafka-{r}")

    def sparkmq_run(r: int) -> tuple[float, float, int]:
        return timed(source().writeStream.format("sparkmq").option("endpoint", url).option("topic", "sinkout")
                     .option("sinkId", f"bench-{r}"), f"sink-sparkmq-{r}")

    rec.phase("warming the rows' source (a Python data source) with a noop-sink query")
    wall, _busy, warmed = _available_now(source(), tmp, "sink-source-warm")
    print(f"warm  toyarrow source -> noop : {warmed:>9,} rows; wall {wall:6.2f} s")
    runners = _ordered({"kafka": kafka_run, "sparkmq": sparkmq_run}, first)
    rates = alternate(rec, "sink", rounds, runners, rows)
    stored_k = kafka.end_offsets("sinkout", QUEUES)
    stored_m = sum(q["max_offset"] for q in httpx.get(f"{url}/v1/topics/sinkout/queues", timeout=30).json())
    if stored_k != rows * rounds or stored_m != rows * rounds:
        raise RuntimeError(f"sink: Kafka holds {stored_k:,} and sparkmq {stored_m:,} rows, "
                           f"expected {rows * rounds:,} each")
    add_cold_warm(rec, "kafka.sink", f"Spark writeStream, {rows:,} rows of 100 B (value, partition), "
                  "sparkmq exactly once", f"Spark's Kafka sink (at least once), {KAFKA}", rates, list(runners))


def spark_session(ivy: Path) -> Any:
    from pyspark.sql import SparkSession

    return (SparkSession.builder.master("local[2]").appName("bench-kafka")
            .config("spark.jars.packages", kafka_peer.SPARK_KAFKA_PACKAGE)
            .config("spark.jars.ivy", str(ivy))  # not ~/.m2: see kafka_peer's docstring
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.driver.host", "127.0.0.1").getOrCreate())


def run_spark(rec: Recorder, args: argparse.Namespace, kafka: KafkaBroker, url: str, tmp: Path) -> None:
    import streaming

    rec.phase(f"starting Spark (local[2]) with {kafka_peer.SPARK_KAFKA_PACKAGE} (Ivy)")
    spark = spark_session(kafka_peer.cache_dir() / "ivy")
    try:
        spark.sparkContext.setLogLevel("ERROR")
        streaming.register(spark)
        spark.dataSource.register(ToySource)
        warm_engine(rec, spark, tmp)
        if "read" in args.phases:
            bench_read(rec, spark, kafka, url, args.rows, args.rounds, tmp, args.first)
        if "sink" in args.phases:
            bench_sink(rec, spark, kafka, url, args.sink_rows, args.rounds, tmp, args.first)
    finally:
        spark.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000, help="rows produced and read (100 B each)")
    ap.add_argument("--sink-rows", type=int, default=200_000, help="rows written by each sink per round")
    ap.add_argument("--rounds", type=int, default=3, help="read and sink rounds per source (order alternates)")
    ap.add_argument("--first", choices=("kafka", "sparkmq"), default="kafka",
                    help="the source (and sink) that runs first in round 1")
    ap.add_argument("--phases", default="produce,read,sink", help="comma list of produce, read, sink")
    ap.add_argument("--json-out", default=None, help="also write the results as JSON (for sparkmq bench)")
    args = ap.parse_args()
    args.phases = {p.strip() for p in args.phases.split(",") if p.strip()}
    os.environ["PYSPARK_PYTHON"] = sys.executable
    rec = Recorder("kafka", args.json_out, {"rows": args.rows, "sink_rows": args.sink_rows, "rounds": args.rounds,
                                            "first": args.first})
    rec.phase(f"set-up: Kafka {kafka_peer.KAFKA_VERSION} jars (Maven), confluent-kafka (pip)")
    libs = kafka_peer.ensure_kafka_jars(kafka_peer.cache_dir())
    kafka_peer.ensure_confluent_kafka()
    with tempfile.TemporaryDirectory(prefix="bench-kafka-") as d:
        tmp = Path(d)
        rec.phase("starting a sparkmq broker and a Kafka broker (KRaft)")
        proc, url = start_broker(tmp / "sparkmq")
        kafka = KafkaBroker(libs, tmp / "kafka")
        try:
            kafka.start()
            run(rec, args, kafka, url, tmp)
        finally:
            kafka.stop()
            proc.terminate()
            proc.wait(30)
    rec.write()


def run(rec: Recorder, args: argparse.Namespace, kafka: KafkaBroker, url: str, tmp: Path) -> None:
    if "produce" in args.phases or "read" in args.phases:
        bench_produce(rec, kafka, url, args.rows)
    if args.phases & {"read", "sink"}:
        run_spark(rec, args, kafka, url, tmp)


if __name__ == "__main__":
    main()
