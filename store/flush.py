"""Flush services: when CommitLog bytes become durable.

* :class:`AsyncFlushService` (flush_mode "async"): every ``interval`` it
  fdatasyncs when at least ``min_pages`` pages are dirty, and at least every
  ten intervals regardless (RocketMQ's FlushRealTimeService).
* :class:`GroupCommitService` (flush_mode "sync"): a put waits until an
  fdatasync covers its bytes.  Requests that arrive while a sync runs are
  served together by the next one, so concurrent puts share one fdatasync
  (RocketMQ's GroupCommitService).  A thread waits on a lock of its own
  (``wait_for``); an asyncio caller awaits a future (``wait_async``) and
  holds no thread: the flush thread settles a group's futures with one
  ``call_soon_threadsafe`` per event loop.
* :class:`LogicsFlushService`: flushes ConsumeQueues and the index and
  writes the checkpoint, on a cadence and at shutdown.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from .commitlog import CommitLog
from .config import StoreConfig
from .errors import FlushTimeoutError, StoreClosedError, StoreError

__all__ = ["AsyncFlushService", "GroupCommitService", "LogicsFlushService", "FlushStats", "make_flusher"]

_log = logging.getLogger(__name__)
_PAGE = 4096
_REPUT_IDLE_S = 0.001  # SYNC: how long a served group's reput wake-up may wait for the next group
_REPUT_PACE_S = 0.001  # SYNC: while groups keep coming, the reput is woken at most this often


class FlushStats:
    """Counters the broker exports as metrics."""

    def __init__(self) -> None:
        self.flushes = 0
        self.flush_seconds_total = 0.0
        self.last_flush_seconds = 0.0
        self.group_commits = 0  # SYNC: fdatasyncs that answered at least one waiting put
        self.group_commit_puts = 0  # the puts they answered
        self.largest_group_commit = 0

    def record(self, seconds: float) -> None:
        self.flushes += 1
        self.flush_seconds_total += seconds
        self.last_flush_seconds = seconds

    def record_group(self, puts: int) -> None:
        self.group_commits += 1
        self.group_commit_puts += puts
        self.largest_group_commit = max(self.largest_group_commit, puts)

    def as_dict(self) -> dict[str, float]:
        return {"flushes": self.flushes, "flush_seconds_total": self.flush_seconds_total,
                "last_flush_seconds": self.last_flush_seconds, "group_commits": self.group_commits,
                "group_commit_puts": self.group_commit_puts, "largest_group_commit": self.largest_group_commit}


class _Service:
    name = "service"

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run_safely, name=f"sparkmq-{self.name}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def _wake(self) -> None:
        pass

    def _run_safely(self) -> None:
        try:
            self._run()
        except Exception:  # a dying service must be visible, not silent
            _log.exception("%s stopped on an error", self.name)
            raise

    def _run(self) -> None:
        raise NotImplementedError


class AsyncFlushService(_Service):
    name = "flush-async"

    def __init__(self, commitlog: CommitLog, interval_ms: int, min_pages: int, stats: FlushStats) -> None:
        super().__init__()
        self.commitlog, self.interval, self.min_bytes = commitlog, interval_ms / 1000, min_pages * _PAGE
        self.stats = stats

    def _wake(self) -> None:
        pass

    def _run(self) -> None:
        last_full = time.monotonic()
        while not self._stop.wait(self.interval):
            dirty = self.commitlog.max_offset() - self.commitlog.queue.flushed_offset()
            thorough = time.monotonic() - last_full >= 10 * self.interval
            if dirty > 0 and (dirty >= self.min_bytes or thorough):
                t0 = time.perf_counter()
                self.commitlog.flush()
                self.stats.record(time.perf_counter() - t0)
                last_full = time.monotonic()
        self.commitlog.flush()

    def wait_for(self, offset: int, results: list[Any] | None = None) -> None:
        """ASYNC puts never wait."""

    async def wait_async(self, offset: int, results: list[Any] | None = None) -> None:
        """ASYNC puts never wait."""


class _Request:
    """One SYNC put waiting for an fdatasync: a locked lock the flush thread releases."""

    __slots__ = ("lock", "error")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.lock.acquire()
        self.error: BaseException | None = None


class _LoopWaiter:
    """One coroutine waiting for an fdatasync: a future of ``loop`` the flush thread settles."""

    __slots__ = ("loop", "future")

    def __init__(self, loop: asyncio.AbstractEventLoop, future: asyncio.Future[None]) -> None:
        self.loop, self.future = loop, future


def _settle(futures: list[asyncio.Future[None]], error: BaseException | None) -> None:
    """On the loop: answer every waiter of one group (those that timed out already are skipped)."""
    for fut in futures:
        if not fut.done():
            if error is None:
                fut.set_result(None)
            else:
                fut.set_exception(error)


def _expire(fut: asyncio.Future[None], offset: int, timeout: float, results: list[Any] | None) -> None:
    if not fut.done():
        fut.set_exception(FlushTimeoutError(f"fdatasync did not cover offset {offset} within {timeout}s", results))


class GroupCommitService(_Service):
    """SYNC flush by group commit (RocketMQ's GroupCommitService).

    A put appends, adds a request to the pending list and blocks on the
    request's own lock; it never holds the CommitLog's write lock while it
    waits.  The flush thread swaps the whole pending list for an empty one,
    runs one fdatasync, which covers every request in it (each appended
    before it asked), and releases each request's lock.  Puts that arrive
    while an fdatasync runs pile up for the next one, so the group grows
    with the load.  Waking a put costs one lock release, with no shared lock
    to re-acquire, so the cost per put does not grow with the group.
    ``on_flushed`` runs after groups, paced (the store wakes the reput there, not
    once per put).  A coroutine (``wait_async``) waits on a future instead of a
    lock: the group's futures of one event loop are settled by one
    ``call_soon_threadsafe``.  stop() answers every waiter: the last fdatasync
    covers them, or they get StoreClosedError.
    """

    name = "flush-group-commit"

    def __init__(self, commitlog: CommitLog, stats: FlushStats, timeout_s: float = 5.0) -> None:
        super().__init__()
        self.commitlog, self.stats, self.timeout = commitlog, stats, timeout_s
        self._mutex = threading.Lock()  # guards _pending only; held for a list append or swap
        self._pending: list[_Request | _LoopWaiter] = []
        self._work = threading.Event()
        self._closed = True  # not running: puts flush inline
        self.on_flushed: Callable[[], None] = lambda: None  # after groups (paced): the store wakes the reput

    def _wake(self) -> None:
        self._work.set()

    def start(self) -> None:
        self._closed = False
        super().start()

    def stop(self) -> None:
        with self._mutex:
            self._closed = True
        super().stop()
        self._serve(self._take(), stopping=True)  # requests the thread left: served here
        self.commitlog.flush()

    def _enqueue(self, req: _Request | _LoopWaiter) -> bool:
        """Add ``req`` to the next group; False when not running (the caller flushes inline)."""
        with self._mutex:
            if self._closed:  # not started, or stopping
                return False
            first = not self._pending
            self._pending.append(req)
        if first:
            self._work.set()
        return True

    def wait_for(self, offset: int, results: list[Any] | None = None) -> None:
        """Block until an fdatasync covers ``offset`` (the caller appended up to it already).

        A timeout raises FlushTimeoutError carrying ``results`` (stored, not confirmed on disk)."""
        if self.commitlog.queue.flushed_offset() >= offset:
            return
        req = _Request()
        if not self._enqueue(req):
            self._flush_inline(offset)
            return
        if not req.lock.acquire(timeout=self.timeout):
            raise FlushTimeoutError(f"fdatasync did not cover offset {offset} within {self.timeout}s", results)
        if req.error is not None:
            raise req.error

    async def wait_async(self, offset: int, results: list[Any] | None = None) -> None:
        """``wait_for`` for a coroutine: awaits the group fdatasync covering ``offset`` on the
        running loop without holding a thread.  Same answers: FlushTimeoutError with
        ``results`` after the timeout, the fdatasync's error, StoreClosedError if the store
        stopped and could not flush it."""
        if self.commitlog.queue.flushed_offset() >= offset:
            return
        loop = asyncio.get_running_loop()
        waiter = _LoopWaiter(loop, loop.create_future())
        if not self._enqueue(waiter):
            self._flush_inline(offset)
            return
        timer = loop.call_later(self.timeout, _expire, waiter.future, offset, self.timeout, results)
        try:
            await waiter.future
        finally:
            timer.cancel()

    def _flush_inline(self, offset: int) -> None:
        """Not running (not started, or stopping): the put flushes by itself."""
        try:
            self.commitlog.flush()
        except (OSError, ValueError) as exc:  # the segments are closed or the disk failed
            raise StoreClosedError(f"the store stopped before an fdatasync covered offset {offset} ({exc}); "
                                   "the message was appended but is not confirmed on disk") from exc

    def _take(self) -> list[_Request | _LoopWaiter]:
        with self._mutex:
            reqs, self._pending = self._pending, []
            self._work.clear()
        return reqs

    def _serve(self, reqs: list[_Request | _LoopWaiter], stopping: bool = False, notify: bool = True) -> bool:
        """One fdatasync for the whole group, then wake each of its puts (one loop call per event loop);
        then ``on_flushed`` unless not ``notify``.  Returns whether a group was served."""
        if not reqs:
            return False
        error: BaseException | None = None
        try:
            t0 = time.perf_counter()
            self.commitlog.flush()
            self.stats.record(time.perf_counter() - t0)
        except Exception as exc:  # the puts of this group answer it; the thread goes on
            _log.exception("group commit fdatasync failed")
            error = StoreClosedError(f"the store stopped and its last fdatasync failed ({exc}); the messages "
                                     "were appended but are not confirmed on disk") if stopping else exc
        self.stats.record_group(len(reqs))
        loops: dict[asyncio.AbstractEventLoop, list[asyncio.Future[None]]] = {}
        for req in reqs:
            if isinstance(req, _LoopWaiter):
                loops.setdefault(req.loop, []).append(req.future)
            else:
                req.error = error
                req.lock.release()
        for loop, futures in loops.items():
            try:
                loop.call_soon_threadsafe(_settle, futures, error)
            except RuntimeError:  # that loop is closed: nobody awaits these any more
                pass
        if notify:
            self.on_flushed()
        return True

    def _run(self) -> None:
        """Serve groups.  The reput (``on_flushed``) is woken for served groups when a later group's
        fdatasync starts, so it dispatches while the disk works and not while the woken puts want the
        GIL back; at most every ``_REPUT_PACE_S`` while groups keep coming (RocketMQ's reput also
        sleeps 1 ms between rounds), so one round dispatches several groups and its fixed cost is paid
        once for them; and ``_REPUT_IDLE_S`` after the last group when no next one comes."""
        due, woke = False, 0.0
        while not self._stop.is_set():
            if not self._work.wait(_REPUT_IDLE_S if due else None):
                self.on_flushed()
                due, woke = False, time.monotonic()
                continue
            reqs = self._take()
            if due and time.monotonic() - woke >= _REPUT_PACE_S:  # dispatched while this fdatasync runs
                self.on_flushed()
                due, woke = False, time.monotonic()
            due = self._serve(reqs, notify=False) or due
        if due:
            self.on_flushed()


def make_flusher(commitlog: CommitLog, config: StoreConfig, stats: FlushStats,
                 on_flushed: Callable[[], None]) -> GroupCommitService | AsyncFlushService:
    """The CommitLog flusher of ``config.flush_mode``; with SYNC, ``on_flushed`` runs after groups (paced)."""
    if config.flush_mode != "sync":
        return AsyncFlushService(commitlog, config.flush_interval_ms, config.flush_min_pages, stats)
    service = GroupCommitService(commitlog, stats, timeout_s=config.sync_flush_timeout_ms / 1000)
    service.on_flushed = on_flushed
    return service


class LogicsFlushService(_Service):
    """Flushes ConsumeQueues + index and persists the checkpoint."""

    name = "flush-logics"

    def __init__(self, interval_ms: int, flush_once: Callable[[], None]) -> None:
        super().__init__()
        self.interval, self.flush_once = interval_ms / 1000, flush_once

    def _run(self) -> None:
        failing = False
        while not self._stop.wait(self.interval):
            try:
                self.flush_once()
            except (OSError, StoreError) as exc:  # a full disk: keep the old checkpoint, try again next round
                if not failing:
                    _log.error("checkpoint not written (%s); retrying every %.1f s", exc, self.interval)
                failing = True
                continue
            if failing:
                _log.info("checkpoint written again")
            failing = False
