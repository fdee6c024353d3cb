"""Broker under load: long-poll latency next to a heavy producer, and memory over a large volume.

    python benchmarks/bench_broker_load.py --duration 10 --gigabytes 1
    python benchmarks/bench_broker_load.py --gigabytes 10 --json-out r.json   # the issue's 10 GB

Phases, each in one run against one broker (ASYNC flush, no mirror):

* latency: 1,000 msg/s produced one per request (body = send time) while a consumer long-polls
  queue 0; p50/p99 produce -> receive, first alone, then while a second client produces
  50,000 msg/s to another topic in Arrow batches of 1,000 x 100 B (the same run, so the
  ratio of the two p99s shows what the load costs on this machine)
* memory: ``--gigabytes`` GB produced through the broker in Arrow batches of 1,000 x 1 KiB
  (4 connections); the broker's resident memory sampled every 0.2 s.  Anonymous memory is
  what the broker holds; file-backed pages are the mapped CommitLog (page cache).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.bench_broker import ARROW, _arrow_batch, http_request, start_broker, start_redis, stop
from benchmarks.bench_broker_clients import (http_load, http_send_count, longpoll_latency, redis_latency,
                                             redis_xadd_paced)
from benchmarks.results import Measure, Recorder, Target

LOAD_RATE = 50_000  # background messages per second, in batches of 1,000


def _loaded(port: int, topic: str, duration: float, answer: str) -> tuple[dict[str, Any], float]:
    """Long-poll latency next to LOAD_RATE msg/s of Arrow batches whose answers are ``answer``."""
    query = "" if answer == "full" else f"?answer={answer}"
    req = http_request(port, f"/v1/topics/load/messages{query}", _arrow_batch(1000, 100), ARROW)
    with mp.get_context("spawn").Pool(1) as pool:
        background = pool.apply_async(http_load, (port, req, duration + 4, 4, LOAD_RATE / 1000))
        time.sleep(1.0)
        loaded = longpoll_latency(port, topic, 1000, duration)
        counts = background.get(duration + 120)
    return {**loaded, "background_answers": counts}, counts["requests"] * 1000 / (duration + 4)


def _redis_loaded(rport: int, duration: float) -> dict[str, float]:
    """The peer: XADD one at a time at 1,000/s read by XREAD BLOCK, next to LOAD_RATE XADD/s pipelined 50."""
    with mp.get_context("spawn").Pool(1) as pool:
        background = pool.apply_async(redis_xadd_paced, (rport, "load", 50, duration + 4, 100, LOAD_RATE))
        time.sleep(1.0)
        lat = redis_latency(rport, "lat", 1000, duration)
        added = background.get(duration + 120)
    return {**lat, "background_msg_per_s": added / (duration + 4)}


def phase_latency(rec: Recorder, port: int, duration: float, answers: list[str], rport: int | None) -> None:
    rec.phase(f"long-poll latency at 1,000 msg/s, alone ({duration:g} s)")
    alone = longpoll_latency(port, "lat-alone", 1000, duration)
    what = "produce → long-poll receive at 1,000 msg/s"
    rec.add(Measure("broker.longpoll_p99_alone", f"{what}, p99, no other load", alone["p99_ms"], "ms",
                    details=alone))
    print(f"long-poll p99 {alone['p99_ms']:.2f} ms alone (p50 {alone['p50_ms']:.2f} ms)", flush=True)
    redis = None
    if rport is not None:
        rec.phase(f"Redis XREAD BLOCK latency at 1,000 msg/s next to {LOAD_RATE:,} XADD/s ({duration:g} s)")
        redis = _redis_loaded(rport, duration)
        print(f"Redis XREAD BLOCK p99 {redis['p99_ms']:.2f} ms next to {redis['background_msg_per_s']:,.0f} "
              f"msg/s (p50 {redis['p50_ms']:.2f} ms)", flush=True)
    for answer in answers:
        rec.phase(f"long-poll latency at 1,000 msg/s next to {LOAD_RATE:,} msg/s of Arrow batches, "
                  f"answer={answer} ({duration:g} s)")
        loaded, achieved = _loaded(port, f"lat-{answer}", duration, answer)
        name = "broker.longpoll_p99_loaded" + ("" if answer == "full" else f"_{answer}")
        rec.add(Measure(name, f"{what}, p99, next to {LOAD_RATE:,} msg/s in batches (answer={answer})",
                        loaded["p99_ms"], "ms", peer="Redis XREAD BLOCK p99 next to the same XADD load",
                        peer_value=None if redis is None else redis["p99_ms"], targets=(Target("<=", 10.0),),
                        details={**loaded, "background_msg_per_s": achieved, "redis": redis,
                                 "load_1m": os.getloadavg()[0]}))
        print(f"long-poll p99 {loaded['p99_ms']:.2f} ms next to {achieved:,.0f} msg/s with answer={answer} "
              f"(p50 {loaded['p50_ms']:.2f} ms, max {loaded['max_ms']:.1f} ms; load average "
              f"{os.getloadavg()[0]:.1f})", flush=True)


def _memory(pid: int) -> dict[str, int]:
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return {k: int(fields[k].split()[0]) // 1024 for k in ("VmRSS", "RssAnon", "RssFile")}


def phase_memory(rec: Recorder, port: int, pid: int, gigabytes: float) -> None:
    requests = max(1, int(gigabytes * (1 << 30) / (1000 * 1024)))
    rec.phase(f"memory: {requests * 1000 * 1024 / 1e9:.1f} GB produced in Arrow batches of 1,000 x 1 KiB")
    peak: dict[str, int] = _memory(pid)
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.2):
            for k, v in _memory(pid).items():
                peak[k] = max(peak[k], v)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    req = http_request(port, "/v1/topics/volume/messages", _arrow_batch(1000, 1024), ARROW)
    t0 = time.perf_counter()
    ctx = mp.get_context("spawn")
    with ctx.Pool(2) as pool:
        parts = pool.starmap(http_send_count, [(port, req, requests // 2 + i * (requests % 2), 2) for i in range(2)])
    seconds = time.perf_counter() - t0
    done.set()
    sampler.join()
    answers: dict[str, Any] = {}
    for part in parts:
        for k, v in part.items():
            answers[k] = answers.get(k, 0) + v
    gb = answers["requests"] * 1000 * 1024 / 1e9
    rec.add(Measure("broker.rss_anon_peak", f"broker anonymous memory, peak, while producing {gb:.1f} GB "
                    "(ASYNC flush)", peak["RssAnon"], "MiB", targets=(Target("<=", 1024.0),),
                    details={"peak_mib": peak, "answers": answers, "seconds": seconds, "gb_per_s": gb / seconds}))
    print(f"memory: {gb:.1f} GB in {seconds:.1f} s ({gb / seconds * 1000:.0f} MB/s, answers {answers}); peak "
          f"RssAnon {peak['RssAnon']} MiB, RssFile {peak['RssFile']} MiB (mapped CommitLog), VmRSS "
          f"{peak['VmRSS']} MiB", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=10.0, help="seconds of each latency run")
    parser.add_argument("--gigabytes", type=float, default=1.0, help="volume of the memory phase (0 = skip)")
    parser.add_argument("--phases", default="latency,memory", help="comma-separated subset of latency,memory")
    parser.add_argument("--background-answer", default="full,summary",
                        help="answer forms of the background batches, one loaded run each (full, summary)")
    parser.add_argument("--no-redis", action="store_true", help="skip the Redis latency peer")
    parser.add_argument("--json-out", default=None, help="also write the results as JSON (for sparkmq bench)")
    args = parser.parse_args()
    if not 0 <= args.gigabytes <= 100:
        parser.error("--gigabytes must be between 0 and 100")
    rec = Recorder("broker_load", args.json_out, {k: v for k, v in vars(args).items() if k != "json_out"})
    tmp = Path(tempfile.mkdtemp(prefix="bench-broker-load-"))
    broker = redis = None
    try:
        rec.phase("starting the broker")
        broker, port = start_broker(tmp / "data", "async")
        phases = set(args.phases.split(","))
        if "latency" in phases:
            redis = None if args.no_redis else start_redis(tmp)
            answers = [a for a in args.background_answer.split(",") if a]
            phase_latency(rec, port, args.duration, answers, redis[1] if redis else None)
        if "memory" in phases and args.gigabytes > 0:
            phase_memory(rec, port, broker.pid, args.gigabytes)
    finally:
        stop(broker)
        stop(redis[0] if redis else None)
        shutil.rmtree(tmp, ignore_errors=True)
    rec.write()


if __name__ == "__main__":
    main()
