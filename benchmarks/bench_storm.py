"""Storm benchmark: a broker with default settings under more load than it can take.

    python -m benchmarks.bench_storm --duration 20                 # both storms, 20 s each
    python -m benchmarks.bench_storm --duration 5 --connections 200 --arrow-connections 8   # small

Storms, one after the other against one broker (default settings, Delta mirror off):

* single produce: ``--connections`` keep-alive connections (1000) each POST one
  100-byte message, then the next, for ``--duration`` s (no back-off: the worst case);
* Arrow bulk: ``--arrow-connections`` connections (24) each POST 10 MB Arrow
  requests (100-byte messages) for ``--duration`` s.

Reported per storm: answered (200), refused (503/429), timed out (no answer within
10 s), produce latency p50/p99/p99.9/max, ``/healthz`` p99 and max on the control
listener and on the main port (a fresh connection every 50 ms, like a probe),
``/v1/broker`` max, the broker's anonymous memory peak and 10 s after the storm,
and checks: the rejection counter equals the clients' refusals, and every
acknowledged message is stored (stored - acknowledged <= timed out).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.bench_broker import free_port, stop, wait_port  # noqa: E402
from benchmarks.bench_broker_clients import ARROW, _read_response  # noqa: E402
from benchmarks.results import Measure, Recorder, Target  # noqa: E402

TOPIC = "storm"
TIMEOUT_S = 10.0
_READY = re.compile(r"control .*? on http://(?P<addr>[\d.]+:\d+)")


def _pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


# -- clients (in their own processes) ------------------------------------------------


async def _storm_conn(port: int, request: bytes, stop_at: float, out: dict[str, Any]) -> None:
    reader = writer = None
    while time.monotonic() < stop_at:
        try:
            if writer is None:
                reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), TIMEOUT_S)
            assert reader is not None and writer is not None
            sent = time.monotonic()
            writer.write(request)
            status, _, _ = await asyncio.wait_for(_read_response(reader), TIMEOUT_S)
        except (TimeoutError, OSError, asyncio.IncompleteReadError):
            out["timed_out"] += 1
            if writer is not None:
                writer.close()
            reader = writer = None
            continue
        took = (time.monotonic() - sent) * 1000
        if status == 200:
            out["answered"] += 1
            out["lat"].append(took)
        elif status in (503, 429):
            out["refused"] += 1
            out["refused_lat"].append(took)
        else:
            out["other"] += 1
    if writer is not None:
        writer.close()


def _storm_process(port: int, request: bytes, connections: int, duration: float, q: Any) -> None:
    out: dict[str, Any] = {"answered": 0, "refused": 0, "timed_out": 0, "other": 0, "lat": [], "refused_lat": []}

    async def main() -> None:
        stop_at = time.monotonic() + duration
        await asyncio.gather(*(_storm_conn(port, request, stop_at, out) for _ in range(connections)))

    asyncio.run(main())
    q.put(out)


def _probe(port: int, path: str, stop_at: float, out: list[float]) -> None:
    """A fresh connection per request, like a load balancer's health check."""
    import socket

    req = f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode()
    while time.monotonic() < stop_at:
        started = time.monotonic()
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=15) as s:
                s.sendall(req)
                while s.recv(65536):
                    pass
            out.append((time.monotonic() - started) * 1000)
        except OSError:
            out.append(15_000.0)
        time.sleep(max(0.0, 0.05 - (time.monotonic() - started)))


def _anon_mib(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


# -- one storm ---------------------------------------------------------------------


def _request(body: bytes, ctype: str) -> bytes:
    return (f"POST /v1/topics/{TOPIC}/messages HTTP/1.1\r\nHost: x\r\nContent-Type: {ctype}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


def _arrow_body(total_bytes: int, size: int = 100) -> bytes:
    import pyarrow as pa

    n = total_bytes // size
    table = pa.table({"body": pa.array([b"x" * size] * n, pa.binary())})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def storm(port: int, admin: int | None, pid: int, request: bytes, connections: int, duration: float,
          processes: int, settle_s: float = 10.0) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    per = [connections // processes + (1 if i < connections % processes else 0) for i in range(processes)]
    procs = [ctx.Process(target=_storm_process, args=(port, request, n, duration, q)) for n in per if n]
    for p in procs:
        p.start()
    stop_at = time.monotonic() + duration + 2
    probes: dict[str, list[float]] = {"healthz_main": [], "healthz_control": [], "broker_control": []}
    threads = [threading.Thread(target=_probe, args=(port, "/healthz", stop_at, probes["healthz_main"]))]
    if admin:
        threads += [threading.Thread(target=_probe, args=(admin, "/healthz", stop_at, probes["healthz_control"])),
                    threading.Thread(target=_probe, args=(admin, "/v1/broker", stop_at, probes["broker_control"]))]
    for t in threads:
        t.start()
    peak = 0.0
    while any(p.is_alive() for p in procs) or time.monotonic() < stop_at:
        peak = max(peak, _anon_mib(pid))
        time.sleep(0.1)
        if time.monotonic() > stop_at + duration + 30:
            break
    results = [q.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(30)
    for t in threads:
        t.join(30)
    total: dict[str, Any] = {k: sum(r[k] for r in results) for k in ("answered", "refused", "timed_out", "other")}
    lat = [x for r in results for x in r["lat"]]
    time.sleep(settle_s)  # the broker trims freed memory every 5 s
    total.update(
        p50_ms=_pct(lat, 0.5), p99_ms=_pct(lat, 0.99), p999_ms=_pct(lat, 0.999), max_ms=max(lat, default=0.0),
        refused_p99_ms=_pct([x for r in results for x in r["refused_lat"]], 0.99),
        anon_peak_mib=round(peak, 1), anon_after_mib=round(_anon_mib(pid), 1),
        **{f"{k}_p99_ms": _pct(v, 0.99) for k, v in probes.items()},
        **{f"{k}_max_ms": max(v, default=0.0) for k, v in probes.items()},
    )
    return total


def _rejected_total(port: int) -> float:
    import httpx

    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=30).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("sparkmq_requests_rejected_total{") and 'route="produce"' in line)


def _stored(port: int) -> int:
    import httpx

    queues = httpx.get(f"http://127.0.0.1:{port}/v1/topics/{TOPIC}/queues", timeout=30).json()
    return sum(int(q["max_offset"]) for q in queues)


def start_broker(data_dir: Path, log: Path) -> tuple[subprocess.Popen[bytes], int, int | None, str]:
    port = free_port()
    env = {**os.environ, "SPARKMQ_MIRROR__ENABLED": "false"}
    with open(log, "wb") as f:
        proc = subprocess.Popen([sys.executable, "-m", "broker_api", "serve", "--port", str(port),
                                 "--data-dir", str(data_dir)], cwd=REPO, env=env, stdout=f, stderr=subprocess.STDOUT)
    wait_port(port, proc)
    deadline = time.monotonic() + 30
    ready = ""
    while time.monotonic() < deadline and "ready on" not in ready:
        time.sleep(0.1)
        ready = log.read_text(errors="replace")
    m = _READY.search(ready)
    return proc, port, int(m["addr"].rsplit(":", 1)[1]) if m else None, ready.strip().splitlines()[-1]


def _record(rec: Recorder, name: str, what: str, r: dict[str, Any], acked_before: int, stored: int,
            rejected: float, refused_before: float, single: bool) -> None:
    lost = max(0, acked_before - stored)
    detail = {**r, "stored": stored, "acked": acked_before, "acked_lost": lost,
              "rejection_counter": rejected - refused_before}
    print(f"{name}: {detail}", flush=True)
    rec.add(Measure(f"storm.{name}.unanswered", f"{what}: requests unanswered at 10 s", r["timed_out"], "requests",
                    targets=(Target("<=", 0),) if single else (), details=detail))
    rec.add(Measure(f"storm.{name}.answered", f"{what}: answered 200", r["answered"], "requests"))
    rec.add(Measure(f"storm.{name}.refused", f"{what}: answered 503 (counter {rejected - refused_before:.0f})",
                    r["refused"], "requests"))
    rec.add(Measure(f"storm.{name}.p99", f"{what}: produce p99", r["p99_ms"], "ms"))
    rec.add(Measure(f"storm.{name}.p999", f"{what}: produce p99.9", r["p999_ms"], "ms",
                    targets=(Target("<=", 2000),) if single else ()))
    rec.add(Measure(f"storm.{name}.healthz_p99", f"{what}: /healthz p99 (control listener)",
                    r["healthz_control_p99_ms"], "ms", targets=(Target("<=", 250),) if single else ()))
    rec.add(Measure(f"storm.{name}.healthz_max", f"{what}: /healthz max (control listener)",
                    r["healthz_control_max_ms"], "ms", targets=(Target("<=", 1000),) if single else ()))
    rec.add(Measure(f"storm.{name}.healthz_main_p99", f"{what}: /healthz p99 (main port)",
                    r["healthz_main_p99_ms"], "ms"))
    rec.add(Measure(f"storm.{name}.anon_peak", f"{what}: anonymous memory peak (after: {r['anon_after_mib']} MiB)",
                    r["anon_peak_mib"], "MiB"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=20.0, help="seconds per storm")
    parser.add_argument("--connections", type=int, default=1000, help="single-produce connections")
    parser.add_argument("--arrow-connections", type=int, default=24, help="10 MB Arrow connections")
    parser.add_argument("--arrow-mb", type=float, default=10.0, help="MB per Arrow request")
    parser.add_argument("--processes", type=int, default=2, help="client processes for the single storm")
    parser.add_argument("--settle-s", type=float, default=10.0, help="wait before the after-storm memory reading")
    parser.add_argument("--json-out", default=None, help="also write the results as JSON (for sparkmq bench)")
    args = parser.parse_args()
    rec = Recorder("storm", args.json_out, vars(args))
    with tempfile.TemporaryDirectory(prefix="sparkmq-storm-") as tmp:
        proc, port, admin, ready = start_broker(Path(tmp) / "data", Path(tmp) / "broker.log")
        print(ready, flush=True)
        try:
            single = _request(b'{"messages":[{"body":"' + b"x" * 100 + b'"}]}', "application/json")
            rec.phase(f"single produce storm: {args.connections} connections, {args.duration:.0f} s")
            r = storm(port, admin, proc.pid, single, args.connections, args.duration, args.processes, args.settle_s)
            stored, rejected = _stored(port), _rejected_total(port)
            _record(rec, "single", f"{args.connections} connections, single produce", r, r["answered"], stored,
                    rejected, 0.0, True)
            rec.phase(f"Arrow storm: {args.arrow_connections} connections x {args.arrow_mb:.0f} MB")
            arrow = _request(_arrow_body(int(args.arrow_mb * 1e6)), ARROW)
            r2 = storm(port, admin, proc.pid, arrow, args.arrow_connections, args.duration, 1, args.settle_s)
            rows = int(args.arrow_mb * 1e6) // 100
            _record(rec, "arrow", f"{args.arrow_connections} connections, {args.arrow_mb:.0f} MB Arrow", r2,
                    r2["answered"] * rows, _stored(port) - stored, _rejected_total(port), rejected, False)
        finally:
            stop(proc)
    rec.write()


if __name__ == "__main__":
    main()
