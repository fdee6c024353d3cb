"""SYNC flush awaited from asyncio: a coroutine's put is answered only once an fdatasync covers
it, many coroutines share each fdatasync, a timeout answers FLUSH_DISK_TIMEOUT with the results,
and a shutdown answers every waiter."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path

from store import Message, MessageStore, PutResult, StoreClosedError
from store.errors import FlushTimeoutError


def _end(results: list[PutResult]) -> int:
    return results[-1].phy_offset + results[-1].size


def test_32_coroutines_share_fdatasyncs_and_none_is_answered_early(
        open_store: Callable[..., MessageStore]) -> None:
    store = open_store(flush_mode="sync")
    early: list[tuple[int, int]] = []
    threads_before = threading.active_count()

    async def producer(i: int) -> None:
        for j in range(25):
            results = store.put_messages([Message(topic="gca", body=b"%d-%d" % (i, j), queue_id=i % 4)], False)
            await store.wait_flushed(results)
            flushed = int(store.stats()["commitlog_flushed_offset"])  # type: ignore[call-overload]
            if flushed < _end(results):
                early.append((flushed, _end(results)))

    async def main() -> None:
        await asyncio.gather(*(producer(i) for i in range(32)))

    asyncio.run(main())
    assert not early, f"coroutines answered before an fdatasync covered them: {early[:3]}"
    stats = store.flush_stats
    # every put was answered by a group fdatasync, except one an earlier fdatasync had already covered by
    # the time it waited (it returns at once, uncounted: seen once in 800 on a loaded machine)
    assert 760 <= stats.group_commit_puts <= 800 and store.stats()["group_commit_puts"] == stats.group_commit_puts
    # puts share fdatasyncs: fewer fdatasyncs than puts, and one of them answered more puts than the old
    # write pool had threads (quiet: ~1 fdatasync per 30 puts; on a loaded machine 446 for 800 was seen)
    assert stats.group_commits < 800, f"{stats.group_commits} fdatasyncs for 800 puts: no grouping"
    assert stats.largest_group_commit > 8, stats.largest_group_commit
    assert threading.active_count() == threads_before  # waiting held no thread of its own
    assert store.wait_visible(5)
    assert sum(len(store.get_messages("gca", q, 0, 1000).messages) for q in range(4)) == 800


def test_a_timed_out_wait_carries_the_results_and_the_messages_stay_stored(
        open_store: Callable[..., MessageStore]) -> None:
    store = open_store(flush_mode="sync", sync_flush_timeout_ms=0)  # a wait that has to wait runs out of time
    answers: list[str] = []
    pad = b"p" * (60 << 10)  # 16 x 60 KiB a round: an fdatasync that is not done before the loop's next turn

    async def producer(i: int) -> list[PutResult]:
        results = store.put_messages([Message(topic="late", body=b"t%d" % i + pad, queue_id=0)], False)
        try:
            await store.wait_flushed(results)
            answers.append("ok")  # an earlier group's fdatasync covered it already
        except FlushTimeoutError as exc:
            assert exc.results == results  # the caller can still answer which messages were stored
            answers.append("timeout")
        return results

    async def round_(r: int) -> list[list[PutResult]]:
        return await asyncio.gather(*(producer(r * 16 + i) for i in range(16)))

    stored: list[list[PutResult]] = []
    for r in range(20):  # a fast disk can win a round; it does not win twenty
        stored += asyncio.run(round_(r))
        if "timeout" in answers:
            break
    assert "timeout" in answers and len(answers) == len(stored), answers
    assert store.wait_visible(5)
    page = store.get_messages("late", 0, 0, 1000)
    assert sorted(m.body for m in page.messages) == sorted(b"t%d" % i + pad for i in range(len(stored)))
    assert sorted(r[0].queue_offset for r in stored) == list(range(len(stored)))


def test_shutdown_answers_every_waiting_coroutine(open_store: Callable[..., MessageStore], tmp_path: Path) -> None:
    store = open_store(tmp_path / "bye", flush_mode="sync")
    appended, acked, refused = [0], [0], []

    async def producer(i: int) -> None:
        while True:
            try:
                results = store.put_messages([Message(topic="bye", body=b"x", queue_id=i % 4)], False)
            except StoreClosedError as exc:
                refused.append(str(exc))  # a put after the shutdown: refused, saying why
                return
            appended[0] += 1
            await store.wait_flushed(results)  # answered by a group, or by the shutdown's last fdatasync
            acked[0] += 1

    async def main() -> None:
        tasks = [asyncio.create_task(producer(i)) for i in range(16)]
        await asyncio.sleep(0.3)
        last = store.put_messages([Message(topic="bye", body=b"last", queue_id=0)], False)
        waiter = asyncio.create_task(store.wait_flushed(last))
        await asyncio.sleep(0)  # the waiter asked for its fdatasync; no group has run on the loop since
        appended[0] += 1
        store.shutdown()  # on the loop, while coroutines wait for their group
        _, pending = await asyncio.wait([*tasks, waiter], timeout=10)
        acked[0] += waiter.done() and waiter.exception() is None
        assert not pending, f"{len(pending)} coroutines still waiting after shutdown"

    asyncio.run(main())
    assert len(refused) == 16 and acked[0] == appended[0] > 17, (refused[:1], acked, appended)
    reopened = open_store(tmp_path / "bye", flush_mode="sync")
    assert reopened.wait_visible(5)
    assert sum(reopened.max_offset("bye", q) for q in range(4)) == acked[0]  # every answered put is on disk
