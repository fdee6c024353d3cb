"""Flush services: when CommitLog bytes become durable.

* :class:`AsyncFlushService` (flush_mode "async"): every ``interval`` it
  fdatasyncs when at least ``min_pages`` pages are dirty, and at least every
  ten intervals regardless (RocketMQ's FlushRealTimeService).
* :class:`GroupCommitService` (flush_mode "sync"): a put waits until an
  fdatasync covers its bytes.  Requests that arrive while a sync runs are
  served together by the next one, so concurrent puts share one fdatasync
  (RocketMQ's GroupCommitService).
* :class:`LogicsFlushService`: flushes ConsumeQueues and the index and
  writes the checkpoint, on a cadence and at shutdown.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from .commitlog import CommitLog
from .errors import FlushTimeoutError, StoreError

__all__ = ["AsyncFlushService", "GroupCommitService", "LogicsFlushService", "FlushStats"]

_log = logging.getLogger(__name__)
_PAGE = 4096


class FlushStats:
    """Counters the broker exports as metrics."""

    def __init__(self) -> None:
        self.flushes = 0
        self.flush_seconds_total = 0.0
        self.last_flush_seconds = 0.0

    def record(self, seconds: float) -> None:
        self.flushes += 1
        self.flush_seconds_total += seconds
        self.last_flush_seconds = seconds


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

    def wait_for(self, offset: int) -> None:
        """ASYNC puts never wait."""


class GroupCommitService:
    """SYNC flush by group commit, leader/follower style (no thread of its own).

    A put that finds no fdatasync running becomes the leader and runs one
    itself; puts that arrive meanwhile wait, and the next fdatasync (run by
    one of them) covers them all.  No thread hand-off sits on the path of a
    lone producer, and many producers share each fdatasync.
    """

    name = "flush-group-commit"

    def __init__(self, commitlog: CommitLog, stats: FlushStats, timeout_s: float = 5.0) -> None:
        self.commitlog, self.stats, self.timeout = commitlog, stats, timeout_s
        self._cond = threading.Condition()
        self._flushing = False
        self._stopped = False

    def start(self) -> None:
        self._stopped = False

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        self.commitlog.flush()

    def wait_for(self, offset: int) -> None:
        """Block until an fdatasync covers ``offset``."""
        deadline = time.monotonic() + self.timeout
        with self._cond:
            while self.commitlog.queue.flushed_offset() < offset:
                if not self._flushing:
                    self._flushing = True
                    break  # lead: run the next fdatasync ourselves
                left = deadline - time.monotonic()
                if left <= 0 or self._stopped:
                    raise FlushTimeoutError(f"fdatasync did not cover offset {offset} within {self.timeout}s")
                self._cond.wait(left)
            else:
                return
        try:
            t0 = time.perf_counter()
            self.commitlog.flush()
            self.stats.record(time.perf_counter() - t0)
        finally:
            with self._cond:
                self._flushing = False
                self._cond.notify_all()


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
