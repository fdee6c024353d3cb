"""HA benchmark: replication throughput and what SYNC_MASTER costs a producer, in one run.

    python -m benchmarks.bench_ha --duration 5                # the README's figures
    python -m benchmarks.bench_ha --duration 1 --copy-mb 20   # quick

Brokers are real ``python -m broker_api serve`` processes on 127.0.0.1 (Delta
mirror off, default 1 GiB segments).  Measured, one after the other:

* produce latency (one 100-byte message per request, one connection, p50/p99) and
  produce throughput (``--threads`` connections of 100-message JSON batches) for
  ASYNC_MASTER + slave, SYNC_MASTER + slave, and ASYNC_MASTER with
  ``flush_mode = "sync"`` (fdatasync per group commit) + slave;
* slave lag while an ASYNC_MASTER takes ``--rate`` msg/s (100k) of 100-byte messages
  in 1000-message batches: the largest lag in bytes and seconds seen on /v1/broker;
* replication throughput: an empty slave copying ``--copy-mb`` MB from its master
  (MB/s and msg/s, from start to caught up).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.bench_broker import free_port, stop, wait_port  # noqa: E402
from benchmarks.results import Measure, Recorder  # noqa: E402

BODY = "x" * 100


def start(data: Path, env: dict[str, str], log: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    full = {k: v for k, v in os.environ.items() if not k.startswith("SPARKMQ_")}
    full.update({"SPARKMQ_MIRROR__ENABLED": "false", "SPARKMQ_BROKER__LOG_LEVEL": "warning", **env})
    with open(log, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "broker_api", "serve", "--port", str(port), "--data-dir",
                                 str(data)], cwd=REPO, env=full, stdout=out, stderr=subprocess.STDOUT)
    wait_port(port, proc)
    url = f"http://127.0.0.1:{port}"
    _until(lambda: httpx.get(url + "/readyz").status_code == 200, 60)
    return proc, url


@contextmanager
def running_broker(prefix: str, env: dict[str, str] | None = None) -> Iterator[httpx.Client]:
    """A broker in a temporary data dir, and a client of it; the broker is stopped at the end."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmpdir:
        proc, url = start(Path(tmpdir) / "data", env or {}, Path(tmpdir) / "broker.log")
        try:
            with httpx.Client(base_url=url, timeout=60) as client:
                yield client
        finally:
            stop(proc)


def _until(check: Any, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"timed out after {timeout_s}s")


def ha(url: str) -> dict[str, Any]:
    return dict(httpx.get(url + "/v1/broker", timeout=10).json()["ha"])


def pair(tmp: Path, name: str, role: str, flush: str) -> tuple[list[subprocess.Popen[bytes]], str, int]:
    ha_port = free_port()
    m, murl = start(tmp / f"{name}-m", {"SPARKMQ_HA__ROLE": role, "SPARKMQ_HA__LISTEN_PORT": str(ha_port),
                                        "SPARKMQ_STORE__FLUSH_MODE": flush}, tmp / f"{name}-m.log")
    s, _ = start(tmp / f"{name}-s", {"SPARKMQ_BROKER__BROKER_ID": "1", "SPARKMQ_HA__MASTER_ADDR": f"127.0.0.1:{ha_port}",
                                     "SPARKMQ_HA__MASTER_URL": murl}, tmp / f"{name}-s.log")
    _until(lambda: ha(murl)["connected_slaves"] == 1, 30)
    return [m, s], murl, ha_port


def latency(url: str, duration: float) -> tuple[float, float, dict[str, int]]:
    took: list[float] = []
    statuses: dict[str, int] = {}
    body = {"messages": [{"body": BODY}]}
    with httpx.Client(timeout=30) as c:
        stop_at = time.monotonic() + duration
        while time.monotonic() < stop_at:
            t0 = time.perf_counter()
            st = c.post(f"{url}/v1/topics/lat/messages", json=body).json()["status"]
            took.append(time.perf_counter() - t0)
            statuses[st] = statuses.get(st, 0) + 1
    took.sort()
    return took[len(took) // 2] * 1000, took[int(len(took) * 0.99)] * 1000, statuses


def throughput(url: str, duration: float, threads: int, batch: int = 100) -> float:
    sent = [0] * threads
    body = {"messages": [{"body": BODY}] * batch}
    stop_at = time.monotonic() + duration

    def run(i: int) -> None:
        with httpx.Client(timeout=30) as c:
            while time.monotonic() < stop_at:
                if c.post(f"{url}/v1/topics/tput/messages", json=body).status_code == 200:
                    sent[i] += batch

    ts = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    t0 = time.monotonic()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return sum(sent) / (time.monotonic() - t0)


def lag_under_rate(url: str, duration: float, rate: int) -> tuple[float, float, float, float]:
    """(achieved msg/s, max lag bytes, max lag seconds, catch-up s after the last produce)."""
    body = {"messages": [{"body": BODY}] * 1000}
    lags: list[tuple[float, float]] = []
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            slaves = ha(url)["slaves"]
            if slaves:
                lags.append((slaves[0]["lag_bytes"], slaves[0]["lag_seconds"]))
            time.sleep(0.1)

    sampler = threading.Thread(target=sample)
    sampler.start()
    sent, t0 = 0, time.monotonic()
    with httpx.Client(timeout=30) as c:
        while time.monotonic() - t0 < duration:
            c.post(f"{url}/v1/topics/rate/messages", json=body)
            sent += 1000
            ahead = sent / rate - (time.monotonic() - t0)
            if ahead > 0:
                time.sleep(ahead)
    achieved = sent / (time.monotonic() - t0)
    t1 = time.monotonic()
    _until(lambda: ha(url)["slaves"][0]["lag_bytes"] == 0, 60)
    catch_up = time.monotonic() - t1
    done.set()
    sampler.join()
    return achieved, max((x[0] for x in lags), default=0), max((x[1] for x in lags), default=0), catch_up


def copy_rate(tmp: Path, murl: str, ha_port: int) -> tuple[float, float, float]:
    """An empty slave copies the master: (MB/s, msg/s, seconds)."""
    info = httpx.get(murl + "/v1/broker").json()
    total = info["ha"]["max_offset"]
    messages = sum(q["max_offset"] for t in ("tput", "rate", "lat")
                   for q in httpx.get(f"{murl}/v1/topics/{t}/queues").json())
    t0 = time.monotonic()
    s, surl = start(tmp / "copy-s", {"SPARKMQ_BROKER__BROKER_ID": "1", "SPARKMQ_HA__MASTER_ADDR": f"127.0.0.1:{ha_port}",
                                     "SPARKMQ_HA__MASTER_URL": murl}, tmp / "copy-s.log")
    try:
        _until(lambda: ha(surl)["max_offset"] >= total, 600)
        took = time.monotonic() - t0
    finally:
        stop(s)
    return total / took / 1e6, messages / took, took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per latency/throughput phase")
    parser.add_argument("--threads", type=int, default=8, help="producer connections for throughput")
    parser.add_argument("--rate", type=int, default=100_000, help="msg/s offered in the lag phase")
    parser.add_argument("--copy-mb", type=float, default=200.0, help="least MB an empty slave copies")
    parser.add_argument("--json-out", default=None, help="also write the results as JSON (for sparkmq bench)")
    args = parser.parse_args()
    rec = Recorder("ha", args.json_out, vars(args))
    with tempfile.TemporaryDirectory(prefix="sparkmq-ha-") as tmpdir:
        tmp = Path(tmpdir)
        modes = (("async", "async_master", "async", "ASYNC_MASTER"), ("sync", "sync_master", "async", "SYNC_MASTER"),
                 ("flush", "async_master", "sync", "ASYNC_MASTER, flush_mode sync"))
        for name, role, flush, label in modes:
            rec.phase(f"{label}: latency and throughput")
            procs, murl, ha_port = pair(tmp, name, role, flush)
            try:
                p50, p99, statuses = latency(murl, args.duration)
                tput = throughput(murl, args.duration, args.threads)
                rec.add(Measure(f"ha.{name}.p50", f"{label} + slave: produce p50 (1 msg)", round(p50, 3), "ms",
                                details={"statuses": statuses}))
                rec.add(Measure(f"ha.{name}.p99", f"{label} + slave: produce p99 (1 msg)", round(p99, 3), "ms"))
                rec.add(Measure(f"ha.{name}.tput", f"{label} + slave: produce, {args.threads} conns x 100-msg "
                                "batches", round(tput), "msg/s"))
                if name == "async":
                    rec.phase(f"slave lag at {args.rate} msg/s")
                    achieved, lag_b, lag_s, catch = lag_under_rate(murl, args.duration, args.rate)
                    rec.add(Measure("ha.lag", f"ASYNC_MASTER produce with the slave at most {lag_b / 1e6:.2f} MB / "
                                    f"{lag_s:.2f} s behind (caught up {catch:.2f} s after the last produce)",
                                    round(achieved), "msg/s", details={"max_lag_bytes": lag_b, "max_lag_s": lag_s,
                                                                       "catch_up_s": round(catch, 3)}))
                    while ha(murl)["max_offset"] < args.copy_mb * 1e6:
                        throughput(murl, 1.0, args.threads, batch=1000)
                    rec.phase("empty slave copies the master")
                    mbs, msgs, took = copy_rate(tmp, murl, ha_port)
                    rec.add(Measure("ha.copy.mbs", f"replication: empty slave copies {ha(murl)['max_offset'] / 1e6:.0f}"
                                    f" MB in {took:.1f} s (its start-up included)", round(mbs, 1), "MB/s"))
                    rec.add(Measure("ha.copy.msgs", "replication: messages copied per second", round(msgs), "msg/s"))
            finally:
                for p in procs:
                    stop(p)
    for m in rec.measures:
        print(f"{m.what}: {m.value:,} {m.unit}", flush=True)
    rec.write()


if __name__ == "__main__":
    main()
