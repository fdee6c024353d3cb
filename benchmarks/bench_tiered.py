"""Tiered storage benchmark (issue 35): a topic read back from the object store vs from local segments.

    python -m benchmarks.bench_tiered [--size 1G] [--body 1000] [--target s3|dir] [--json-out PATH]

One run, one data directory, one topic of ``--size`` bytes (``1G``, ``256M``; ``sparkmq bench --only tiered``
runs 1G, ``--quick`` 64M) (``--body``-byte bodies over 4 queues, 64 MiB segments):

1. a broker without tiering: produce, then a Spark batch read (→ noop) of the whole topic from
   local segments;
2. the same broker restarted with ``[tiered] uri`` on moto's S3 server (``moto_server`` subprocess on
   loopback) and ``local_retention_s = 0``: upload throughput (every full segment uploaded, read back,
   verified, dropped locally);
3. the same Spark read again, now ~94 % from the object store through a cold block cache.

Load (``uptime``) is printed with every figure.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import boto3
import httpx
import numpy as np
import pyarrow as pa

from benchmarks.results import Measure, Recorder, Target

ROOT = Path(__file__).resolve().parent.parent
QUEUES = 4
SEGMENT = 64 << 20


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _load() -> str:
    return "load %.2f %.2f %.2f" % os.getloadavg()


def _wait_http(url: str, proc: subprocess.Popen[bytes]) -> None:
    for _ in range(1200):
        if proc.poll() is not None:
            raise RuntimeError(f"{url}: process exited with {proc.returncode}")
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.HTTPError:
            time.sleep(0.05)
    raise RuntimeError(f"{url} did not answer")


def _size_mb(text: str) -> int:
    """``1G`` / ``256M`` / ``512`` (MB) as MiB."""
    text = text.strip().upper().removesuffix("B")
    scale = {"G": 1024, "M": 1}.get(text[-1:], None)
    return int(float(text[:-1]) * scale) if scale else int(text)


def start_s3() -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    _wait_http(endpoint, proc)
    return proc, endpoint


def start_broker(data: Path, port: int, extra: dict[str, str]) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARKMQ_")}
    env.update({"SPARKMQ_MIRROR__ENABLED": "false", "SPARKMQ_STORE__COMMITLOG_SEGMENT_BYTES": str(SEGMENT),
                "SPARKMQ_BROKER__LOG_LEVEL": "warning", **extra})
    proc = subprocess.Popen([sys.executable, "-m", "broker_api", "serve", "--host", "127.0.0.1", "--port",
                             str(port), "--data-dir", str(data)], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_http(f"http://127.0.0.1:{port}/readyz", proc)
    return proc


def produce(url: str, total_bytes: int, body: int) -> int:
    """Arrow bulk produce of ``total_bytes`` of bodies over 4 queues; returns the row count."""
    httpx.post(f"{url}/v1/topics", json={"name": "bench", "queues": QUEUES}, timeout=30)
    rows, chunk = total_bytes // body, max(1, (8 << 20) // body)
    payload = np.frombuffer(os.urandom(body), np.uint8)
    with httpx.Client(timeout=120) as client:
        for lo in range(0, rows, chunk):
            n = min(chunk, rows - lo)
            bodies = pa.array([payload.tobytes()] * n, pa.binary())
            table = pa.table({"body": bodies, "queue_id": pa.array(np.arange(lo, lo + n) % QUEUES, pa.int32())})
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, table.schema) as w:
                w.write_table(table)
            for _ in range(50):
                r = client.post(f"{url}/v1/topics/bench/messages", content=sink.getvalue().to_pybytes(),
                                headers={"Content-Type": "application/vnd.apache.arrow.stream"})
                if r.status_code != 503:
                    break
                time.sleep(0.2)
            r.raise_for_status()
    return rows


def spark_read(spark: Any, url: str, tmp: Path, name: str) -> tuple[float, int]:
    """One AvailableNow query of the whole topic; retried (up to 3 times) when a Python worker is not up in
    Spark's fixed 10 s (a heavily loaded machine); only the query that ran counts."""
    for attempt in range(3):
        try:
            return _spark_read(spark, url, tmp, f"{name}{attempt}")
        except Exception as exc:  # pyspark's StreamingQueryException
            if "failed to connect back" not in str(exc) or attempt == 2:
                raise
            print(f"({name}: a Python worker did not start in time; running the query again, {_load()})")
    raise AssertionError("unreachable")


def _spark_read(spark: Any, url: str, tmp: Path, name: str) -> tuple[float, int]:
    """A batch read of the whole topic into the noop sink (the source's batch reader: the same pulls as
    readStream, with fewer Python planner workers to start); returns (seconds, rows)."""
    started = time.perf_counter()
    df = spark.read.format("sparkmq").option("endpoint", url).option("subscribe", "bench").load()
    df.write.format("noop").mode("overwrite").save()
    elapsed = time.perf_counter() - started
    rows = sum(int(q["max_offset"]) for q in httpx.get(f"{url}/v1/topics/bench/queues", timeout=30).json())
    return elapsed, rows


def wait_uploaded(url: str) -> tuple[float, dict[str, Any]]:
    started = time.perf_counter()
    while True:
        t = httpx.get(f"{url}/v1/broker", timeout=30).json()["tiered"]
        if t["local_segments"] == 1 and t["remote_segments"] > 0:
            return time.perf_counter() - started, t
        if time.perf_counter() - started > 1800:
            raise RuntimeError(f"upload did not finish: {t}")
        time.sleep(0.2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=_size_mb, default=1024, dest="mb", metavar="SIZE",
                    help="bytes of message bodies to write and read back: 1G (the issue's figure), 256M, ...")
    ap.add_argument("--body", type=int, default=1000)
    ap.add_argument("--target", choices=("s3", "dir"), default="s3",
                    help="s3: moto's S3 server; dir: a local directory (our read path without moto's cost)")
    ap.add_argument("--readahead", type=int, default=None,
                    help="[tiered] readahead_blocks for the broker (default: the setting's default)")
    ap.add_argument("--json-out", default=None)
    args = ap.parse_args()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    rec = Recorder("tiered", args.json_out, {"mb": args.mb, "body": args.body})
    s3_proc, endpoint = start_s3()
    aws = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_REGION": "us-east-1",
           "AWS_ENDPOINT_URL": endpoint, "AWS_ALLOW_HTTP": "true"}
    boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="bench", aws_secret_access_key="bench",
                 region_name="us-east-1").create_bucket(Bucket="sparkmq-bench")
    from pyspark.sql import SparkSession

    import streaming

    spark = (SparkSession.builder.master("local[2]").appName("bench-tiered").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.python.authenticate.socketTimeout", "120s")  # a loaded 2-core box is slow to fork
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    streaming.register(spark)
    try:
        with tempfile.TemporaryDirectory(prefix="bench-tiered-") as d:
            run(rec, spark, Path(d), args, aws)
    finally:
        spark.stop()
        s3_proc.terminate()
        s3_proc.wait(30)
    rec.write()


def run(rec: Recorder, spark: Any, tmp: Path, args: argparse.Namespace, aws: dict[str, str]) -> None:
    port, data = _free_port(), tmp / "data"
    url = f"http://127.0.0.1:{port}"
    broker = start_broker(data, port, {})
    try:
        rec.phase(f"producing {args.mb} MB ({_load()})")
        rows = produce(url, args.mb << 20, args.body)
        spark_read(spark, url, tmp, "warm")  # JIT and Python workers warm, page cache holds the segments
        rec.phase(f"Spark read from local segments ({_load()})")
        local_s, n = spark_read(spark, url, tmp, "local")
        print(f"local  read: {n:,} rows, {args.mb} MB in {local_s:.2f} s = {args.mb / local_s:,.1f} MB/s ({_load()})")
    finally:
        broker.terminate()
        broker.wait(60)
    uri = "s3://sparkmq-bench/b" if args.target == "s3" else str(tmp / "remote")
    tiered = {**aws, "SPARKMQ_TIERED__URI": uri, "SPARKMQ_TIERED__LOCAL_RETENTION_S": "0",
              "SPARKMQ_TIERED__INTERVAL_S": "0.2"}
    if args.readahead is not None:
        tiered["SPARKMQ_TIERED__READAHEAD_BLOCKS"] = str(args.readahead)
    broker = start_broker(data, port, tiered)
    try:
        rec.phase(f"uploading to S3 (moto) ({_load()})")
        up_s, t = wait_uploaded(url)
        up_mb = t["remote_bytes"] / (1 << 20)
        print(f"upload: {up_mb:,.0f} MB in {up_s:.2f} s = {up_mb / up_s:,.1f} MB/s incl. read-back check ({_load()})")
        share = t['remote_bytes'] / max(1, t['remote_bytes'] + t['local_bytes'])
        rec.phase(f"Spark read, {share:.0%} remote ({_load()})")
        remote_s, n2 = spark_read(spark, url, tmp, "remote")
        t = httpx.get(f"{url}/v1/broker", timeout=30).json()["tiered"]
        print(f"remote read: {n2:,} rows, {args.mb} MB in {remote_s:.2f} s = {args.mb / remote_s:,.1f} MB/s; "
              f"cache hits {t['cache_hits']} misses {t['cache_misses']} ({_load()})")
        print(f"remote / local: {local_s / remote_s:.2f}x")
    finally:
        broker.terminate()
        broker.wait(60)
    assert n == n2 == rows, (n, n2, rows)
    where = "S3 (moto)" if args.target == "s3" else "a directory"
    details = {"rows": rows, "load": _load(), "remote_share": round(share, 3),
               "readahead_blocks": t["readahead_blocks"], "cache_misses": t["cache_misses"]}
    rec.add(Measure("tiered.read", f"Spark batch read of {args.mb} MB ({args.body} B bodies), {share:.0%} from {where}",
                    args.mb / remote_s, "MB/s", peer="the same read from local segments", peer_value=args.mb / local_s,
                    targets=(Target(">=", 0.5, "ratio"),), details=details))
    rec.add(Measure("tiered.upload", "segment upload to S3 (moto) incl. read-back verification", up_mb / up_s, "MB/s",
                    details={"mb": up_mb, "seconds": up_s}))


if __name__ == "__main__":
    main()
