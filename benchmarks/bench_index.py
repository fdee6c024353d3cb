"""Throughput of IndexService.dispatch: 10,000-record batches, one key each.

    python benchmarks/bench_index.py [--batches 200] [--batch-size 10000] [--json-out PATH]

Prints msg/s for dispatch (wall clock, and per CPU-second of this process,
which is steadier on a shared machine) (hash keys + put_batch, rolls included) and for
single-key queries.  Geometry: the store defaults (500,000 slots, 2,000,000
entries per file), so a run of 200 batches rolls once.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.results import Measure, Recorder
from store.config import StoreConfig
from store.dispatch import DispatchBatch
from store.index_service import IndexService

T0 = 1_700_000_000_000


def make_batch(first_phy: int, size: int, first_key: int) -> DispatchBatch:
    """A batch shaped like the issue's benchmark: 10-char topic, one key, ~200-byte records."""
    phys = first_phy + 200 * np.arange(size, dtype=np.int64)
    stamps = T0 + np.arange(size, dtype=np.int64) // 10 + first_key // 10
    return DispatchBatch(
        topics=["benchtopic"] * size,
        queue_ids=np.zeros(size, np.int32),
        queue_offsets=np.arange(size, dtype=np.int64),
        phy_offsets=phys,
        sizes=np.full(size, 200, np.int32),
        tag_codes=np.zeros(size, np.int64),
        store_timestamps=stamps,
        born_timestamps=stamps,
        sys_flags=np.zeros(size, np.int32),
        keys=[(f"key-{first_key + i:012d}",) for i in range(size)],
        tags=["TagA"] * size,
        properties_raw=[b""] * size,
        bodies=[b""] * size,
        msg_ids=[""] * size,
        end_offset=int(phys[-1]) + 200,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=20_000)
    parser.add_argument("--json-out", default=None, help="also write the results as JSON (for sparkmq bench)")
    args = parser.parse_args()
    rec = Recorder("index", args.json_out, {"batches": args.batches, "batch_size": args.batch_size,
                                            "queries": args.queries})
    rec.phase(f"key index: build {args.batches} batches of {args.batch_size:,}")
    batches = [make_batch(b * args.batch_size * 200, args.batch_size, b * args.batch_size)
               for b in range(args.batches)]
    with tempfile.TemporaryDirectory() as tmp:
        run(rec, Path(tmp), batches, args)
    rec.write()


def run(rec: Recorder, tmp: Path, batches: list[DispatchBatch], args: argparse.Namespace) -> None:
    config = StoreConfig()
    total = args.batches * args.batch_size
    index = IndexService(tmp, config.index_slots, config.index_entries)
    index.load()
    rec.phase(f"key index: dispatch {total:,} keys")
    start, cpu_start = time.perf_counter(), time.process_time()
    for batch in batches:
        index.dispatch(batch)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    rec.add(Measure("store.index", f"key index alone (IndexService.dispatch, batches of {args.batch_size:,})",
                    total / elapsed, "keys/s", details={"keys": total, "keys_per_cpu_s": total / cpu,
                                                        "index_files": len(index.files())}))
    print(f"dispatch: {total:,} msgs in {elapsed:.3f} s = {total / elapsed:,.0f} msg/s "
          f"({total / cpu:,.0f} msg per CPU-second; {len(index.files())} index files, "
          f"batch {args.batch_size:,})")
    rec.phase(f"key index: {args.queries:,} lookups")
    keys = [f"key-{random.randrange(total):012d}" for _ in range(args.queries)]
    start = time.perf_counter()
    hits = sum(len(index.query("benchtopic", key, 0, 1 << 62, 8)) for key in keys)
    elapsed = time.perf_counter() - start
    rec.add(Measure("store.index_query", "key index lookups (one key, up to 8 hits)", args.queries / elapsed,
                    "queries/s", details={"queries": args.queries, "hits": hits}))
    print(f"query: {args.queries:,} lookups in {elapsed:.3f} s = {args.queries / elapsed:,.0f} queries/s "
          f"({hits:,} hits)")
    index.close()


if __name__ == "__main__":
    main()
