"""Message store benchmark (issue 2 targets).

    python benchmarks/bench_store.py [--messages 1000000] [--dir /tmp/sparkmq-bench] [--json-out PATH]

Messages: 100-byte bodies, a 10-character topic, one key and one tag.
Reports, each measured in this run:
  append   batch append with ASYNC flush (msg/s), Message objects (put_messages)
  columns  the same messages given as columns (put_columns: bodies, keys, one tag), twice: with
           the reput thread dispatching on the same GIL (what a running store pays), and the write
           path alone (reput thread stopped), next to a peer: a per-record Python loop that only
           packs header + body + CRC into a buffer (the three take turns, best of 3 each)
  dispatch ConsumeQueue + index rebuild from the CommitLog (msg/s), next to a peer: a per-record
           Python loop that only unpacks each record's 88-byte header from the same log
  sync     SYNC flush, 32 producers, one message per put (msg/s): 32 threads each calling
           put_messages, and 32 asyncio coroutines each awaiting put_messages(wait=False) +
           wait_flushed (no thread held while waiting); next to a peer: one fdatasync per
           message, same directory (the three alternate in 4 slices, so other load hits all
           alike).  The ceiling: both modes again on a store in /dev/shm (tmpfs: fdatasync
           costs nothing), i.e. what the Python put path allows with no disk wait at all
  read     get_messages in pages of 1000 (msg/s), and get_message_batch (columns)
  crc      the same two reads with [store] verify_crc_on_read = false: the cost of checking CRCs
  recovery abnormal recovery with no usable safe point: CRC scan of the whole log (s/GiB), next
           to a peer: one CRC-32 call over every 64 MiB of the log (the CRC bandwidth floor)
CRCs (store and peers) use store.crc.crc32: ISA-L's when python-isal is installed, else zlib's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import time
from collections.abc import Callable
from typing import NamedTuple
from pathlib import Path

from benchmarks.bench_sync import run_sync
from benchmarks.results import Measure, Recorder, Target
from store import Message, MessageStore, StoreConfig
from store.crc import crc32

TOPIC = "bench-topc"  # 10 characters
BATCH = 1000


def _config(root: Path, mode: str, verify_crc: bool = True) -> StoreConfig:
    return StoreConfig(root_dir=root, commitlog_segment_bytes=256 << 20, flush_mode=mode,  # type: ignore[arg-type]
                       index_slots=2_000_000, index_entries=8_000_000, retention_check_interval_s=3600,
                       verify_crc_on_read=verify_crc)


def _batches(n: int, queues: int = 4) -> list[list[Message]]:
    body = b"x" * 100
    return [[Message(topic=TOPIC, body=body, queue_id=(b // BATCH) % queues, keys=(f"k{b + i}",), tags="TagA")
             for i in range(BATCH)] for b in range(0, n, BATCH)]


def bench_append(root: Path, n: int) -> float:
    batches = _batches(n)
    store = MessageStore(_config(root, "async"))
    store.start()
    t0 = time.perf_counter()
    for batch in batches:
        store.put_messages(batch)
    rate = n / (time.perf_counter() - t0)
    store.shutdown()
    return rate


class Rate(NamedTuple):
    """Messages per second of wall-clock time, and per second of this process's CPU time (all threads):
    on a machine shared with other work the second shows the cost, the first also the waits."""

    wall: float
    cpu: float
    visible: float = 0.0  # with the reput thread running: msg/s until every message was also dispatched


class _Clock:
    def __init__(self) -> None:
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def rate(self, n: int) -> Rate:
        return Rate(n / (time.perf_counter() - self.wall), n / max(1e-9, time.process_time() - self.cpu))


def bench_append_columns(root: Path, n: int, reput: bool = True) -> Rate:
    """put_columns of the messages bench_append writes (same topic, queues, keys and tag).

    ``reput=False`` stops the reput thread first (the write path alone: no dispatch sharing the GIL;
    the records are dispatched at shutdown, outside the timing)."""
    bodies = [b"x" * 100] * BATCH
    keys = [[f"k{b + i}" for i in range(BATCH)] for b in range(0, n, BATCH)]
    store = MessageStore(_config(root, "async"))
    store.start()
    if not reput:
        store.reput.stop()
    clock = _Clock()
    for b, batch_keys in enumerate(keys):
        store.put_columns(TOPIC, b % 4, bodies, keys=batch_keys, tags="TagA")
    rate = clock.rate(n)
    if reput and store.wait_visible(60.0):  # the reput may lag behind the puts: when had it caught up?
        rate = rate._replace(visible=n / (time.perf_counter() - clock.wall))
    store.shutdown()
    shutil.rmtree(root)
    return rate


def append_rounds(root: Path, n: int, rounds: int = 3) -> tuple[Rate, Rate, Rate]:
    """(put_columns with the reput thread running, put_columns with it stopped, per-record loop), each the
    best of ``rounds`` (wall and CPU rates each their best); the three take turns so that other load on
    the machine hits them alike."""
    best = [Rate(0.0, 0.0)] * 3
    for _ in range(rounds):
        got = (bench_append_columns(root, n), bench_append_columns(root, n, reput=False), per_record_loop(n))
        best = [Rate(max(a.wall, b.wall), max(a.cpu, b.cpu), max(a.visible, b.visible)) for a, b in zip(best, got)]
    return best[0], best[1], best[2]


def per_record_loop(n: int) -> Rate:
    """The peer: one Python iteration per record packs an 88-byte header, the body and its CRC32
    into a buffer (the floor any per-message design pays; no topic, properties or offsets kept)."""
    header, body = struct.Struct(">iIIiiqqiqQqQiqi"), b"x" * 100
    buf, pos = bytearray(n * (header.size + len(body))), 0
    pack, crc = header.pack_into, crc32  # the store's CRC function (ISA-L when installed), so the peer gains as much
    clock = _Clock()
    for i in range(n):
        pack(buf, pos, 188, 0xDAA320A7, crc(body), 0, 0, i, pos, 0, 0, 0, 0, 0, 0, 0, 100)
        buf[pos + 88:pos + 188] = body
        pos += 188
    return clock.rate(n)


def bench_dispatch(root: Path, n: int) -> tuple[Rate, float]:
    """Rebuild ConsumeQueues and the index of the log at ``root`` at start-up.  Returns msg/s of the
    re-dispatch itself (wall: the reput rounds, as the live reput thread runs them) and per CPU second
    of the whole start-up; and msg/s of the whole recovery (which also loads files and fdatasyncs the
    rebuilt ConsumeQueues and index: disk waits that the live reput leaves to the flush services)."""
    shutil.rmtree(root / "consumequeue")
    shutil.rmtree(root / "index")
    store = MessageStore(_config(root, "async"))
    cpu = time.process_time()
    store.start()  # re-dispatches the whole log before returning
    cpu = time.process_time() - cpu
    rounds, whole = (float(store.recovery[k]) for k in ("redispatch_seconds", "seconds"))  # type: ignore[arg-type]
    store.shutdown()
    return Rate(n / rounds, n / cpu), n / whole


def per_record_header_loop(root: Path) -> Rate:
    """The dispatch peer: a Python loop that unpacks each record's header, nothing more (msg/s)."""
    header, count = struct.Struct(">iIIiiqqiqQqQiqi"), 0
    segments = [seg.read_bytes() for seg in sorted((root / "commitlog").iterdir())]
    clock = _Clock()
    for buf in segments:
        pos, end, unpack = 0, len(buf) - 88, header.unpack_from
        while pos <= end:
            total = unpack(buf, pos)[0]
            if total <= 88:
                break
            count += 1
            pos += total
    return clock.rate(count)


def crc_floor(root: Path, size: int) -> tuple[float, float]:
    """The recovery peer: the store's crc32 over the first ``size`` bytes of the log, one call per 64 MiB
    (s/GiB of wall-clock and of CPU time)."""
    done = 0
    t0, cpu = time.perf_counter(), time.process_time()
    for seg in sorted((root / "commitlog").iterdir()):
        with seg.open("rb") as f:
            while done < size and (chunk := f.read(min(64 << 20, size - done))):
                crc32(chunk)
                done += len(chunk)
    gib = size / (1 << 30)
    return (time.perf_counter() - t0) / gib, (time.process_time() - cpu) / gib


def bench_read(root: Path, n: int, columns: bool, verify_crc: bool = True) -> float:
    """Read every queue back in pages; ``columns`` uses get_message_batch instead of get_messages."""
    store = MessageStore(_config(root, "async", verify_crc))
    store.start()
    got, t0 = 0, time.perf_counter()
    for q in range(4):
        offset = 0
        while True:
            if columns:
                batch = store.get_message_batch(TOPIC, q, offset, BATCH)
                # what a pull serves: bodies and ids (a batch builds them when first asked)
                count, next_offset = len(batch.batch.bodies) + 0 * len(batch.batch.msg_ids), batch.next_offset
            else:
                page = store.get_messages(TOPIC, q, offset, BATCH)
                count, next_offset = len(page.messages), page.next_offset
            if not count:
                break
            got += count
            offset = next_offset
    rate = got / (time.perf_counter() - t0)
    store.shutdown()
    assert got == n, (got, n)
    return rate


def _best_of(read: Callable[[], float], runs: int = 3) -> float:
    """The best of a few runs: the CRC cost is a few percent, smaller than run-to-run noise on a busy box."""
    return max(read() for _ in range(runs))


def bench_recovery(root: Path) -> tuple[float, float, int]:
    """(s/GiB of the recovery's own timing, s/GiB of CPU time of the start-up, log size)."""
    cp = json.loads((root / "checkpoint").read_text())
    cp.update(commitlog_flushed=0)  # as if no flush was ever checkpointed: scan it all
    (root / "checkpoint").write_text(json.dumps(cp))
    (root / "abort").touch()
    store = MessageStore(_config(root, "async"))
    cpu = time.process_time()
    store.start()
    cpu = time.process_time() - cpu
    seconds = float(store.recovery["seconds"])  # type: ignore[arg-type]
    size = int(store.stats()["commitlog_max_offset"])  # type: ignore[call-overload]
    store.shutdown()
    return seconds / (size / (1 << 30)), cpu / (size / (1 << 30)), size


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--dir", default="/tmp/sparkmq-bench-store")
    ap.add_argument("--sync-seconds", type=float, default=5.0)
    ap.add_argument("--json-out", default=None, help="also write the results as JSON (for sparkmq bench)")
    ap.add_argument("--only-sync", action="store_true", help="run the SYNC flush row only")
    args = ap.parse_args()
    root = Path(args.dir)
    shutil.rmtree(root, ignore_errors=True)
    n = args.messages - args.messages % BATCH
    rec = Recorder("store", args.json_out, {"messages": n, "sync_seconds": args.sync_seconds})
    try:
        if args.only_sync:
            run_sync(rec, root, args.sync_seconds)
        else:
            run(rec, root, n, args.sync_seconds)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    rec.write()


def _cpu_details(ours: Rate, peer: Rate) -> dict[str, float]:
    return {"cpu_msg_per_s": ours.cpu, "peer_cpu_msg_per_s": peer.cpu, "cpu_ratio": ours.cpu / peer.cpu,
            "load_1m": os.getloadavg()[0]}


def run(rec: Recorder, root: Path, n: int, sync_seconds: float) -> None:
    log = root / "log"
    rec.phase(f"append {n:,} messages (ASYNC flush)")
    per_msg = rec.add(Measure("store.append", f"batch append, ASYNC flush, {n:,} msgs in batches of {BATCH}",
                              bench_append(log, n), "msg/s", targets=(Target(">=", 1_000_000),))).value
    print(f"append   {per_msg:>12,.0f} msg/s  (batches of {BATCH}, ASYNC)")
    rec.phase(f"append {n:,} messages as columns (reput running, then stopped) and the per-record loop, 3 turns")
    cols, write_only, loop = append_rounds(root / "columns", n)
    for key, what, col in (("store.append_columns", "reput thread dispatching on the same GIL", cols),
                            ("store.append_columns_write", "write path only: reput thread stopped", write_only)):
        rec.add(Measure(key, f"batch append as columns (put_columns), ASYNC, batches of {BATCH}, {what}; best of 3",
                        col.wall, "msg/s", peer="per-record loop: header + body + CRC (best of 3)",
                        peer_value=loop.wall, targets=(Target(">=", 1_000_000), Target(">=", 1.5, "ratio")),
                        details={**_cpu_details(col, loop), "appended_and_dispatched_msg_per_s": col.visible}))
        seen = f"; appended and dispatched {col.visible:,.0f} msg/s" if col.visible else ""
        print(f"columns  {col.wall:>12,.0f} msg/s  (put_columns, {what}) vs {loop.wall:,.0f} msg/s per-record"
              f" loop = {col.wall / loop.wall:.2f}x; per CPU second {col.cpu:,.0f} vs {loop.cpu:,.0f} ="
              f" {col.cpu / loop.cpu:.2f}x{seen}")
    rec.phase("dispatch: rebuild ConsumeQueues + index, and the per-record header loop")
    (disp, whole), hloop = bench_dispatch(log, n), per_record_header_loop(log)
    rec.add(Measure("store.dispatch", "dispatch (ConsumeQueue + index), rebuild from the CommitLog: the reput rounds",
                    disp.wall, "msg/s", peer="per-record loop: unpack each header", peer_value=hloop.wall,
                    targets=(Target(">=", 1_000_000),),
                    details={**_cpu_details(disp, hloop), "whole_recovery_msg_per_s": whole}))
    print(f"dispatch {disp.wall:>12,.0f} msg/s  (ConsumeQueue + index rebuild) vs {hloop.wall:,.0f} msg/s per-record"
          f" header loop = {disp.wall / hloop.wall:.2f}x; per CPU second {disp.cpu:,.0f}; whole start-up incl."
          f" loading and fdatasync {whole:,.0f} msg/s")
    rec.phase("read back with get_messages")
    rate = rec.add(Measure("store.read", f"read back, get_messages, pages of {BATCH}",
                           bench_read(log, n, False), "msg/s", targets=(Target(">=", 1_500_000),))).value
    print(f"read     {rate:>12,.0f} msg/s  (get_messages, pages of {BATCH})")
    rec.phase("read back with get_message_batch")
    rate = rec.add(Measure("store.read_columns", f"read back, get_message_batch (columns), pages of {BATCH}",
                           bench_read(log, n, True), "msg/s", targets=(Target(">=", 1_500_000),))).value
    print(f"read     {rate:>12,.0f} msg/s  (get_message_batch: columns, pages of {BATCH})")
    for columns, key, how in ((False, "store.read_crc", "get_messages"),
                              (True, "store.read_columns_crc", "get_message_batch")):
        rec.phase(f"CRC cost: {how} with and without verify_crc_on_read")
        on, off = _best_of(lambda: bench_read(log, n, columns, True)), _best_of(lambda: bench_read(log, n, columns, False))
        rec.add(Measure(key, f"read back, {how}, CRC checked (msg/s), vs verify_crc_on_read = false", on, "msg/s",
                        peer="verify_crc_on_read = false", peer_value=off))
        print(f"crc      {on:>12,.0f} msg/s  ({how}, CRC checked) vs {off:,.0f} unchecked: {1 - on / off:+.1%} cost")
    rec.phase("abnormal recovery: CRC scan of the CommitLog")
    per_gib, cpu_gib, size = bench_recovery(log)
    floor, cpu_floor = crc_floor(log, size)
    rec.add(Measure("store.recovery", "abnormal recovery, CRC scan of the whole CommitLog", per_gib, "s/GiB",
                    peer="crc32 over the log in 64 MiB calls", peer_value=floor, targets=(Target("<=", 3.0),),
                    details={"cpu_s_per_gib": cpu_gib, "peer_cpu_s_per_gib": cpu_floor,
                             "load_1m": os.getloadavg()[0]}))
    print(f"recovery {per_gib:>12.2f} s/GiB  (abnormal: CRC scan of the whole CommitLog) vs {floor:.2f} s/GiB"
          f" CRC floor = {per_gib / floor:.1f}x; CPU {cpu_gib:.2f} vs {cpu_floor:.2f} s/GiB")
    run_sync(rec, root, sync_seconds)


if __name__ == "__main__":
    main()
