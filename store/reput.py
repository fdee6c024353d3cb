"""ReputService: turns CommitLog bytes into ConsumeQueue units, index entries
and external dispatches, in CommitLog order (RocketMQ's ReputMessageService).

The service owns ``reput_offset``: every record before it has been handed to
every dispatcher.  It wakes when told the CommitLog grew (no polling while
idle beyond a 1 s safety tick): after every append with ASYNC flush, after
fdatasynced groups with SYNC flush (at most every millisecond while groups keep
coming).  It parses up to ``batch_bytes`` at a time and calls:

1. the ConsumeQueue table (internal; its result drives the arrival listeners),
2. the other dispatchers in registration order (index, Delta mirror, ...),
3. the arrival listeners, once per queue that grew: long polling hangs here.

Quarantined records (see :mod:`.quarantine`) are not parsed: the ConsumeQueue
table gives each its unit, and the other dispatchers never see it.

``end_limit`` (controller mode) caps what is dispatched at the confirm offset,
the in-sync set's lowest acknowledged CommitLog offset (RocketMQ's
confirmOffset, Kafka's high watermark): consumers, queue offsets and key
lookups see nothing an election could truncate.  Without it (the default,
classic master/slave) everything appended is dispatched.  Whoever moves the
confirm offset calls :meth:`ReputService.notify`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from .commitlog import CommitLog
from .consume_queue_store import ConsumeQueueStore
from .dispatch import DispatchBatch, Dispatcher

__all__ = ["ReputService"]

_log = logging.getLogger(__name__)

ArrivalListener = Callable[[str, int, int], None]
EndLimit = Callable[[], int]  # the confirm offset: dispatch nothing at or past it


class ReputService:
    def __init__(self, commitlog: CommitLog, queues: ConsumeQueueStore, batch_bytes: int) -> None:
        self.commitlog = commitlog
        self.queues = queues
        self.batch_bytes = batch_bytes
        self.reput_offset = 0
        self.end_limit: EndLimit | None = None
        self.dispatchers: list[Dispatcher] = []
        self.listeners: list[ArrivalListener] = []
        self._cond = threading.Condition()
        self._woken = False  # notify() came since the current round began
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._round_lock = threading.Lock()
        self._progress = threading.Condition()
        self._progress_waiters = 0

    @property
    def behind_bytes(self) -> int:
        return max(0, self.dispatch_end() - self.reput_offset)

    def dispatch_end(self) -> int:
        """Where dispatch may go now: the CommitLog's end, or the confirm offset when ``end_limit`` is set."""
        end = self.commitlog.max_offset()
        limit = self.end_limit
        return end if limit is None else min(end, limit())

    def wait_for(self, offset: int, timeout_s: float) -> bool:
        """Block until everything before CommitLog ``offset`` is dispatched; False after ``timeout_s``."""
        if self.reput_offset >= offset:
            return True
        deadline = time.monotonic() + timeout_s
        with self._progress:
            self._progress_waiters += 1
            try:
                while self.reput_offset < offset:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0 or self._stop.is_set():
                        return False
                    self._progress.wait(remaining)
                return True
            finally:
                self._progress_waiters -= 1

    def notify(self, _end: int = 0) -> None:
        with self._cond:
            self._woken = True
            self._cond.notify_all()

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="sparkmq-reput", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self.notify()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        self.catch_up()  # whatever was appended before the writers stopped

    def _run(self) -> None:
        """Dispatch when woken: again at once while a round left bytes it had seen (a full round) or a
        notify came during it; else wait for the next notify (or the 1 s safety tick).  Bytes appended
        without a notify yet (a SYNC group still in its fdatasync) wait for the flusher's wake-up, which
        comes once per group or less often (its pacing)."""
        while not self._stop.is_set():
            with self._cond:
                self._woken = False
            try:
                more = self._round()[1]
            except Exception:
                _log.exception("reput round failed at offset %d; retrying", self.reput_offset)
                more = False
                self._stop.wait(1.0)
            if more:
                continue
            with self._cond:
                if not self._woken and not self._stop.is_set():
                    self._cond.wait(1.0)

    def catch_up(self) -> float:
        """Dispatch synchronously until the reput offset reaches the CommitLog's end; returns the seconds taken."""
        t0 = time.perf_counter()
        while self.dispatch_round():
            pass
        return time.perf_counter() - t0

    def dispatch_round(self) -> bool:
        """Dispatch one chunk; returns whether the reput offset moved."""
        return self._round()[0]

    def _round(self) -> tuple[bool, bool]:
        """Dispatch one chunk; returns whether the reput offset moved, and whether bytes appended
        before the round began are left (a full round)."""
        with self._round_lock:
            start, end = self.reput_offset, self.dispatch_end()
            if start >= end:
                return False, False
            damaged = self.commitlog.quarantine.covering(start)
            if damaged is not None and damaged.phy_offset == start:
                self.queues.put_damaged(damaged)
            batch, nxt = self.commitlog.read_batch(start, min(self.batch_bytes, end - start))
            if nxt > end and self.end_limit is not None:
                return False, False  # the confirm offset cuts the record at ``start``: wait for the rest
            if start < self.commitlog.min_offset():
                _log.warning("reput offset %d was deleted by retention; skipping to %d", start, nxt)
            if batch is not None:
                self._dispatch(batch)
            self.reput_offset = nxt
        if self._progress_waiters:
            with self._progress:
                self._progress.notify_all()
        return nxt != start, start < nxt < end

    def _dispatch(self, batch: DispatchBatch) -> None:
        grown = self.queues.dispatch(batch)
        for d in list(self.dispatchers):
            try:
                d.dispatch(batch)
            except Exception:
                _log.exception("dispatcher %r failed on batch ending at %d", d, batch.end_offset)
        for topic, qid, max_off in grown:
            for listener in list(self.listeners):
                try:
                    listener(topic, qid, max_off)
                except Exception:
                    _log.exception("arrival listener failed")
