"""Spark benchmarks for the sparkmq data source (issue 4).

    python -m benchmarks.bench_spark [--only read|latency|sink] [--rows 1000000] [--read-rounds 1]
        [--sink-rows 200000] [--latency-s 15] [--json-out PATH]

Starts a broker subprocess (127.0.0.1, free port, temp data dir, Delta mirror
off), a local[2] SparkSession, and measures in one run:

1. readStream throughput: Trigger.AvailableNow into the ``noop`` sink, 100-byte
   values over 4 queues, next to a toy in-memory Arrow source with the same
   schema and no broker (the Python data source ceiling on this machine);
2. produce → visible in foreachBatch latency with processingTime 0;
3. sink throughput: writeStream.format("sparkmq") (transactional, exactly-once).
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

import streaming
from benchmarks.results import Measure, Recorder, Target
from streaming.schema import ARROW_SCHEMA, spark_schema

QUEUES = 4
VALUE = 100
ROOT = Path(__file__).resolve().parent.parent


# -- toy in-memory source: same schema, no broker -----------------------------------

class _ToyPartition(InputPartition):
    def __init__(self, queue_id: int, start: int, end: int) -> None:
        self.queue_id, self.start, self.end = queue_id, start, end


def _toy_batch(queue_id: int, start: int, n: int) -> pa.RecordBatch:
    """Kafka's columns (the source's default schema): key, value, topic, partition, ..."""
    ts = pa.array(np.full(n, 1_700_000_000_000_000, dtype="int64"), pa.timestamp("us", tz="UTC"))
    cols = [
        pa.nulls(n, pa.binary()), pa.array([b"x" * VALUE] * n, pa.binary()), pa.array(["toy"] * n),
        pa.array(np.full(n, queue_id, dtype="int32")),
        pa.array(np.arange(start, start + n, dtype="int64")), ts,
        pa.array(np.zeros(n, dtype="int32")),
    ]
    return pa.RecordBatch.from_arrays(cols, schema=ARROW_SCHEMA)


class ToyStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, rows: int) -> None:
        self.per_queue = rows // QUEUES

    def initialOffset(self) -> dict:
        return {str(q): 0 for q in range(QUEUES)}

    def latestOffset(self, start: dict, limit: Any) -> dict:
        return {str(q): self.per_queue for q in range(QUEUES)}

    def prepareForTriggerAvailableNow(self) -> None:
        pass

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        return [_ToyPartition(int(q), start[q], end[q]) for q in end if end[q] > start[q]]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, _ToyPartition)
        page = 10_000
        template = _toy_batch(partition.queue_id, 0, page)
        for lo in range(partition.start, partition.end, page):
            yield template.slice(0, min(page, partition.end - lo))


class ToySource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "toyarrow"

    def schema(self) -> Any:
        return spark_schema()

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return ToyStreamReader(int(self.options.get("rows", "1000000")))


# -- broker and producing ---------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_broker(data_dir: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARKMQ_")}
    env["SPARKMQ_MIRROR__ENABLED"] = "false"
    proc = subprocess.Popen(
        [sys.executable, "-m", "broker_api", "serve", "--host", "127.0.0.1", "--port", str(port),
         "--data-dir", str(data_dir)],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            if httpx.get(url + "/readyz", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError("broker did not become ready")


def produce_bulk(url: str, topic: str, rows: int) -> float:
    """Arrow bulk produce, ``rows`` 100-byte bodies round robin over 4 queues; returns msgs/s."""
    httpx.post(f"{url}/v1/topics", json={"name": topic, "queues": QUEUES}, timeout=30)
    chunk = 10_000
    started = time.perf_counter()
    with httpx.Client(timeout=120) as client:
        for lo in range(0, rows, chunk):
            n = min(chunk, rows - lo)
            table = pa.table({
                "body": pa.array([b"v" * VALUE] * n, pa.binary()),
                "queue_id": pa.array(np.arange(lo, lo + n) % QUEUES, pa.int32()),
            })
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, table.schema) as w:
                w.write_table(table)
            for _attempt in range(50):  # 503 = the broker's fast failure: back off, retry
                r = client.post(f"{url}/v1/topics/{topic}/messages",
                                content=sink.getvalue().to_pybytes(),
                                headers={"Content-Type": "application/vnd.apache.arrow.stream"})
                if r.status_code != 503:
                    break
                time.sleep(0.2)
            r.raise_for_status()
    rate = rows / (time.perf_counter() - started)
    for _ in range(600):
        qs = httpx.get(f"{url}/v1/topics/{topic}/queues").json()
        if sum(q["max_offset"] for q in qs) >= rows:
            break
        time.sleep(0.1)
    return rate


# -- measurements -------------------------------------------------------------------

def _available_now(df: Any, tmp: Path, name: str) -> tuple[float, float, int]:
    """(wall seconds incl. query start, seconds in addBatch, rows)."""
    started = time.perf_counter()
    q = (df.writeStream.format("noop").option("checkpointLocation", str(tmp / name))
         .trigger(availableNow=True).start())
    q.awaitTermination()
    elapsed = time.perf_counter() - started
    busy = sum(p["durationMs"].get("addBatch", 0) for p in q.recentProgress) / 1000
    return elapsed, busy, sum(p["numInputRows"] for p in q.recentProgress)


def _report(label: str, wall: float, busy: float, rows: int) -> tuple[float, float]:
    """Print one query's rates; returns (rows/s on the wall clock, rows/s inside batches)."""
    print(f"read  {label:<28}: {rows:>9,} rows; wall {wall:6.2f} s = {rows / wall:>10,.0f} rows/s;"
          f" in batches {busy:6.2f} s = {rows / busy:>10,.0f} rows/s")
    return rows / wall, rows / busy


def _load() -> str:
    return "load %.2f %.2f %.2f" % os.getloadavg()


def bench_read(rec: Recorder, spark: Any, url: str, rows: int, tmp: Path, rounds: int = 1) -> None:
    """Toy source and sparkmq, ``rounds`` times in turns (sparkmq first every other round, so
    neither always runs on the warmer or quieter box); the ratio is the median of the rounds'."""
    spark.dataSource.register(ToySource)
    toy_df = spark.readStream.format("toyarrow").option("rows", str(rows)).load()
    mq_df = (spark.readStream.format("sparkmq").option("endpoint", url).option("subscribe", "bench")
             .option("startingOffsets", "earliest").load())
    # Warm-up: both sources once, whole, untimed. The JVM's Arrow-to-row path is JIT-compiled over
    # the first million rows or so (a 100k-row warm-up left the toy source faster in every later
    # round), and each Python worker imports the sparkmq package on its first sparkmq task.
    rec.phase("readStream warm-up: both sources once")
    for name, df in (("warm-toy", toy_df), ("warm-mq", mq_df)):
        _report(f"warm-up: {name}", *_available_now(df, tmp, name))
    toy_rates: list[tuple[float, float]] = []
    mq_rates: list[tuple[float, float]] = []
    ratios: list[float] = []
    busy_ratios: list[float] = []
    for k in range(rounds):
        def toy() -> None:
            rec.phase(f"readStream {rows:,} rows from the toy in-memory source ({_load()})")
            toy_rates.append(_report("toy in-memory Arrow source", *_available_now(toy_df, tmp, f"toy{k}")))

        def mq() -> None:
            rec.phase(f"readStream {rows:,} rows from sparkmq ({_load()})")
            mq_rates.append(_report("sparkmq, 4 queues, 100 B", *_available_now(mq_df, tmp, f"mq{k}")))

        for step in ((toy, mq) if k % 2 == 0 else (mq, toy)):
            step()
        ratios.append(mq_rates[-1][0] / toy_rates[-1][0])
        busy_ratios.append(mq_rates[-1][1] / toy_rates[-1][1])
        print(f"read  sparkmq / toy (wall), round {k + 1}: {ratios[-1]:.2f}x; in batches "
              f"{busy_ratios[-1]:.2f}x ({_load()})")
    r_toy, r_mq = statistics.median(r for r, _ in toy_rates), statistics.median(r for r, _ in mq_rates)
    if rounds > 1:
        print(f"read  sparkmq / toy (wall), median of {rounds} rounds: {statistics.median(ratios):.2f}x; "
              f"in batches {statistics.median(busy_ratios):.2f}x")
    rec.add(Measure("spark.read", f"Spark readStream AvailableNow → noop, {rows:,} rows of 100 B, 4 queues, local[2]",
                    r_mq, "rows/s", peer="toy in-memory Arrow source", peer_value=r_toy,
                    targets=(Target(">=", 1_000_000), Target(">=", 0.8, "ratio")),
                    details={"round_ratios": ratios, "round_ratios_in_batches": busy_ratios, "rounds": rounds}))


def bench_pull(rec: Recorder, url: str) -> None:
    """The broker's Arrow pull alone (one client, 10k-message pages), for reference."""
    from streaming.client import BrokerClient
    from streaming.options import ClientConfig

    with BrokerClient(ClientConfig((url,))) as client:
        started, n, offset = time.perf_counter(), 0, 0
        while n < 100_000:
            page = client.pull_arrow("bench", 0, offset, 10_000, None)
            if not page.table.num_rows:
                break
            n, offset = n + page.table.num_rows, page.next_offset
        elapsed = time.perf_counter() - started
    print(f"pull  broker Arrow pull, 1 client  : {n:>9,} msgs in {elapsed:6.2f} s = "
          f"{n / elapsed:>10,.0f} msgs/s ({_load()})")
    rec.add(Measure("spark.pull", "the broker's Arrow pull alone, as the source does it (1 client, 10k pages)",
                    n / elapsed, "msg/s", details={"messages": n}))


def bench_latency(rec: Recorder, spark: Any, url: str, seconds: float, tmp: Path) -> None:
    rec.phase(f"produce -> foreachBatch latency ({seconds:g} s of 5 msg/s)")
    httpx.post(f"{url}/v1/topics", json={"name": "lat", "queues": QUEUES}, timeout=30)
    lags: list[float] = []

    def sink(df: Any, _batch_id: int) -> None:
        now = time.time()
        lags.extend(now - float(bytes(r.value).decode()) for r in df.select("value").collect())

    q = (spark.readStream.format("sparkmq").option("endpoint", url).option("subscribe", "lat")
         .load().writeStream.foreachBatch(sink).option("checkpointLocation", str(tmp / "lat"))
         .trigger(processingTime="0 seconds").start())
    time.sleep(8)  # let the first (empty) batches pass
    stop = time.monotonic() + seconds
    with httpx.Client() as client:
        while time.monotonic() < stop:
            client.post(f"{url}/v1/topics/lat/messages",
                        json={"messages": [{"body": repr(time.time())}]})
            time.sleep(0.2)
    time.sleep(3)
    q.stop()
    lags.sort()
    if not lags:
        raise RuntimeError("latency: no produced message reached foreachBatch")
    p95 = lags[min(len(lags) - 1, int(len(lags) * 0.95))]
    what = "produce → visible in foreachBatch, processingTime 0, 5 msg/s"
    details = {"n": len(lags), "p50_ms": statistics.median(lags) * 1000, "p95_ms": p95 * 1000}
    rec.add(Measure("spark.latency_p50", f"{what}, p50", details["p50_ms"], "ms",
                    targets=(Target("<=", 1000.0),), details=details))
    rec.add(Measure("spark.latency_p95", f"{what}, p95", details["p95_ms"], "ms", details=details))
    print(f"latency produce -> foreachBatch (processingTime 0): n={len(lags)} "
          f"p50={statistics.median(lags) * 1000:.0f} ms p95={p95 * 1000:.0f} ms")


def bench_sink(rec: Recorder, spark: Any, url: str, rows: int, tmp: Path) -> None:
    rec.phase(f"writeStream {rows:,} rows into sparkmq (exactly once)")
    httpx.post(f"{url}/v1/topics", json={"name": "sinkout", "queues": QUEUES}, timeout=30)
    df = (spark.readStream.format("toyarrow").option("rows", str(rows)).load()
          .selectExpr("value", "partition"))
    started = time.perf_counter()
    q = (df.writeStream.format("sparkmq").option("endpoint", url).option("topic", "sinkout")
         .option("sinkId", "bench").option("checkpointLocation", str(tmp / "sink"))
         .trigger(availableNow=True).start())
    q.awaitTermination()
    elapsed = time.perf_counter() - started
    n = sum(p["numInputRows"] for p in q.recentProgress)
    busy = sum(p["durationMs"].get("addBatch", 0) for p in q.recentProgress) / 1000
    print(f"sink  writeStream sparkmq (exactly-once): {n:>9,} rows in {elapsed:6.2f} s = "
          f"{n / elapsed:>11,.0f} rows/s; in batches {busy:6.2f} s = {n / busy:>11,.0f} rows/s")
    rec.phase(f"plain Arrow produce of the same {rows:,} rows from one client (at-least-once)")
    plain = produce_bulk(url, "sinkplain", rows)
    print(f"sink  plain Arrow produce, 1 client   : {rows:>9,} rows = {plain:>11,.0f} rows/s; "
          f"sink / plain = {n / elapsed / plain:.2f}x")
    rec.add(Measure("spark.sink", f"Spark writeStream into sparkmq, exactly once (transactional), {n:,} rows",
                    n / elapsed, "rows/s", peer="plain Arrow produce, 1 client", peer_value=plain,
                    targets=(Target(">=", 0.5, "ratio"),),
                    details={"rows": n, "seconds": elapsed, "in_batches_rows_s": n / busy}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--sink-rows", type=int, default=200_000)
    ap.add_argument("--latency-s", type=float, default=15.0)
    ap.add_argument("--read-rounds", type=int, default=1,
                    help="read: toy and sparkmq this many times in turns; the ratio is the median")
    ap.add_argument("--only", choices=("read", "latency", "sink"), default=None,
                    help="run one measurement")
    ap.add_argument("--json-out", default=None, help="also write the results as JSON (for sparkmq bench)")
    args = ap.parse_args()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    rec = Recorder("spark", args.json_out, {"rows": args.rows, "sink_rows": args.sink_rows,
                                            "latency_s": args.latency_s})
    with tempfile.TemporaryDirectory(prefix="bench-spark-") as d:
        tmp = Path(d)
        rec.phase("starting a broker")
        proc, url = start_broker(tmp / "data")
        try:
            rows = args.rows if args.only in (None, "read") else 10_000
            rec.phase(f"producing {rows:,} messages")
            rate = produce_bulk(url, "bench", rows)
            print(f"setup produced {rows:,} x {VALUE} B over {QUEUES} queues ({rate:,.0f} msgs/s)")
            run(rec, args, url, tmp)
        finally:
            proc.terminate()
            proc.wait(30)
    rec.write()


def run(rec: Recorder, args: argparse.Namespace, url: str, tmp: Path) -> None:
    from pyspark.sql import SparkSession

    rec.phase("starting Spark (local[2])")
    spark = (SparkSession.builder.master("local[2]").appName("bench-spark")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.driver.host", "127.0.0.1").getOrCreate())
    try:
        spark.sparkContext.setLogLevel("ERROR")
        streaming.register(spark)
        if args.only in (None, "read"):
            rec.phase("the broker's Arrow pull alone")
            bench_pull(rec, url)
            bench_read(rec, spark, url, args.rows, tmp, args.read_rounds)
        if args.only in (None, "latency"):
            bench_latency(rec, spark, url, args.latency_s, tmp)
        if args.only in (None, "sink"):
            spark.dataSource.register(ToySource)
            bench_sink(rec, spark, url, args.sink_rows, tmp)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
