"""sparkmq's Kafka listener next to Kafka 4.1.1, with the same Kafka clients on both (issue 32).

    python -m benchmarks.bench_kafka_wire [--rows 1000000] [--rounds 3] [--json-out PATH]

Opt-in (``sparkmq bench --only kafka``): it needs Java and Maven (Kafka's jars, as
benchmarks/bench_kafka.py fetches them) and pip (confluent-kafka). In one run on one machine it
starts a sparkmq broker with ``--kafka-port`` and a single-node KRaft Kafka broker, both on
127.0.0.1, and measures, the order alternating each round (round 1: ``--first`` first):

1. produce: ``--rows`` x 100 B with confluent-kafka (librdkafka defaults, acks=all, explicit
   partition round robin over 4 partitions) into each, until every message is acknowledged;
2. consume: confluent-kafka ``assign()`` on the 4 partitions from offset 0 until all rows are read;
3. Spark: ``spark.read.format("kafka")`` (spark-sql-kafka-0-10 4.2.0, local[2]) of the whole topic
   into the ``noop`` sink, in one SparkSession; round 1 is cold, the best later round warm.

Ratios are sparkmq / Kafka. Both brokers are stopped in ``finally``.
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from benchmarks import kafka_peer
from benchmarks.bench_kafka import KAFKA, add_cold_warm, kafka_produce, spark_session
from benchmarks.bench_spark import QUEUES, ROOT, VALUE, _free_port
from benchmarks.kafka_peer import KafkaBroker, KafkaPeerError
from benchmarks.results import Measure, Recorder

TOPIC = "wire"


def start_sparkmq(data_dir: Path) -> tuple[subprocess.Popen[bytes], str, str]:
    """A sparkmq broker with its Kafka listener: (process, HTTP URL, Kafka bootstrap)."""
    port, kport = _free_port(), _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARKMQ_")}
    env["SPARKMQ_MIRROR__ENABLED"] = "false"
    proc = subprocess.Popen([sys.executable, "-m", "broker_api", "serve", "--host", "127.0.0.1", "--port", str(port),
                             "--data-dir", str(data_dir), "--kafka-port", str(kport)],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/readyz", timeout=1).status_code == 200:
                return proc, url, f"127.0.0.1:{kport}"
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError("the sparkmq broker did not become ready in 60 s")


def consume_all(bootstrap: str, topic: str, rows: int, timeout_s: float = 600) -> float:
    """Read ``rows`` from the 4 partitions with confluent-kafka assign(); msg/s."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-wire", "enable.auto.commit": False,
                  "log_level": 3})
    c.assign([TopicPartition(topic, p, 0) for p in range(QUEUES)])
    got, deadline = 0, time.monotonic() + timeout_s
    started = time.perf_counter()
    while got < rows and time.monotonic() < deadline:
        got += sum(1 for m in c.consume(10_000, timeout=1.0) if m.error() is None)
    elapsed = time.perf_counter() - started
    c.close()
    if got != rows:
        raise KafkaPeerError(f"consumed {got:,} of {rows:,} rows from {bootstrap}")
    return rows / elapsed


def spark_read(spark: Any, bootstrap: str, topic: str) -> tuple[float, int]:
    """(seconds, rows) for one batch read of the whole topic into the noop sink."""
    started = time.perf_counter()
    df = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
          .option("startingOffsets", "earliest").option("endingOffsets", "latest").load())
    rows = df.selectExpr("count(*) AS n").collect()[0]["n"]
    return time.perf_counter() - started, int(rows)


def alternate(rec: Recorder, what: str, rounds: int, first: str, runs: dict[str, Callable[[int], float]]
              ) -> dict[str, list[float]]:
    rates: dict[str, list[float]] = {name: [] for name in runs}
    names = [first] + [n for n in runs if n != first]
    for r in range(rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            rec.phase(f"{what}: round {r + 1}/{rounds}, {name}")
            rates[name].append(runs[name](r))
            print(f"{what:<8} round {r + 1} {name:<8}: {rates[name][-1]:>10,.0f} per s")
    return rates


def run(rec: Recorder, args: argparse.Namespace, kafka: KafkaBroker, url: str, boot: str) -> None:
    rows = args.rows
    for r in range(args.rounds):
        kafka.create_topic(f"{TOPIC}{r}", QUEUES)
        httpx.post(f"{url}/v1/topics", json={"name": f"{TOPIC}{r}", "queues": QUEUES}, timeout=30)
    kafka_produce(kafka.bootstrap, f"{TOPIC}0", 1000)  # connections and JIT warm, not counted
    kafka_produce(boot, f"{TOPIC}0", 1000)
    produce = alternate(rec, "produce", args.rounds, args.first, {
        "kafka": lambda r: kafka_produce(kafka.bootstrap, f"{TOPIC}{r}", rows),
        "sparkmq": lambda r: kafka_produce(boot, f"{TOPIC}{r}", rows)})
    _add(rec, "kafka_wire.produce", f"confluent-kafka produce {rows:,} x {VALUE} B over 4 partitions until acked",
         produce, "msg/s", "confluent-kafka producer")
    consume = alternate(rec, "consume", args.rounds, args.first, {
        "kafka": lambda r: consume_all(kafka.bootstrap, f"{TOPIC}{r}", rows + (1000 if r == 0 else 0)),
        "sparkmq": lambda r: consume_all(boot, f"{TOPIC}{r}", rows + (1000 if r == 0 else 0))})
    _add(rec, "kafka_wire.consume", f"confluent-kafka assign() consume of {rows:,} x {VALUE} B", consume, "msg/s",
         "confluent-kafka consumer")
    if not args.no_spark:
        spark = spark_session(kafka_peer.cache_dir() / "ivy")
        try:
            spark.sparkContext.setLogLevel("ERROR")
            reads = alternate(rec, "spark", args.rounds, args.first, {
                "kafka": lambda r: _rate(spark_read(spark, kafka.bootstrap, f"{TOPIC}1")),
                "sparkmq": lambda r: _rate(spark_read(spark, boot, f"{TOPIC}1"))})
            what = f"Spark read.format(\"kafka\") of {rows:,} x {VALUE} B into count(*), local[2]"
            add_cold_warm(rec, "kafka_wire.spark_read", what, f"the same source reading {KAFKA}", reads, [args.first])
            _add_paired(rec, "kafka_wire.spark_read_paired", what, reads)
        finally:
            spark.stop()


def _add_paired(rec: Recorder, key: str, what: str, rates: dict[str, list[float]]) -> None:
    """Warm, free of the read order: the geometric means over rounds 2.. (whose order alternates).

    Spark's JVM reads faster with every query of a run, whichever broker it reads, so the best
    later round favours the broker read last; each broker read first in half of the paired
    rounds cancels that."""
    mq, kf = rates["sparkmq"][1:], rates["kafka"][1:]
    if len(mq) < 2 or len(mq) % 2:
        print(f"{key}: needs an odd --rounds of 3 or more (each order once after round 1); skipped")
        return
    mean_m, mean_k = math.prod(mq) ** (1 / len(mq)), math.prod(kf) ** (1 / len(kf))
    print(f"{key}: sparkmq / Kafka warm, rounds 2-{len(mq) + 1} paired = {mean_m / mean_k:.2f}x")
    rec.add(Measure(key, f"{what}, warm (geometric mean of rounds 2-{len(mq) + 1}, each order equally often)",
                    mean_m, "rows/s", peer=f"the same source reading {KAFKA}", peer_value=mean_k,
                    details={"rows_s": rates}))


def _rate(result: tuple[float, int]) -> float:
    return result[1] / result[0]


def _add(rec: Recorder, key: str, what: str, rates: dict[str, list[float]], unit: str, client: str) -> None:
    best_m, best_k = max(rates["sparkmq"]), max(rates["kafka"])
    print(f"{key}: sparkmq {best_m:,.0f} {unit}, Kafka {best_k:,.0f} {unit}; sparkmq / Kafka = {best_m / best_k:.2f}x")
    rec.add(Measure(key, f"{what} (best of {len(rates['kafka'])} rounds, order alternating)", best_m, unit,
                    peer=f"{KAFKA}, {client}", peer_value=best_k, details={"rates": rates}))


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000, help="messages of 100 B per round")
    ap.add_argument("--rounds", type=int, default=3, help="rounds per broker (order alternates)")
    ap.add_argument("--first", choices=("kafka", "sparkmq"), default="kafka", help="who goes first in round 1")
    ap.add_argument("--no-spark", action="store_true", help="skip the Spark read")
    ap.add_argument("--json-out", default=None, help="also write the results as JSON (for sparkmq bench)")
    args = ap.parse_args()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    rec = Recorder("kafka_wire", args.json_out, {"rows": args.rows, "rounds": args.rounds, "first": args.first})
    rec.phase(f"set-up: Kafka {kafka_peer.KAFKA_VERSION} jars (Maven), confluent-kafka (pip)")
    libs = kafka_peer.ensure_kafka_jars(kafka_peer.cache_dir())
    kafka_peer.ensure_confluent_kafka()
    with tempfile.TemporaryDirectory(prefix="bench-kafka-wire-") as d:
        tmp = Path(d)
        rec.phase("starting a sparkmq broker (with --kafka-port) and a Kafka broker (KRaft)")
        proc, url, boot = start_sparkmq(tmp / "sparkmq")
        kafka = KafkaBroker(libs, tmp / "kafka")
        try:
            kafka.start()
            run(rec, args, kafka, url, boot)
        finally:
            kafka.stop()
            proc.terminate()
            proc.wait(30)
    rec.write()


if __name__ == "__main__":
    main()
