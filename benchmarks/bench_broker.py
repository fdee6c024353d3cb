"""Broker benchmark: HTTP produce/pull against Redis Streams and a bare FastAPI route.

    python benchmarks/bench_broker.py --duration 5            # all phases, 5 s each
    python benchmarks/bench_broker.py --duration 5 --soak-s 600   # plus the memory soak
    python benchmarks/bench_broker.py --duration 5 --json-out r.json  # also the results as JSON

Phases, each side by side in one run:

* batch produce: POST 1000 x 100 B JSON messages per request
  vs Redis ``XADD`` pipelined 50 deep (appendonly yes, appendfsync everysec)
* single produce: POST one message per request
  vs a bare FastAPI route (raw body in, small JSON out) under the same uvicorn: the framework ceiling
* Arrow pull: pages of 10,000 messages (``Accept: application/vnd.apache.arrow.stream``)
  vs Redis ``XREADGROUP ... COUNT 1000 NOACK``
* long-poll latency: 1,000 msg/s produced, a consumer long-polls; p50/p99 produce -> receive
* sync: 32 connections each POSTing one message at a time to a second broker with SYNC flush
  (default settings: a produce awaits its group fdatasync on the event loop) vs one 200 B
  write + fdatasync per message on the same disk, and vs the same load on the ASYNC broker (the
  HTTP ceiling: no disk wait at all); they alternate in 4 slices (issue 15: the group commit
  must group).  Also reports requests per fdatasync, from the SYNC broker's /v1/broker
* soak (optional): single produce at half the measured rate; broker anonymous memory,
  threads and file descriptors before/after.

Clients are asyncio raw-socket HTTP/1.1 and RESP clients in separate processes
(the same client style for every peer).  ``redis-server`` is installed from Debian's packages
when missing (as root, with apt-get), started on a free port and stopped at the end; Redis is
skipped with a message when it cannot be installed.  Everything listens on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from fastapi import FastAPI, Request
from starlette.responses import Response

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.bench_broker_clients import (
    http_load,
    longpoll_latency,
    pull_arrow_all,
    redis_read_all,
    redis_xadd_load,
)
from benchmarks.bench_sync import fdatasync_peer
from benchmarks.results import Measure, Recorder, Target

TOPIC = "bench"
ARROW = "application/vnd.apache.arrow.stream"
QUEUES = 4


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, proc: subprocess.Popen[bytes], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited early with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listening on {port} after {timeout_s}s")


def start_broker(data_dir: Path, flush_mode: str, **extra: str) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    env = {**os.environ, "SPARKMQ_MIRROR__ENABLED": "false", "SPARKMQ_STORE__FLUSH_MODE": flush_mode,
           "SPARKMQ_STORE__COMMITLOG_SEGMENT_BYTES": str(256 << 20), **extra}
    proc = subprocess.Popen([sys.executable, "-m", "broker_api", "serve", "--port", str(port),
                             "--data-dir", str(data_dir)], cwd=REPO, env=env, stdout=subprocess.DEVNULL)
    wait_port(port, proc)
    return proc, port


def start_bare() -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, __file__, "--bare-server", str(port)], cwd=REPO)
    wait_port(port, proc)
    return proc, port


def run_bare_server(port: int) -> None:
    """The framework ceiling: a FastAPI route that reads the body and answers small JSON."""
    import uvicorn

    app = FastAPI()

    @app.post("/bare")
    async def bare(request: Request) -> Response:
        body = await request.body()
        return Response(orjson.dumps({"results": [{"n": len(body)}]}), media_type="application/json")

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


REDIS_MISSING = "redis-server not installed (apt-get install -y redis-server)"


def install_redis() -> str | None:
    """``redis-server`` from Debian's packages when it is missing (root with apt-get only); its path."""
    exe = shutil.which("redis-server")
    if exe is None and shutil.which("apt-get") and os.geteuid() == 0:
        print("installing the Redis peer: apt-get update && apt-get install -y redis-server", flush=True)
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        for cmd in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", "redis-server"]):
            subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        exe = shutil.which("redis-server")
    return exe


def start_redis(tmp: Path) -> tuple[subprocess.Popen[bytes], int] | None:
    exe = install_redis()
    if exe is None:
        print(f"skipping the Redis peer: {REDIS_MISSING}")
        return None
    port = free_port()
    proc = subprocess.Popen([exe, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(tmp),
                             "--appendonly", "yes", "--appendfsync", "everysec", "--save", "",
                             "--protected-mode", "no"], stdout=subprocess.DEVNULL)
    wait_port(port, proc)
    return proc, port


def stop(proc: subprocess.Popen[bytes] | None) -> None:
    if proc is not None and proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def in_processes(n: int, fn: Callable[..., Any], *args: Any) -> list[Any]:
    """Run ``fn(*args)`` in ``n`` processes at once; their results in a list."""
    with mp.get_context("spawn").Pool(n) as pool:
        return pool.starmap(fn, [args] * n)


def http_request(port: int, path: str, body: bytes, ctype: str = "application/json") -> bytes:
    head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: {ctype}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    return head + body


def report(rec: Recorder, m: Measure) -> None:
    """Record ``m`` and print it as one line."""
    rec.add(m)
    line = f"{m.what:<56} {m.value:>12,.0f} {m.unit}"
    if m.ratio is not None:
        line += f"   | {m.peer}: {m.peer_value:,.0f} {m.unit}  (ratio {m.ratio:.2f}x)"
    elif m.peer_skipped:
        line += f"   | {m.peer}: skipped, {m.peer_skipped}"
    print(line, flush=True)


def proc_stats(pid: int) -> dict[str, int]:
    status = Path(f"/proc/{pid}/status").read_text().splitlines()
    fields = dict(line.split(":", 1) for line in status if ":" in line)
    return {"rss_anon_kb": int(fields["RssAnon"].split()[0]), "threads": int(fields["Threads"]),
            "fds": len(os.listdir(f"/proc/{pid}/fd"))}


def _redis_batch(rec: Recorder, args: argparse.Namespace, rport: int) -> float:
    rec.phase(f"batch produce, Redis XADD ({args.duration:g} s)")
    return sum(in_processes(args.clients, redis_xadd_load, rport, TOPIC, 50, args.duration, 100)) / args.duration


def _broker_batch(rec: Recorder, args: argparse.Namespace, bport: int, what: str, query: str, body: bytes,
                  ctype: str) -> float:
    rec.phase(f"batch produce, {what} ({args.duration:g} s)")
    req = http_request(bport, f"/v1/topics/{TOPIC}/messages{query}", body, ctype)
    res = in_processes(args.clients, http_load, bport, req, args.duration, 2)
    return sum(r["requests"] for r in res) * 1000 / args.duration


def phase_batch_produce(rec: Recorder, args: argparse.Namespace, bport: int, rport: int | None,
                        skipped: str | None) -> None:
    """JSON, Arrow and Arrow with ``answer=summary`` batches between two Redis runs (the peer is
    their mean, so a load change during the phase hits both sides alike)."""
    body = orjson.dumps({"messages": [{"body": "x" * 100} for _ in range(1000)]})
    arrow = _arrow_batch(1000, 100)
    redis = [_redis_batch(rec, args, rport)] if rport is not None else []
    json_rate = _broker_batch(rec, args, bport, "JSON", "", body, "application/json")
    arrow_rate = _broker_batch(rec, args, bport, "Arrow", "", arrow, ARROW)
    summary_rate = _broker_batch(rec, args, bport, "Arrow, answer=summary", "?answer=summary", arrow, ARROW)
    json_summary = _broker_batch(rec, args, bport, "JSON, answer=summary", "?answer=summary", body,
                                 "application/json")
    if rport is not None:
        redis.append(_redis_batch(rec, args, rport))
    peer_value = sum(redis) / len(redis) if redis else None
    peer: dict[str, Any] = {"peer": "Redis XADD pipelined 50", "peer_value": peer_value, "peer_skipped": skipped}
    load = {"load_1m": os.getloadavg()[0], "redis_runs": redis}
    what = "HTTP batch produce, {}, 1000 x 100 B per request"
    report(rec, Measure("broker.produce_json", what.format("JSON"), json_rate, "msg/s", **peer,
                        targets=(Target(">=", 1.0, "ratio"),), details=load))
    report(rec, Measure("broker.produce_arrow", what.format("Arrow IPC"), arrow_rate, "msg/s", **peer,
                        details=load))
    report(rec, Measure("broker.produce_arrow_summary", what.format("Arrow IPC, answer=summary"), summary_rate,
                        "msg/s", **peer, targets=(Target(">=", 1.0, "ratio"),), details=load))
    report(rec, Measure("broker.produce_json_summary", what.format("JSON, answer=summary"), json_summary,
                        "msg/s", **peer, details=load))
    print(f"load average (1 min) {load['load_1m']:.1f}; Redis runs {', '.join(f'{r:,.0f}' for r in redis)} msg/s",
          flush=True)


def _arrow_batch(n: int, size: int) -> bytes:
    import pyarrow as pa

    table = pa.table({"body": pa.array([b"x" * size] * n, pa.binary())})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def phase_single_produce(rec: Recorder, args: argparse.Namespace, bport: int, bare_port: int) -> float:
    rec.phase(f"single produce vs the bare route ({args.duration:g} s each)")
    body = orjson.dumps({"messages": [{"body": "x" * 100}]})
    req = http_request(bport, f"/v1/topics/{TOPIC}1/messages", body)
    bare_req = http_request(bare_port, "/bare", body)
    # Alternate short slices so that load from other jobs hits both sides alike.
    slice_s, done, bare_done = args.duration / 4, 0, 0
    for _ in range(4):
        done += sum(r["requests"] for r in in_processes(args.clients, http_load, bport, req, slice_s,
                                                         args.connections))
        bare_done += sum(r["requests"] for r in in_processes(args.clients, http_load, bare_port, bare_req,
                                                              slice_s, args.connections))
    broker, bare = done / args.duration, bare_done / args.duration
    report(rec, Measure("broker.produce_single", "HTTP single-message produce", broker, "req/s",
                        peer="bare FastAPI route", peer_value=bare, targets=(Target(">=", 0.6, "ratio"),)))
    return broker


def phase_sync(rec: Recorder, args: argparse.Namespace, tmp: Path, async_port: int) -> None:
    """32 concurrent single-message producers against a SYNC-flush broker vs fdatasync per message,
    and vs the same load on the ASYNC broker (the ceiling with no disk wait at all)."""
    rec.phase(f"SYNC flush, 32 HTTP producers vs fdatasync per message ({args.duration:g} s each)")
    proc, port = start_broker(tmp / "sync", "sync")
    body = orjson.dumps({"messages": [{"body": "x" * 100}]})
    req, areq = (http_request(p, f"/v1/topics/{TOPIC}s/messages", body) for p in (port, async_port))
    try:
        for p, r in ((port, req), (async_port, areq)):
            in_processes(2, http_load, p, r, 0.5, 16)  # creates the topic, warms up
        slice_s, done, peer, ceiling = args.duration / 4, 0, 0, 0
        for _ in range(4):
            peer += fdatasync_peer(tmp / "peer.log", slice_s)
            done += sum(r["requests"] for r in in_processes(2, http_load, port, req, slice_s, 16))
            ceiling += sum(r["requests"] for r in in_processes(2, http_load, async_port, areq, slice_s, 16))
        store = orjson.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/broker", timeout=10).read())["store"]
    finally:
        stop(proc)
    rate = done / args.duration
    details = {"load_1m": os.getloadavg()[0], "requests_per_fdatasync": (done + 0.0) / max(1, store["flushes"]),
               "largest_group_commit": store.get("largest_group_commit", 0)}  # warm-up requests not counted
    report(rec, Measure("broker.sync_single", "HTTP single produce, SYNC flush, 32 producers", rate, "msg/s",
                        peer="fdatasync per 200 B write", peer_value=peer / args.duration,
                        targets=(Target(">=", 10.0, "ratio"),), details=details))
    print(f"  {details['requests_per_fdatasync']:.1f} requests per fdatasync, largest group "
          f"{details['largest_group_commit']} produce groups, load {details['load_1m']:.1f}")
    report(rec, Measure("broker.sync_vs_async", "HTTP single produce, SYNC flush, 32 producers", rate, "msg/s",
                        peer=f"the same load, {args.flush_mode} flush broker", peer_value=ceiling / args.duration))


def phase_pull(rec: Recorder, bport: int, rport: int | None, skipped: str | None) -> None:
    rec.phase("Arrow pull of everything produced")
    n, seconds = pull_arrow_all(bport, TOPIC, QUEUES)
    broker = n / seconds
    redis = None
    if rport is not None:
        rec.phase("Redis XREADGROUP of everything added")
        rn, rseconds = redis_read_all(rport, TOPIC)
        redis = rn / rseconds
    report(rec, Measure("broker.pull_arrow", "HTTP pull, Arrow pages of 10,000", broker, "msg/s",
                        peer="Redis XREADGROUP COUNT 1000", peer_value=redis, peer_skipped=skipped,
                        targets=(Target(">=", 2.0, "ratio"),), details={"messages": n}))


def phase_latency(rec: Recorder, args: argparse.Namespace, bport: int) -> None:
    rec.phase(f"produce -> long-poll latency at 1,000 msg/s ({args.duration:g} s)")
    lat = longpoll_latency(bport, f"{TOPIC}-lat", 1000, args.duration)
    what = "produce → long-poll receive at 1,000 msg/s"
    rec.add(Measure("broker.longpoll_p50", f"{what}, p50", lat["p50_ms"], "ms", details=lat))
    rec.add(Measure("broker.longpoll_p99", f"{what}, p99", lat["p99_ms"], "ms",
                    targets=(Target("<=", 10.0),), details=lat))
    print(f"{'produce -> long-poll latency':<34} p50 {lat['p50_ms']:.2f} ms  p99 {lat['p99_ms']:.2f} ms  "
          f"max {lat['max_ms']:.2f} ms  ({lat['n']} msgs at 1,000 msg/s)", flush=True)


def phase_soak(rec: Recorder, args: argparse.Namespace, bport: int, pid: int, rate: float) -> None:
    rec.phase(f"soak: single produce at half rate ({args.soak_s:g} s)")
    body = orjson.dumps({"messages": [{"body": "x" * 100}]})
    req = http_request(bport, f"/v1/topics/{TOPIC}-soak/messages", body)
    in_processes(1, http_load, bport, req, 5.0, 2, rate / 2)  # warm-up
    before = proc_stats(pid)
    (res,) = in_processes(1, http_load, bport, req, args.soak_s, 4, rate / 2)
    time.sleep(2)
    after = proc_stats(pid)
    achieved = res["requests"] / args.soak_s
    refused = {k: v for k, v in res.items() if k != "requests"} or "none"
    rec.add(Measure("broker.soak_memory", f"soak {args.soak_s:.0f} s at half rate: anonymous memory growth",
                    (after["rss_anon_kb"] - before["rss_anon_kb"]) / 1024, "MiB", targets=(Target("<=", 50.0),),
                    details={"before": before, "after": after, "req_per_s": achieved, "refused": refused}))
    print(f"soak {args.soak_s:.0f} s at {achieved:,.0f} req/s (non-200 answers: {refused}): anon memory "
          f"{before['rss_anon_kb'] / 1024:.1f} -> {after['rss_anon_kb'] / 1024:.1f} MiB, "
          f"threads {before['threads']} -> {after['threads']}, fds {before['fds']} -> {after['fds']}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per phase")
    parser.add_argument("--clients", type=int, default=2, help="client processes")
    parser.add_argument("--connections", type=int, default=8, help="connections per client process")
    parser.add_argument("--flush-mode", default="async", choices=["async", "sync"])
    parser.add_argument("--soak-s", type=float, default=0.0, help="memory soak length (0 = skip)")
    parser.add_argument("--no-redis", action="store_true", help="skip the Redis peer")
    parser.add_argument("--phases", default="batch,single,pull,latency,sync",
                        help="comma-separated subset of batch,single,pull,latency,sync (pull needs batch)")
    parser.add_argument("--json-out", default=None, help="also write the results as JSON (for sparkmq bench)")
    parser.add_argument("--bare-server", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.bare_server:
        run_bare_server(args.bare_server)
        return
    run(args)


def run(args: argparse.Namespace) -> None:
    options = {k: v for k, v in vars(args).items() if k not in ("json_out", "bare_server")}
    rec = Recorder("broker", args.json_out, options)
    tmp = Path(tempfile.mkdtemp(prefix="bench-broker-"))
    procs: list[subprocess.Popen[bytes] | None] = []
    try:
        rec.phase("starting the broker, the bare route and redis-server")
        broker, bport = start_broker(tmp / "data", args.flush_mode)
        procs.append(broker)
        bare, bare_port = start_bare()
        procs.append(bare)
        redis = None if args.no_redis else start_redis(tmp)
        procs.append(redis[0] if redis else None)
        rport = redis[1] if redis else None
        skipped = None if redis else ("--no-redis" if args.no_redis else REDIS_MISSING)
        print(f"sparkmq broker bench: {os.cpu_count()} cores, {args.duration:g} s per phase, "
              f"{args.clients} client processes, flush {args.flush_mode}", flush=True)
        run_phases(rec, args, (broker, bport, bare_port, rport), skipped)
        if "sync" in args.phases.split(","):
            phase_sync(rec, args, tmp, bport)
    finally:
        for proc in procs:
            stop(proc)
        shutil.rmtree(tmp, ignore_errors=True)
    rec.write()


def run_phases(rec: Recorder, args: argparse.Namespace,
               servers: tuple[subprocess.Popen[bytes], int, int, int | None], skipped: str | None) -> None:
    broker, bport, bare_port, rport = servers
    phases = set(args.phases.split(","))
    if "batch" in phases:
        phase_batch_produce(rec, args, bport, rport, skipped)
    rate = phase_single_produce(rec, args, bport, bare_port) if "single" in phases or args.soak_s > 0 else 0.0
    if "pull" in phases:
        phase_pull(rec, bport, rport, skipped)
    if "latency" in phases:
        phase_latency(rec, args, bport)
    if args.soak_s > 0:
        phase_soak(rec, args, bport, broker.pid, rate)


if __name__ == "__main__":
    main()
