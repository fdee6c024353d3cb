"""SYNC flush by group commit: many producers share each fdatasync, none is answered early,
and a SYNC message reaches its consumers as soon as its group is on disk."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from store import GetStatus, Message, MessageStore, StoreClosedError
from store.dispatch import DispatchBatch


def test_32_producers_share_fdatasyncs_and_each_put_returns_only_once_on_disk(
        open_store: Callable[..., MessageStore]) -> None:
    store = open_store(flush_mode="sync")
    barrier = threading.Barrier(32)
    early: list[tuple[int, int]] = []  # (flushed offset seen on return, the put's end) when not covered

    def producer(i: int) -> None:
        barrier.wait()
        for j in range(25):
            [r] = store.put_messages([Message(topic="gc", body=b"%d-%d" % (i, j), queue_id=i % 4)])
            flushed = store.stats()["commitlog_flushed_offset"]
            if flushed < r.phy_offset + r.size:
                early.append((flushed, r.phy_offset + r.size))

    threads = [threading.Thread(target=producer, args=(i,)) for i in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not early, f"puts answered before an fdatasync covered them: {early[:3]}"
    # producers share fdatasyncs: fewer fdatasyncs than puts, and one of them covered many producers' puts
    # (quiet: a few puts per fdatasync; how many depends on how the 32 threads get the 2 cores)
    flushes = store.stats()["flushes"]
    assert 0 < flushes < 800, f"{flushes} fdatasyncs for 800 puts: the group commit did not group"
    assert store.flush_stats.largest_group_commit > 8, store.flush_stats.largest_group_commit


def test_a_sync_message_is_readable_right_after_its_put(open_store: Callable[..., MessageStore]) -> None:
    store = open_store(flush_mode="sync")
    slowest = 0.0
    for i in range(5):
        store.put_messages([Message(topic="seen", body=b"m%d" % i, queue_id=0)])
        t0 = time.monotonic()
        while store.stats()["dispatch_behind_bytes"] and time.monotonic() - t0 < 5:
            time.sleep(0.002)
        slowest = max(slowest, time.monotonic() - t0)
    # the reput idles for up to 1 s when nobody wakes it: the group commit must
    assert slowest < 0.9, f"a SYNC message waited {slowest:.2f} s to be dispatched"
    page = store.get_messages("seen", 0, 0, 10)
    assert page.status is GetStatus.FOUND and [m.body for m in page.messages] == [b"m%d" % i for i in range(5)]


def test_shutdown_under_sync_load_answers_every_put(open_store: Callable[..., MessageStore]) -> None:
    store = open_store(flush_mode="sync")
    outcomes: list[str] = []
    stop = threading.Event()

    def producer(i: int) -> None:
        while not stop.is_set():
            try:
                store.put_messages([Message(topic="bye", body=b"x", queue_id=i % 4)])
            except StoreClosedError:
                outcomes.append("closed")
                return
        outcomes.append("stopped")

    threads = [threading.Thread(target=producer, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    time.sleep(0.3)
    store.shutdown()
    stop.set()
    for t in threads:
        t.join(10)
    assert not [t for t in threads if t.is_alive()], "a SYNC put hung across shutdown"
    assert len(outcomes) == 8
    stats_max, stats_flushed = store.commitlog.max_offset(), store.commitlog.queue.flushed_offset()
    assert stats_flushed == stats_max, "shutdown left appended bytes without an fdatasync"


class _Rounds:
    """A dispatcher that counts the reput's rounds and the records they carried."""

    def __init__(self) -> None:
        self.rounds = self.records = 0

    def dispatch(self, batch: DispatchBatch) -> None:
        self.rounds += 1
        self.records += len(batch)


def test_the_reput_is_paced_under_a_stream_of_groups_and_still_dispatches_everything(
        open_store: Callable[..., MessageStore]) -> None:
    """While SYNC groups keep coming, the reput is woken at most about once a millisecond (one round
    then dispatches several groups and pays its fixed cost once), not once per group; when the stream
    stops, every message is dispatched within the idle wake-up."""
    store = open_store(flush_mode="sync", commitlog_segment_bytes=8 << 20)
    counter = _Rounds()
    store.add_dispatcher(counter)
    per_producer, barrier = 300, threading.Barrier(8)

    def producer(i: int) -> None:
        barrier.wait()
        for j in range(per_producer):
            store.put_messages([Message(topic="paced", body=b"%d-%d" % (i, j), queue_id=i % 4)])

    threads = [threading.Thread(target=producer, args=(i,)) for i in range(8)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed_ms = (time.monotonic() - t0) * 1000
    deadline = time.monotonic() + 0.9
    while counter.records < 8 * per_producer and time.monotonic() < deadline:
        time.sleep(0.002)
    assert counter.records == 8 * per_producer, "messages were left undispatched after the stream stopped"
    groups = store.flush_stats.group_commits
    # a wake-up comes at least 1 ms after the last one, or after 1 ms without a group: at most one round per
    # millisecond, plus the last group's and the 1 s safety tick's
    assert counter.rounds <= elapsed_ms + 3, (
        f"{counter.rounds} reput rounds for {groups} groups in {elapsed_ms:.0f} ms: woken once per group, not paced")
