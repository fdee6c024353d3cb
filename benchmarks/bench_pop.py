"""POP benchmark: POP + ack against a plain pull + offset commit of the same messages, in one run.

    python -m benchmarks.bench_pop --messages 200000   # the README's figures
    python -m benchmarks.bench_pop --messages 20000    # quick

One real broker (``python -m broker_api serve``, Delta mirror off) on 127.0.0.1.
``--messages`` 100-byte messages go to a topic of 4 queues; then one client
reads them all twice, one page of ``--batch`` at a time:

* plain pull: ``GET .../queues/{q}/messages`` queue by queue, and a
  ``PUT /v1/groups/pull/offsets`` after each page (at-least-once consumption);
* POP: ``POST /v1/groups/pop/pop`` (any queue, each message with a receipt,
  a checkpoint record per queue popped) and ``POST /v1/groups/pop/ack`` of
  the page's receipts (a done record).
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


def fill(c: httpx.Client, topic: str, n: int) -> None:
    c.post("/v1/topics", json={"name": topic, "queues": QUEUES}).raise_for_status()
    for start_at in range(0, n, 1000):
        msgs = [{"body": BODY} for _ in range(min(1000, n - start_at))]
        c.post(f"/v1/topics/{topic}/messages", json={"messages": msgs}).raise_for_status()


def pull_all(c: httpx.Client, topic: str, n: int, batch: int) -> float:
    """msg/s of pulling every message of ``topic`` and committing after each page."""
    got, began = 0, time.perf_counter()
    for q in range(QUEUES):
        offset = 0
        while True:
            page = c.get(f"/v1/topics/{topic}/queues/{q}/messages",
                         params={"offset": offset, "max_messages": batch}).json()
            if not page["messages"]:
                break
            got += len(page["messages"])
            offset = page["next_offset"]
            c.put("/v1/groups/pull/offsets", json={"topic": topic, "offsets": {str(q): offset}}).raise_for_status()
    took = time.perf_counter() - began
    if got != n:
        raise RuntimeError(f"plain pull read {got} of {n} messages")
    return n / took


def pop_all(c: httpx.Client, topic: str, n: int, batch: int) -> float:
    """msg/s of popping every message of ``topic`` and acking each page's receipts."""
    got, began = 0, time.perf_counter()
    while got < n:
        msgs = c.post("/v1/groups/pop/pop", json={"topic": topic, "max_messages": batch,
                                                  "invisible_ms": 600_000}).json()["messages"]
        if not msgs:
            raise RuntimeError(f"pop found nothing after {got} of {n} messages")
        answer = c.post("/v1/groups/pop/ack", json={"receipts": [m["receipt"] for m in msgs]}).json()
        if answer["acked"] != len(msgs):
            raise RuntimeError(f"ack answered {answer}")
        got += len(msgs)
    return n / (time.perf_counter() - began)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=200_000, help="messages produced, then read both ways")
    parser.add_argument("--batch", type=int, default=256, help="messages per pull page and per pop")
    parser.add_argument("--json-out", default=None, help="also write the results as JSON (for sparkmq bench)")
    args = parser.parse_args()
    rec = Recorder("pop", args.json_out, vars(args))
    with running_broker("sparkmq-pop-") as c:
        rec.phase(f"produce {args.messages} messages")
        fill(c, "t", args.messages)
        rec.phase("plain pull + commit")
        pull_rate = pull_all(c, "t", args.messages, args.batch)
        rec.phase("POP + ack")
        pop_rate = pop_all(c, "t", args.messages, args.batch)
    rec.add(Measure("broker.pop_ack", f"POP + ack of {args.messages} messages, {args.batch} per pop, 1 client",
                    round(pop_rate), "msg/s", peer=f"plain pull + offset commit, {args.batch} per page",
                    peer_value=round(pull_rate)))
    for m in rec.measures:
        print(f"{m.what}: {m.value:,} {m.unit} (plain pull {m.peer_value:,} {m.unit})", flush=True)
    rec.write()


if __name__ == "__main__":
    main()
