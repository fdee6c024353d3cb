"""The SYNC flush row of the store benchmark (issue 15): 32 single-message producers.

Three producer modes against one SYNC-flush store, each next to a peer that does one 200 B
write + fdatasync per message on a plain file in the same directory (all alternate in 4
slices, so other load hits every mode alike):

  threads    32 threads, each calling ``put_messages`` (blocks until its group fdatasync)
  asyncio    32 coroutines on one loop, each ``put_messages(wait=False)`` then
             ``await wait_flushed`` (no thread held while waiting)
  coalesced  32 coroutines whose puts of one loop turn are appended with one
             ``put_messages`` call (what the broker's ProduceBatcher does for HTTP produce)

Then the same modes on a store in /dev/shm (tmpfs: fdatasync costs nothing): the ceiling
of each mode's Python put path with no disk wait at all.  Run through bench_store
(``--only-sync``).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.results import Measure, Recorder, Target
from store import Message, MessageStore, PutResult, StoreConfig, StoreError

__all__ = ["bench_sync", "fdatasync_peer", "run_sync"]

TOPIC = "bench-topc"  # 10 characters


def _config(root: Path) -> StoreConfig:
    return StoreConfig(root_dir=root, commitlog_segment_bytes=256 << 20, flush_mode="sync",
                       index_slots=2_000_000, index_entries=8_000_000, retention_check_interval_s=3600)


def _peer_slice(fd: int, seconds: float) -> tuple[int, float]:
    """The peer: one 200-byte write + fdatasync per message on a plain file; (messages, seconds)."""
    rec, count, t0 = b"y" * 200, 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        os.write(fd, rec)
        os.fdatasync(fd)
        count += 1
    return count, time.perf_counter() - t0


def fdatasync_peer(path: Path, seconds: float) -> int:
    """The peer on its own file (bench_broker): how many 200 B write + fdatasync in ``seconds``."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        return _peer_slice(fd, seconds)[0]
    finally:
        os.close(fd)


def _store_slice(store: MessageStore, seconds: float, threads: int) -> tuple[int, float]:
    """``threads`` producers, one message per SYNC put, for ``seconds``; (messages, seconds)."""
    done = [0] * threads
    stop = time.perf_counter() + seconds

    def producer(i: int) -> None:
        m = [Message(topic=TOPIC, body=b"x" * 100, queue_id=i % 4, keys=("k",), tags="TagA")]
        while time.perf_counter() < stop:
            store.put_messages(m)
            done[i] += 1

    workers = [threading.Thread(target=producer, args=(i,)) for i in range(threads)]
    t0 = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return sum(done), time.perf_counter() - t0


def _async_slice(store: MessageStore, seconds: float, producers: int) -> tuple[int, float]:
    """``producers`` coroutines on one loop, each appending one message and awaiting its SYNC
    fdatasync (``put_messages(wait=False)`` + ``wait_flushed``); (messages, seconds)."""
    done = [0] * producers

    async def producer(i: int, stop: float) -> None:
        m = [Message(topic=TOPIC, body=b"x" * 100, queue_id=i % 4, keys=("k",), tags="TagA")]
        while time.perf_counter() < stop:
            await store.wait_flushed(store.put_messages(m, False))
            done[i] += 1

    async def run() -> float:
        t0 = time.perf_counter()
        await asyncio.gather(*(producer(i, t0 + seconds) for i in range(producers)))
        return time.perf_counter() - t0

    took = asyncio.run(run())
    return sum(done), took


class _Coalescer:
    """Bench-only: the single-message puts made in one loop iteration are appended with one
    ``put_messages`` call and await one fdatasync (what the broker's ProduceBatcher does for
    HTTP produce); each producer still gets its own result only once it is on disk."""

    def __init__(self, store: MessageStore) -> None:
        self.store = store
        self.pending: list[tuple[Message, asyncio.Future[PutResult]]] = []

    async def put(self, m: Message) -> PutResult:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[PutResult] = loop.create_future()
        self.pending.append((m, fut))
        if len(self.pending) == 1:
            loop.call_soon(self._write)
        return await fut

    def _write(self) -> None:
        items, self.pending = self.pending, []
        results = self.store.put_messages([m for m, _ in items], False)
        asyncio.ensure_future(self._answer(items, results))

    async def _answer(self, items: list[tuple[Message, asyncio.Future[PutResult]]], results: list[PutResult]) -> None:
        try:
            await self.store.wait_flushed(results)
        except (StoreError, OSError) as exc:  # every producer of the group gets the store's answer
            for _, fut in items:
                fut.set_exception(exc)
            return
        for (_, fut), r in zip(items, results):
            fut.set_result(r)


def _coalesced_slice(store: MessageStore, seconds: float, producers: int) -> tuple[int, float]:
    """``_async_slice`` with the appends of one loop iteration coalesced (``_Coalescer``)."""
    done = [0] * producers

    async def run() -> float:
        group = _Coalescer(store)

        async def producer(i: int, stop: float) -> None:
            m = Message(topic=TOPIC, body=b"x" * 100, queue_id=i % 4, keys=("k",), tags="TagA")
            while time.perf_counter() < stop:
                await group.put(m)
                done[i] += 1

        t0 = time.perf_counter()
        await asyncio.gather(*(producer(i, t0 + seconds) for i in range(producers)))
        return time.perf_counter() - t0

    took = asyncio.run(run())
    return sum(done), took


_SYNC_MODES: dict[str, Callable[[MessageStore, float, int], tuple[int, float]]] = {
    "threads": _store_slice, "asyncio": _async_slice, "coalesced": _coalesced_slice}


def _sync_modes(store: MessageStore, seconds: float, producers: int, slices: int,
                peer_fd: int | None = None) -> dict[str, float]:
    """Each mode (and the fdatasync peer, given its file) in turn, ``slices`` times: msg/s per mode,
    and puts per fdatasync per mode (``<mode>_puts_per_fdatasync``)."""
    counts = {k: [0, 0.0, 0] for k in [*_SYNC_MODES, *(["peer"] if peer_fd is not None else [])]}
    for _ in range(slices):
        if peer_fd is not None:
            n, t = _peer_slice(peer_fd, seconds / slices)
            counts["peer"][0] += n
            counts["peer"][1] += t
        for mode, fn in _SYNC_MODES.items():
            before = store.flush_stats.flushes
            n, t = fn(store, seconds / slices, producers)
            c = counts[mode]
            c[0], c[1], c[2] = c[0] + n, c[1] + t, c[2] + store.flush_stats.flushes - before
    out = {k: c[0] / c[1] for k, c in counts.items()}
    out.update({f"{k}_puts_per_fdatasync": c[0] / max(1, c[2]) for k, c in counts.items() if k != "peer"})
    if peer_fd is not None:
        out["peer_fdatasync_ms"] = counts["peer"][1] / max(1, counts["peer"][0]) * 1000
    return out


def bench_sync(root: Path, seconds: float, threads: int = 32, slices: int = 4) -> dict[str, float]:
    """SYNC flush, ``threads`` single-message producers per mode (threads, asyncio) next to the fdatasync
    peer, alternating in ``slices`` slices so other load hits all alike; then the same modes on a store in
    /dev/shm (``ceiling_<mode>``: no disk wait at all).  Also puts per fdatasync per mode."""
    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root / "peer.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    store = MessageStore(_config(root / "sync"))
    store.start()
    try:
        out = _sync_modes(store, seconds, threads, slices, fd)
        out["flush_ms"] = store.flush_stats.flush_seconds_total / max(1, store.flush_stats.flushes) * 1000
    finally:
        store.shutdown()
        os.close(fd)
    shm = Path("/dev/shm") if Path("/dev/shm").is_dir() else None
    if shm is not None:
        ceiling_root = shm / f"sparkmq-bench-sync-{os.getpid()}"
        store = MessageStore(_config(ceiling_root))
        store.start()
        try:
            out.update({f"ceiling_{k}": v for k, v in _sync_modes(store, seconds / 2, threads, slices).items()})
        finally:
            store.shutdown()
            shutil.rmtree(ceiling_root, ignore_errors=True)
    out["load_1m"] = os.getloadavg()[0]
    return out


def run_sync(rec: Recorder, root: Path, sync_seconds: float) -> None:
    rec.phase(f"SYNC flush, 32 producers (threads, asyncio), vs fdatasync per message ({sync_seconds:g} s each)")
    d = bench_sync(root / "sync", sync_seconds)
    peer = d["peer"]
    for mode, key, what in (("threads", "store.sync", "32 threads"),
                            ("asyncio", "store.sync_async", "32 asyncio coroutines"),
                            ("coalesced", "store.sync_coalesced", "32 coroutines, appends of a loop turn coalesced")):
        details = {"puts_per_fdatasync": d[f"{mode}_puts_per_fdatasync"], "flush_ms": d["flush_ms"],
                   "peer_fdatasync_ms": d["peer_fdatasync_ms"], "load_1m": d["load_1m"],
                   "ceiling_tmpfs": d.get(f"ceiling_{mode}", 0.0)}
        rec.add(Measure(key, f"SYNC flush, {what}, one message per put", d[mode], "msg/s",
                        peer="fdatasync per 200 B write", peer_value=peer, targets=(Target(">=", 10.0, "ratio"),),
                        details=details))
        print(f"sync     {d[mode]:>12,.0f} msg/s  ({what}, group commit) vs {peer:,.0f} msg/s fdatasync-per-message"
              f" = {d[mode] / peer:.1f}x; {details['puts_per_fdatasync']:.1f} puts per fdatasync; ceiling (tmpfs) "
              f"{details['ceiling_tmpfs']:,.0f} msg/s = {details['ceiling_tmpfs'] / peer:.1f}x")
    print(f"sync     group flush {d['flush_ms']:.2f} ms, peer fdatasync {d['peer_fdatasync_ms']:.2f} ms, "
          f"load {d['load_1m']:.1f}")
