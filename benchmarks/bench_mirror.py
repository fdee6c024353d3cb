"""Delta mirror benchmark: produce rate with the mirror off vs on, mirror lag,
mirrored rows/s, and a GROUP BY over many mirrored rows in the embedded engine.

    python benchmarks/bench_mirror.py --duration 60 --rate 100000 --groupby-rows 10000000 [--json-out PATH]
    python -m benchmarks.bench_mirror --duration 60 --rate 80000 --hosts thread,process \
        --catchup-messages 0 --groupby-rows 0          # issue 15: both hosts next to mirror off, one run

Each mode starts a real broker subprocess (127.0.0.1, fresh data dir) and
produces Arrow bulk batches from ``--producers`` threads, paced to ``--rate``
messages/s (or as fast as the broker takes them if it cannot keep up).  With
the mirror on, ``/v1/broker`` is sampled every 0.25 s for the mirror lag; after
producing stops, the time until the lag reaches 0 is measured.  The GROUP BY
runs over a table of ``--groupby-rows`` rows written in the mirror's layout.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pyarrow as pa

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.results import Measure, Recorder, Target
from connectors import MESSAGE_SCHEMA, run_sql

ARROW = "application/vnd.apache.arrow.stream"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_broker(data_dir: Path, mirror: bool, queues: int, host: str = "thread") -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARKMQ_")}
    env.update({"SPARKMQ_MIRROR__ENABLED": str(mirror).lower(), "SPARKMQ_MIRROR__HOST": host,
                "SPARKMQ_BROKER__DEFAULT_QUEUES": str(queues),
                "SPARKMQ_FAST_FAILURE__ENABLED": "false", "PYTHONPATH": str(REPO)})
    cmd = [sys.executable, "-m", "broker_api", "serve", "--host", "127.0.0.1", "--port", str(port),
           "--data-dir", str(data_dir)]
    log = open(data_dir.parent / f"broker-{host if mirror else 'off'}.log", "ab")
    proc = subprocess.Popen(cmd, cwd=data_dir.parent, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/readyz", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("broker did not become ready")


def arrow_payload(batch: int, body_bytes: int) -> bytes:
    table = pa.table({
        "body": pa.array([os.urandom(body_bytes // 2).hex().encode()[:body_bytes] for _ in range(batch)], pa.binary()),
        "keys": pa.array([[f"k{i}"] for i in range(batch)], pa.list_(pa.string())),
        "tags": pa.array(["A" if i % 2 else "B" for i in range(batch)]),
    })
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return sink.getvalue().to_pybytes()


def produce(url: str, args: argparse.Namespace, payload: bytes) -> tuple[int, float]:
    """Produce for ``args.duration`` seconds; return (messages acknowledged, seconds)."""
    sent = [0] * args.producers
    per_thread_rate = args.rate / args.producers
    t0 = time.monotonic()
    end = t0 + args.duration

    def worker(idx: int) -> None:
        with httpx.Client(base_url=url, timeout=60, headers={"content-type": ARROW}) as client:
            while (now := time.monotonic()) < end:
                ahead = sent[idx] / per_thread_rate - (now - t0)
                if ahead > 0:
                    time.sleep(min(ahead, end - now))
                    continue
                topic = f"bench{idx % 2}"
                r = client.post(f"/v1/topics/{topic}/messages", content=payload)
                if r.status_code == 200:
                    sent[idx] += args.batch

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(args.producers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(sent), time.monotonic() - t0


class LagSampler:
    """Samples /v1/broker's mirror lag in the background."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.samples: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        with httpx.Client(base_url=self.url, timeout=10) as c:
            while not self._stop.wait(0.25):
                try:
                    self.samples.append({**c.get("/v1/broker").json()["mirror"], "t": time.time()})
                except httpx.HTTPError:
                    pass


def wait_caught_up(url: str, timeout_s: float) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        if httpx.get(url + "/v1/broker", timeout=10).json()["mirror"]["lag_bytes"] == 0:
            return time.monotonic() - t0
        time.sleep(0.1)
    raise RuntimeError(f"the mirror did not catch up within {timeout_s:g} s after producing stopped")


def run_mode(args: argparse.Namespace, mirror: bool, payload: bytes, work: Path, host: str = "thread") -> dict[str, Any]:
    data = work / f"data-{host if mirror else 'off'}"
    data.mkdir()
    proc, url = start_broker(data, mirror, args.queues, host)
    try:
        sampler = LagSampler(url) if mirror else None
        if sampler:
            sampler.start()
        load_before = os.getloadavg()[0]
        acked, secs = produce(url, args, payload)
        out: dict[str, Any] = {"mirror": mirror, "host": host if mirror else None, "messages": acked, "seconds": secs,
                               "rate": acked / secs, "load_avg_1m": [load_before, os.getloadavg()[0]]}
        if sampler:
            catch_up = wait_caught_up(url, args.catch_up_timeout)
            sampler.stop()
            rows = run_sql(str(data / "delta" / "messages"), "SELECT count(*) AS n FROM messages",
                           max_rows=1, timeout_s=120).to_pylist()[0]["n"]
            out.update(catch_up_s=catch_up, rows=rows, mirrored_rows_per_s=rows / (secs + catch_up),
                       max_lag_s=max((s["lag_seconds"] for s in sampler.samples), default=0.0),
                       max_lag_bytes=max((s["lag_bytes"] for s in sampler.samples), default=0),
                       lag_series=[(round(s["t"], 2), s["lag_seconds"]) for s in sampler.samples])
        return out
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()


def catch_up(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """Mirror capacity: a mirror started over a store already holding ``--catchup-messages``."""
    from connectors import MirrorConfig, open_mirror
    from store import Message, MessageStore, StoreConfig

    store = MessageStore(StoreConfig(root_dir=work / "catchup" / "store"))
    store.start()
    try:
        body = b"x" * args.body_bytes
        for lo in range(0, args.catchup_messages, 2000):
            store.put_messages([Message(topic=f"t{i % 4}", body=body, queue_id=i % 4, keys=(f"k{i}",), tags="A")
                                for i in range(lo, min(lo + 2000, args.catchup_messages))])
        while store.stats()["dispatch_behind_bytes"]:
            time.sleep(0.05)
        host = args.hosts.split(",")[0].strip() or "thread"
        t0 = time.monotonic()
        mirror = open_mirror(store, MirrorConfig(table_uri=str(work / "catchup" / "delta"), app_id="bench",
                                                 host=host))  # type: ignore[arg-type]
        while mirror.lag()["lag_bytes"]:
            time.sleep(0.02)
        secs = time.monotonic() - t0
        mirror.stop()
        return {"rows": mirror.stats()["rows"], "seconds": secs, "commits": mirror.stats()["commits"]}
    finally:
        store.shutdown()


def synthetic_table(uri: str, rows: int, chunk: int = 1_000_000) -> None:
    """``rows`` rows in the mirror's layout (10 topics, 8 queues, 100-byte bodies)."""
    from deltalake import write_deltalake

    now_us = int(time.time() * 1e6)
    topics = np.array([f"topic-{i}" for i in range(10)])
    for lo in range(0, rows, chunk):
        n = min(chunk, rows - lo)
        idx = np.arange(lo, lo + n)
        ts = pa.array(now_us + idx, pa.int64()).cast(pa.timestamp("us", tz="UTC"))
        table = pa.table({
            "topic": pa.array(topics[idx % 10]), "queue_id": pa.array((idx % 8).astype(np.int32)),
            "queue_offset": pa.array(idx // 80), "commitlog_offset": pa.array(idx * 200),
            "msg_id": pa.array(np.char.zfill(idx.astype(str), 32)),
            "keys": pa.ListArray.from_arrays(pa.array(np.arange(n + 1, dtype=np.int32)), pa.array(idx.astype(str))),
            "tags": pa.array(np.where(idx % 2 == 0, "A", "B")),
            "properties": pa.array([[]] * n, pa.map_(pa.string(), pa.string())),
            "born_timestamp": ts, "store_timestamp": ts,
            "size": pa.array(np.full(n, 200, np.int32)),
            "body": pa.array([b"x" * 100] * n, pa.binary()),
            "store_date": ts.cast(pa.date32()),
        }, schema=MESSAGE_SCHEMA)
        write_deltalake(uri, table, mode="append", partition_by=["store_date"])


def group_by(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    uri = str(work / "groupby" / "messages")
    t0 = time.monotonic()
    synthetic_table(uri, args.groupby_rows)
    written = time.monotonic() - t0
    sql = "SELECT topic, queue_id, count(*) AS n, sum(size) AS bytes FROM messages GROUP BY topic, queue_id"
    runs = []
    for _ in range(3):
        t0 = time.monotonic()
        result = run_sql(uri, sql, max_rows=1000, timeout_s=600)
        runs.append(time.monotonic() - t0)
    assert sum(result["n"].to_pylist()) == args.groupby_rows
    return {"rows": args.groupby_rows, "write_s": written, "best_s": min(runs), "runs_s": runs}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--duration", type=float, default=60.0, help="seconds of produce per mode")
    p.add_argument("--rate", type=float, default=100_000, help="target messages/s (all producers)")
    p.add_argument("--batch", type=int, default=2000, help="messages per produce request")
    p.add_argument("--body-bytes", type=int, default=100)
    p.add_argument("--producers", type=int, default=2)
    p.add_argument("--hosts", default="thread",
                   help="comma-separated [mirror] host values to run with the mirror on (thread, process)")
    p.add_argument("--queues", type=int, default=4)
    p.add_argument("--groupby-rows", type=int, default=10_000_000)
    p.add_argument("--catchup-messages", type=int, default=1_000_000,
                   help="messages in an in-process store that a fresh mirror reads back (0 skips)")
    p.add_argument("--catch-up-timeout", type=float, default=300.0)
    p.add_argument("--skip-produce", action="store_true")
    p.add_argument("--keep", action="store_true", help="keep the work directory (broker logs, Delta tables)")
    p.add_argument("--json-out", default=None, help="also write the results as JSON (for sparkmq bench)")
    args = p.parse_args()
    rec = Recorder("mirror", args.json_out, {k: v for k, v in vars(args).items() if k != "json_out"})
    work = Path(tempfile.mkdtemp(prefix="bench-mirror-"))
    try:
        if not args.skip_produce:
            produce_modes(rec, args, work)
        if args.catchup_messages:
            rec.phase(f"mirror catch-up over {args.catchup_messages:,} stored messages")
            c = catch_up(args, work)
            rec.add(Measure("mirror.catchup", f"mirror catch-up from the CommitLog ({c['rows']:,} stored messages)",
                            c["rows"] / c["seconds"], "rows/s", details=c))
            print(f"mirror catch-up from the CommitLog: {c['rows']:,} rows in {c['seconds']:.2f} s = "
                  f"{c['rows'] / c['seconds']:,.0f} rows/s ({c['commits']} commits)")
        if args.groupby_rows:
            rec.phase(f"GROUP BY over {args.groupby_rows:,} mirrored-layout rows")
            g = group_by(args, work)
            rec.add(Measure("mirror.groupby", f"SQL GROUP BY topic, queue_id over {g['rows']:,} mirrored-layout rows, "
                            "embedded engine, best of 3", g["best_s"], "s", details=g))
            print(f"GROUP BY topic, queue_id over {g['rows']:,} rows: best {g['best_s']:.2f} s "
                  f"(runs {', '.join(f'{r:.2f}' for r in g['runs_s'])}; table written in {g['write_s']:.1f} s)")
    finally:
        if args.keep:
            print(f"work directory kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    rec.write()


def produce_modes(rec: Recorder, args: argparse.Namespace, work: Path) -> None:
    """Produce with the mirror off, then on for each host; record the rates, the lag and the mirrored rows/s."""
    payload = arrow_payload(args.batch, args.body_bytes)
    hosts = [h.strip() for h in args.hosts.split(",") if h.strip()]
    rec.phase(f"produce with the mirror off ({args.duration:g} s)")
    off = run_mode(args, False, payload, work)
    print(f"produce, mirror off: {off['rate']:,.0f} msg/s ({off['messages']:,} in {off['seconds']:.1f} s); "
          f"load average {off['load_avg_1m'][0]:.1f} -> {off['load_avg_1m'][1]:.1f}")
    for host in hosts:
        rec.phase(f"produce with the mirror on, host {host} ({args.duration:g} s), then catch up")
        on = run_mode(args, True, payload, work, host)
        record_host(rec, args, host, on, off, primary=host == hosts[0])


def record_host(rec: Recorder, args: argparse.Namespace, host: str, on: dict[str, Any], off: dict[str, Any], *,
                primary: bool) -> None:
    how = (f"Arrow bulk, {args.producers} producers × {args.batch} msgs of {args.body_bytes} B, "
           f"paced to ≤ {args.rate:,.0f} msg/s, {args.duration:g} s, mirror host {host}")
    key = "mirror" if primary else f"mirror.{host}"
    rec.add(Measure(f"{key}.produce", f"HTTP produce with the Delta mirror on ({how})", on["rate"], "msg/s",
                    peer="mirror off", peer_value=off["rate"], targets=(Target(">=", 0.8, "ratio"),),
                    details={"on": on, "off": off}))
    rec.add(Measure(f"{key}.lag", f"mirror lag while producing, max of samples every 0.25 s (host {host})",
                    on["max_lag_s"], "s", targets=(Target("<=", 5.0),),
                    details={"max_lag_bytes": on["max_lag_bytes"], "catch_up_s": on["catch_up_s"]}))
    rec.add(Measure(f"{key}.rows", f"rows mirrored into Delta per second while producing (host {host})",
                    on["mirrored_rows_per_s"], "rows/s", details={"rows": on["rows"]}))
    print(f"produce, mirror on ({host}): {on['rate']:,.0f} msg/s ({on['messages']:,} in {on['seconds']:.1f} s); "
          f"on/off = {on['rate'] / off['rate']:.2f}; load average {on['load_avg_1m'][0]:.1f} -> "
          f"{on['load_avg_1m'][1]:.1f}")
    print(f"mirror ({host}): {on['rows']:,} rows, {on['mirrored_rows_per_s']:,.0f} rows/s, max lag "
          f"{on['max_lag_s']:.2f} s / {on['max_lag_bytes']:,} bytes, caught up {on['catch_up_s']:.2f} s "
          "after producing stopped")


if __name__ == "__main__":
    main()
