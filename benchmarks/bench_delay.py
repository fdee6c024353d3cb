"""Delay benchmark: timer messages enqueued and delivered while ``--pending`` timers wait.

    python -m benchmarks.bench_delay --pending 1000000 --due 100000   # the README's figures
    python -m benchmarks.bench_delay --pending 20000 --due 5000       # quick

One real broker (``python -m broker_api serve``, Delta mirror off, default
``[delay]``: 500 ms timer slots, 100 ms polls) on 127.0.0.1.  Measured:

* enqueue: ``--pending`` 100-byte messages with ``deliver_at_ms`` two hours ahead
  (1000 per request, one client), msg/s;
* delivery: then ``--due`` messages all due at one instant a little later; from
  that instant until the last of them is in its topic (the timer wheel finds
  the due slot, the deliverer re-puts each message and records its progress),
  msg/s, with the ``--pending`` timers still waiting in the wheel.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.bench_ha import running_broker  # noqa: E402
from benchmarks.results import Measure, Recorder  # noqa: E402

BODY = "x" * 100
QUEUES = 4


def enqueue(c: httpx.Client, topic: str, n: int, due_ms: int) -> float:
    """msg/s of producing ``n`` timer messages due at ``due_ms``."""
    began = time.perf_counter()
    for at in range(0, n, 1000):
        msgs = [{"body": BODY, "deliver_at_ms": due_ms} for _ in range(min(1000, n - at))]
        c.post(f"/v1/topics/{topic}/messages", json={"messages": msgs}).raise_for_status()
    return n / (time.perf_counter() - began)


def delivered(c: httpx.Client, topic: str) -> int:
    return sum(q["max_offset"] for q in c.get(f"/v1/topics/{topic}/queues").json())


def deliver(c: httpx.Client, n: int, enqueue_rate: float, timeout_s: float) -> tuple[float, float]:
    """(msg/s from the due instant to the last delivery, seconds that took) for ``n`` messages due at once."""
    lead_s = max(3.0, 4 * n / enqueue_rate)  # other work on the machine can slow the enqueue
    due_ms = int((time.time() + lead_s) * 1000)
    enqueue(c, "due", n, due_ms)
    if time.time() * 1000 >= due_ms:
        raise RuntimeError("enqueueing the due messages took longer than their lead; the rate would be wrong")
    deadline = time.monotonic() + lead_s + timeout_s
    while (got := delivered(c, "due")) < n:
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {got} of {n} due messages delivered after {timeout_s} s past due")
        time.sleep(0.02)
    took = time.time() - due_ms / 1000
    return n / took, took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pending", type=int, default=1_000_000, help="timer messages left waiting (2 h ahead)")
    parser.add_argument("--due", type=int, default=100_000, help="timer messages due at one instant")
    parser.add_argument("--timeout-s", type=float, default=300.0, help="longest wait for the due messages")
    parser.add_argument("--json-out", default=None, help="also write the results as JSON (for sparkmq bench)")
    args = parser.parse_args()
    rec = Recorder("delay", args.json_out, vars(args))
    with running_broker("sparkmq-delay-") as c:
        for topic in ("pending", "due"):
            c.post("/v1/topics", json={"name": topic, "queues": QUEUES}).raise_for_status()
        rec.phase(f"enqueue {args.pending} timer messages")
        rate = enqueue(c, "pending", args.pending, int((time.time() + 7200) * 1000))
        rec.phase(f"deliver {args.due} due messages")
        out_rate, took = deliver(c, args.due, rate, args.timeout_s)
        if delivered(c, "pending"):
            raise RuntimeError("a timer message was delivered two hours early")
    rec.add(Measure("broker.timer_enqueue", f"timer messages enqueued (deliver_at_ms), 1000 per request, "
                    f"{args.pending:,} pending at the end", round(rate), "msg/s"))
    rec.add(Measure("broker.timer_deliver", f"timer messages delivered: {args.due:,} due at once, last one "
                    f"{took:.2f} s after due, {args.pending:,} others pending", round(out_rate), "msg/s",
                    details={"seconds_after_due": round(took, 3)}))
    for m in rec.measures:
        print(f"{m.what}: {m.value:,} {m.unit}", flush=True)
    rec.write()


if __name__ == "__main__":
    main()
