"""Table topics benchmark: typed translation next to the raw mirror, upsert MERGE, table lag under load.

    python -m benchmarks.bench_tables --messages 300000 --keys 1000000 --rate 50000 --lag-seconds 20 [--json-out PATH]

Everything runs in this process on a real MessageStore in a scratch directory
(``--dir``), the way the broker runs its writers (threads beside the store):

1. ``--messages`` JSON bodies of 8 fields (~200 B) go into one topic; then the
   raw Delta mirror (:class:`connectors.DeltaMirror`) and a typed table topic
   each backfill them from the CommitLog, one after the other, committing every
   second (the mirror's default interval): rows/s of each, and their ratio
   (goal: typed >= 0.5x raw).  A raw table topic runs too.
2. Upsert: ``--keys`` distinct keys plus 10% updates of earlier keys, MERGEd
   into an upsert table (change data feed on): rows/s until caught up.
3. Lag: a producer thread appends at ``--rate`` msg/s for ``--lag-seconds``
   into a typed topic with ``target_lag_s`` 5 while the table writes; the
   table's lag in seconds is sampled every 0.25 s (goal: max <= target_lag_s).
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.results import Measure, Recorder, Target  # noqa: E402
from connectors import DeltaMirror, MirrorConfig  # noqa: E402
from connectors.tables import TableSpec, TableTopics, Upkeep  # noqa: E402
from store import MessageStore, StoreConfig  # noqa: E402

SCHEMA = {
    "type": "object",
    "properties": {
        "order_id": {"type": "string"}, "customer": {"type": "string"}, "region": {"type": "string"},
        "amount": {"type": "number"}, "qty": {"type": "integer"}, "paid": {"type": "boolean"},
        "ts": {"type": "string", "format": "date-time"}, "note": {"type": "string"},
    },
    "required": ["order_id", "amount"],
}
_BODY = ('{"order_id":"o%09d","customer":"c%06d","region":"%s","amount":%d.%02d,"qty":%d,"paid":%s,'
         '"ts":"2026-11-23T%02d:%02d:%02dZ","note":"%s"}')
_REGIONS = ("eu-west", "us-east", "ap-south")
_NOTE = "x" * 52
_CHUNK = 1000


def body(i: int) -> bytes:
    return (_BODY % (i, i % 999_983, _REGIONS[i % 3], i % 10_000, i % 100, 1 + i % 9,
                     "true" if i % 2 else "false", i % 24, i % 60, (i * 7) % 60, _NOTE)).encode()


def produce(store: MessageStore, topic: str, n: int, start: int = 0,
            key_of: Callable[[int], str] | None = None) -> None:
    for lo in range(start, start + n, _CHUNK):
        idx = range(lo, min(lo + _CHUNK, start + n))
        keys = [key_of(i) for i in idx] if key_of else None
        store.put_columns(topic, 0, [body(i) for i in idx], keys=keys)


def wait(until: Callable[[], bool], timeout_s: float) -> float:
    start = time.monotonic()
    while not until():
        if time.monotonic() - start > timeout_s:
            raise TimeoutError("benchmark step did not finish in time")
        time.sleep(0.02)
    return time.monotonic() - start


def caught_up(service: TableTopics, topic: str) -> Callable[[], bool]:
    return lambda: service.status()[topic]["lag_bytes"] == 0


def typed_vs_raw(rec: Recorder, store: MessageStore, root: Path, n: int) -> None:
    rec.phase(f"producing {n:,} JSON bodies of 8 fields")
    produce(store, "orders", n)
    size = len(body(n // 2))
    rec.phase("raw mirror backfill")
    mirror = DeltaMirror(store, MirrorConfig(table_uri=str(root / "mirror"), app_id="bench", batch_rows=100_000,
                                             compact_every_commits=0, checkpoint_every_commits=0))
    t0 = time.monotonic()
    mirror.start()
    wait(lambda: mirror.lag()["lag_bytes"] == 0, 1800)
    raw_s = time.monotonic() - t0
    mirror.stop()
    rates = {}
    for mode in ("typed", "raw"):
        rec.phase(f"{mode} table topic backfill")
        service = TableTopics(store, root / f"tables-{mode}", app_id="bench", upkeep=_upkeep())
        service.start()
        t0 = time.monotonic()
        # target_lag_s 2 commits every 1 s, the mirror's batch_interval_s: the same cadence for both.
        service.configure("orders", TableSpec.from_json(
            {"mode": mode, "schema": SCHEMA if mode == "typed" else None, "target_lag_s": 2}))
        wait(caught_up(service, "orders"), 1800)
        rates[mode] = n / (time.monotonic() - t0)
        rows = service.status()["orders"]["rows"]
        service.stop()
        assert rows == n, f"{mode} table has {rows} rows, expected {n}"
    raw_rate = n / raw_s
    rec.add(Measure("tables.typed_rows_per_s", f"typed table topic: 8-field JSON bodies of {size} B to Delta "
                    "(backfill)", round(rates["typed"]), "rows/s", peer="raw Delta mirror (same messages)",
                    peer_value=round(raw_rate), targets=(Target(">=", 0.5, on="ratio"),),
                    details={"messages": n, "raw_table_topic_rows_per_s": round(rates["raw"])}))


def upsert(rec: Recorder, store: MessageStore, root: Path, keys: int) -> None:
    updates = keys // 10
    total = keys + updates
    rng = random.Random(7)
    order = list(range(keys))
    # Every 11th message updates a key written earlier; the others bring a new key.
    plan: list[int] = []
    nxt = 0
    for i in range(total):
        if i % 11 == 10 and nxt > 0:
            plan.append(rng.randrange(nxt))
        else:
            plan.append(order[nxt] if nxt < keys else rng.randrange(keys))
            nxt += 1
    rec.phase(f"producing {total:,} upsert messages over {keys:,} keys")
    produce(store, "acct", total, key_of=lambda i: f"key-{plan[i]}")
    service = TableTopics(store, root / "tables-upsert", app_id="bench", upkeep=_upkeep())
    service.start()
    rec.phase("upsert MERGE")
    t0 = time.monotonic()
    service.configure("acct", TableSpec.from_json({"mode": "typed", "schema": SCHEMA, "write_mode": "upsert"}))
    wait(caught_up(service, "acct"), 3600)
    elapsed = time.monotonic() - t0
    status = service.status()["acct"]
    service.stop()
    rec.add(Measure("tables.upsert_rows_per_s", f"upsert MERGE, {keys:,} distinct keys, 10% updates, CDF on",
                    round(total / elapsed), "rows/s",
                    details={"messages": total, "rows": status["rows"], "commits": status["version"],
                             "seconds": round(elapsed, 1)}))


def lag(rec: Recorder, store: MessageStore, root: Path, rate: int, seconds: float) -> None:
    service = TableTopics(store, root / "tables-lag", app_id="bench", upkeep=_upkeep())
    service.configure("stream", TableSpec.from_json({"mode": "typed", "schema": SCHEMA, "target_lag_s": 5}))
    service.start()
    stop = threading.Event()
    sent = [0]

    def producer() -> None:
        t0 = time.monotonic()
        while not stop.is_set():
            due = int((time.monotonic() - t0) * rate)
            if sent[0] < due:
                n = min(_CHUNK, due - sent[0])
                produce(store, "stream", n, start=sent[0])
                sent[0] += n
            else:
                time.sleep(0.002)

    rec.phase(f"table lag at {rate:,} msg/s for {seconds:g} s")
    thread = threading.Thread(target=producer, daemon=True)
    start = time.monotonic()
    thread.start()
    samples: list[float] = []
    while time.monotonic() - start < seconds:
        time.sleep(0.25)
        samples.append(float(service.status()["stream"]["lag_seconds"]))
    stop.set()
    thread.join()
    produced_rate = sent[0] / (time.monotonic() - start)
    drain = wait(caught_up(service, "stream"), 600)
    service.stop()
    rec.add(Measure("tables.lag_seconds_max", f"table lag (max of 0.25 s samples) at {rate:,} msg/s, target_lag_s 5",
                    round(max(samples), 2), "s", targets=(Target("<=", 5.0),),
                    details={"p50_s": round(statistics.median(samples), 2), "produced_msg_per_s": round(produced_rate),
                             "drain_after_stop_s": round(drain, 2), "seconds": seconds}))


def _upkeep() -> Upkeep:
    return Upkeep(batch_rows=100_000, compact_every_commits=0, upsert_compact_every_commits=0,
                  checkpoint_every_commits=0)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--messages", type=int, default=300_000, help="messages for typed vs raw")
    p.add_argument("--keys", type=int, default=1_000_000, help="distinct keys of the upsert run (plus 10%% updates)")
    p.add_argument("--rate", type=int, default=50_000, help="produce rate of the lag run (msg/s)")
    p.add_argument("--lag-seconds", type=float, default=20.0)
    p.add_argument("--dir", default=None, help="scratch directory (default: a temp dir, removed after)")
    p.add_argument("--json-out", default=None)
    args = p.parse_args(argv)
    rec = Recorder("tables", args.json_out, vars(args))
    if args.dir:
        Path(args.dir).mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="bench-tables-", dir=args.dir))
    store = MessageStore(StoreConfig(root_dir=scratch / "store"))
    store.start()
    try:
        typed_vs_raw(rec, store, scratch, args.messages)
        upsert(rec, store, scratch, args.keys)
        lag(rec, store, scratch, args.rate, args.lag_seconds)
    finally:
        store.shutdown()
        shutil.rmtree(scratch, ignore_errors=True)
    for m in rec.measures:
        ratio = f" ({m.ratio:.2f}x {m.peer})" if m.ratio is not None else ""
        print(f"{m.key}: {m.value:,} {m.unit}{ratio} {m.details}")
    rec.write()


if __name__ == "__main__":
    main()
