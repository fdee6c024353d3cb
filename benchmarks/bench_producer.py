"""The asynchronous Producer (issue 34) next to the bulk Arrow produce it builds on, and its latency.

    python -m benchmarks.bench_producer [--rows 1000000] [--rate 10000] [--seconds 5] [--spin]
                                        [--switch-interval-ms MS] [--json-out PATH]

One broker on 127.0.0.1 (no Delta mirror), topic of 4 queues, 100-byte bodies:

1. throughput: ``--rows`` messages from one Python process with
   ``Producer.send(topic, body, queue_id=i % 4)`` and one ``flush`` (every
   message acknowledged), next to ``benchmarks.bench_spark.produce_bulk``
   (Arrow IPC requests of 10,000 rows, one at a time) in the same run;
2. latency: sends paced at ``--rate`` msg/s for ``--seconds`` with
   ``linger_ms=5``, in 1 ms ticks (the messages due in a tick go in one
   burst, timed each); send-to-ack time of every message (its callback), p50
   and p99 (goal: p99 <= 20 ms at 10k msg/s), and the same split into stages
   (send -> batch taken by a sender -> posted -> answered -> callback) with
   their mean over the slowest 1 %; the sending process's garbage
   collections per generation (each stops every thread of the process) and
   how much of them fell inside a slowest-1 % message's wait; the CPU the
   sending process used; and the broker's own produce-handler times (its
   ``sparkmq_produce_latency_seconds``) over the same requests.  The loop
   keeps one future per batch (for its stages), not one per message: a list
   of 50,000 futures would itself make the collector's passes longer and more
   frequent, and time them into the figures it measures.  ``--spin`` makes
   the sending thread compute between sends (it then holds the interpreter
   lock but for the switch interval, ``--switch-interval-ms``).

Every figure carries the machine's load average (``os.getloadavg``) at its end.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from benchmarks.bench_spark import QUEUES, VALUE, produce_bulk, start_broker
from benchmarks.results import Measure, Recorder, Target
from broker_api.client import Producer, SendFuture

__all__ = ["producer_latency", "producer_rate"]

_TICK_S = 0.001


def _load() -> str:
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def producer_rate(url: str, topic: str, rows: int, **options: Any) -> float:
    """``rows`` x 100 B through one Producer (explicit queue ``i % 4``) until all are acknowledged; msg/s."""
    body = b"v" * VALUE
    failed: list[BaseException] = []
    with Producer(url, **options) as p:
        p.send(topic, body).result(60)  # the topic's queues are known before the clock starts
        send = p.send
        started = time.perf_counter()
        for i in range(rows):
            send(topic, body, queue_id=i & 3)
        left = p.flush(600)
        elapsed = time.perf_counter() - started
        if left:
            failed.append(RuntimeError(f"{left} messages not acknowledged after 600 s"))
    if failed:
        raise failed[0]
    return rows / elapsed


def producer_latency(url: str, topic: str, rate: int, seconds: float, linger_ms: float = 5.0,
                     spin: bool = False) -> dict[str, float]:
    """Sends paced at ``rate`` msg/s; send-to-ack milliseconds (p50, p99, max), failures, and the
    p50/p99 of each stage (``SendFuture.stages``): send -> batch taken by a sender (linger, or a
    wait behind its queue's request in flight), taken -> posted (Arrow built), posted -> answered
    (the HTTP round trip), answered -> callback."""
    body = b"v" * VALUE
    n = int(rate * seconds)
    sent_at = np.zeros(n)
    acked_at = np.zeros(n)
    errors: list[BaseException] = []

    def on_ack(i: int) -> Any:
        def done(_result: Any, error: BaseException | None) -> None:
            acked_at[i] = time.monotonic()
            if error is not None:
                errors.append(error)
        return done

    firsts: list[SendFuture] = []  # the first future of each batch (its stages are the batch's)
    which = np.zeros(n, np.int64)  # message -> index into firsts
    known: dict[int, int] = {}
    pauses: list[tuple[int, float, float]] = []  # (generation, start, stop) of every collection while sending
    began = [0.0]

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            began[0] = time.monotonic()
        else:
            pauses.append((info["generation"], began[0], time.monotonic()))

    with Producer(url, linger_ms=linger_ms) as p:
        p.send(topic, body).result(60)
        gc.callbacks.append(on_gc)
        started = time.monotonic()
        cpu = time.process_time()
        for i in range(n):
            if (ahead := started + i / rate - time.monotonic()) > 0:
                if spin:  # an application thread that computes between sends, never sleeping
                    while time.monotonic() - started < i / rate:
                        sum(range(50))
                else:
                    time.sleep(max(ahead, _TICK_S))  # 1 ms ticks: the messages due meanwhile go in one burst
            sent_at[i] = time.monotonic()
            future = p.send(topic, body, callback=on_ack(i))
            at = known.get(id(future[0]))
            if at is None:
                at = known[id(future[0])] = len(firsts)
                firsts.append(future)
            which[i] = at
        p.flush(60)
        gc.callbacks.remove(on_gc)
        cpu = time.process_time() - cpu
    elapsed = time.monotonic() - started
    achieved = n / elapsed
    stages = np.array([[s["taken"], s["posted"], s["answered"]] for s in (f.stages() for f in firsts)])[which]
    total = (acked_at - sent_at) * 1000
    out = _percentiles("", total)
    split = {"to_taken": stages[:, 0] - sent_at, "to_posted": stages[:, 1] - stages[:, 0],
             "round_trip": stages[:, 2] - stages[:, 1], "to_callback": acked_at - stages[:, 2]}
    tail = total >= out["p99_ms"]  # the slowest 1 %: what their time went to (mean ms per stage)
    for name, s in split.items():
        out.update(_percentiles(name + "_", s * 1000))
        out[name + "_tail_ms"] = float(s[tail].mean() * 1000)
    out.update(_gc_figures(pauses, sent_at[tail], acked_at[tail]))
    return {**out, "failed": len(errors), "achieved_rate": achieved, "requests": len(firsts),
            "client_cpu": cpu / elapsed}


def _gc_figures(pauses: list[tuple[int, float, float]], tail_from: np.ndarray, tail_to: np.ndarray) -> dict[str, float]:
    """Collections per generation (count, longest ms, total ms) and the mean collection time
    inside a tail message's send-to-ack window (``gc_in_tail_ms``)."""
    out: dict[str, float] = {}
    for gen in (0, 1, 2):
        ms = [(stop - start) * 1000 for g, start, stop in pauses if g == gen]
        out[f"gc{gen}_count"], out[f"gc{gen}_longest_ms"] = len(ms), max(ms, default=0.0)
        out[f"gc{gen}_total_ms"] = sum(ms)
    inside = np.zeros(len(tail_from))
    for _g, start, stop in pauses:
        inside += np.clip(np.minimum(stop, tail_to) - np.maximum(start, tail_from), 0.0, None)
    out["gc_in_tail_ms"] = float(inside.mean() * 1000) if len(inside) else 0.0
    return out


def _broker_produce_buckets(url: str) -> dict[str, float]:
    """The broker's produce-latency histogram (cumulative count per bucket bound, seconds as text)."""
    text = httpx.get(f"{url}/metrics", timeout=30).text
    prefix = 'sparkmq_produce_latency_seconds_bucket{le="'
    return {line[len(prefix):line.index('"', len(prefix))]: float(line.rsplit(" ", 1)[1])
            for line in text.splitlines() if line.startswith(prefix)}


def _broker_share(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """Requests the broker handled between two histograms, and the share over 5, 10 and 25 ms
    (its handler's time: from the request's arrival in the route to its answer)."""
    def count(le: str) -> float:
        return after.get(le, 0.0) - before.get(le, 0.0)
    n = count("+Inf")
    return {"broker_requests": n, **{f"broker_over_{ms}ms": (n - count(le)) / n if n else 0.0
                                     for ms, le in ((5, "0.005"), (10, "0.01"), (25, "0.025"))}}


def _percentiles(prefix: str, ms: np.ndarray) -> dict[str, float]:
    return {f"{prefix}p50_ms": float(np.percentile(ms, 50)), f"{prefix}p99_ms": float(np.percentile(ms, 99)),
            f"{prefix}max_ms": float(ms.max())}


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000, help="messages for the throughput rows (100 B each)")
    ap.add_argument("--rate", type=int, default=10_000, help="paced send rate for the latency row, msg/s")
    ap.add_argument("--seconds", type=float, default=5.0, help="how long the latency row sends")
    ap.add_argument("--spin", action="store_true",
                    help="latency row: the sending thread computes between sends instead of sleeping")
    ap.add_argument("--switch-interval-ms", type=float, default=None,
                    help="sys.setswitchinterval for this process (default: Python's, 5 ms)")
    ap.add_argument("--json-out", default=None)
    args = ap.parse_args()
    if args.switch_interval_ms is not None:
        sys.setswitchinterval(args.switch_interval_ms / 1000)
    rec = Recorder("producer", args.json_out, {"rows": args.rows, "rate": args.rate, "seconds": args.seconds,
                                          "spin": args.spin, "switch_interval_ms": sys.getswitchinterval() * 1000})
    with tempfile.TemporaryDirectory(prefix="bench-producer-") as d:
        rec.phase("starting a sparkmq broker")
        proc, url = start_broker(Path(d) / "data")
        try:
            run(rec, url, args)
        finally:
            proc.terminate()
            proc.wait(30)
    rec.write()


def run(rec: Recorder, url: str, args: argparse.Namespace) -> None:
    for topic in ("warm", "producer", "bulk", "latency"):
        httpx.post(f"{url}/v1/topics", json={"name": topic, "queues": QUEUES}, timeout=30)
    rec.phase("warm-up")
    producer_rate(url, "warm", max(1_000, args.rows // 10))
    produce_bulk(url, "warm", max(1_000, args.rows // 10))
    rec.phase(f"Producer: {args.rows:,} x {VALUE} B")
    rate = producer_rate(url, "producer", args.rows)
    load = _load()
    rec.phase(f"bulk Arrow produce: {args.rows:,} x {VALUE} B")
    bulk = produce_bulk(url, "bulk", args.rows)
    print(f"Producer.send + flush : {rate:>10,.0f} msg/s\nbulk Arrow produce     : {bulk:>10,.0f} msg/s; "
          f"Producer / bulk = {rate / bulk:.2f}x ({load}; after bulk {_load()})")
    rec.add(Measure("producer.throughput", f"Producer.send of {args.rows:,} x 100 B over 4 queues from one Python "
                    "process, until all acknowledged", rate, "msg/s",
                    peer="bulk Arrow produce (10k rows per request, one in flight)", peer_value=bulk,
                    details={"load": load}))
    rec.phase(f"latency: {args.rate:,} msg/s for {args.seconds:g} s, linger_ms 5"
              + (", a sending thread that never sleeps" if args.spin else "")
              + f", switch interval {sys.getswitchinterval() * 1000:g} ms")
    before = _broker_produce_buckets(url)
    lat = producer_latency(url, "latency", args.rate, args.seconds, spin=args.spin)
    load = _load()
    lat.update(_broker_share(before, _broker_produce_buckets(url)))
    print(f"send-to-ack at {lat['achieved_rate']:,.0f} msg/s: p50 {lat['p50_ms']:.1f} ms, p99 {lat['p99_ms']:.1f} ms, "
          f"max {lat['max_ms']:.1f} ms, {lat['failed']} failed, {lat['requests']:,} requests, the sending process "
          f"busy {lat['client_cpu']:.0%} of a core ({load})")
    print("  stage        :    p50,    p99; mean in the slowest 1 %")
    for stage in ("to_taken", "to_posted", "round_trip", "to_callback"):
        print(f"  {stage:<12}: {lat[stage + '_p50_ms']:6.1f}, {lat[stage + '_p99_ms']:6.1f}; "
              f"{lat[stage + '_tail_ms']:6.1f} ms")
    print("  garbage collections of the sending process (each stops every thread): "
          + "; ".join(f"gen {g} x{lat[f'gc{g}_count']:.0f} longest {lat[f'gc{g}_longest_ms']:.1f} ms "
                      f"total {lat[f'gc{g}_total_ms']:.0f} ms" for g in (0, 1, 2))
          + f"; inside a slowest-1 % message's wait: {lat['gc_in_tail_ms']:.1f} ms mean")
    print(f"  the broker's produce handler (sparkmq_produce_latency_seconds, {lat['broker_requests']:.0f} requests): "
          f"{lat['broker_over_5ms']:.1%} over 5 ms, {lat['broker_over_10ms']:.1%} over 10 ms, "
          f"{lat['broker_over_25ms']:.1%} over 25 ms")
    rec.add(Measure("producer.latency_p99", f"Producer send-to-ack p99 at {args.rate:,} msg/s, linger_ms 5",
                    lat["p99_ms"], "ms", targets=(Target("<=", 20.0),), details={**lat, "load": load}))


if __name__ == "__main__":
    main()
