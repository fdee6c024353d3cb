"""Store writes off the event loop, with RocketMQ's BrokerFastFailure.

With SYNC flush, writes that wait for their fdatasync run on a small thread
pool; plain produces append inline on the event loop and then await the group
fdatasync holding no thread (``run(..., inline=True)``, see batcher.py).  With
ASYNC flush a put never waits for the disk, so plain produces run inline (a
thread hop costs more than the put itself); writes that fsync broker metadata
(transaction decisions) always use the pool.  Two checks answer 503 with ``Retry-After``
instead of letting requests pile up:

* a write that waited longer than the store-wait bound since it asked for
  the store (``[fast_failure] max_queue_wait_ms``, by default ``[server]
  max_wait_ms``) is dropped before it touches the store (RocketMQ:
  waitTimeMillsInSendQueue).  The wait is measured per request, from when
  its produce reached the write path, so one slow request (a big Arrow body
  parsed on the loop) never makes the next one look late;
* while any write has been running longer than ``busy_put_ms`` the store is
  busy (RocketMQ: isOSPageCacheBusy) and new writes are refused up front.

With SYNC flush a put includes its fdatasync, and waiting for the disk is
not "busy": both bounds grow by twice the recent average put time (an
exponentially weighted mean), capped at the store's 5 s flush timeout.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, TypeVar

from .admission import OverloadedError
from ..errors import BrokerBusyError
from ..settings.broker import FastFailureSection

__all__ = ["WriteGate"]

T = TypeVar("T")
_HEARTBEAT_S = 0.05
_SYNC_ALLOWANCE_CAP_MS = 5000.0  # the store's group-commit flush timeout
_EWMA = 0.2


class WriteGate:
    """A bounded-wait door to the store's write path."""

    def __init__(self, section: FastFailureSection, inline: bool = False, max_wait_ms: int = 1000) -> None:
        self._cfg = section
        self._inline = inline
        self._sync = not inline
        self.max_wait_ms = float(section.max_queue_wait_ms or max_wait_ms)
        self._pool: ThreadPoolExecutor | None = None
        self._running: dict[int, float] = {}
        self._lock = threading.Lock()
        self.rejected_wait = 0
        self.rejected_busy = 0
        self.loop_lag_ms = 0.0
        self.put_ms_avg = 0.0
        self._heartbeat: concurrent.futures.Future[None] | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start the pool and, from any thread, the loop-lag heartbeat on ``loop``."""
        self._pool = ThreadPoolExecutor(self._cfg.write_threads, thread_name_prefix="sparkmq-write")
        self._heartbeat = asyncio.run_coroutine_threadsafe(self._measure_lag(), loop)

    def stop(self) -> None:
        heartbeat, self._heartbeat = self._heartbeat, None
        if heartbeat is not None:
            heartbeat.cancel()
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

    async def _measure_lag(self) -> None:
        period = _HEARTBEAT_S
        while True:
            before = time.monotonic()
            await asyncio.sleep(period)
            self.loop_lag_ms = max(0.0, (time.monotonic() - before - period) * 1000)

    def busy_for_ms(self) -> float:
        """How long the oldest running write has been running (0 when idle)."""
        with self._lock:
            oldest = min(self._running.values(), default=None)
        return 0.0 if oldest is None else (time.monotonic() - oldest) * 1000

    def allowance_ms(self) -> float:
        """What the disk itself takes (SYNC flush only): added to both bounds."""
        return min(2 * self.put_ms_avg, _SYNC_ALLOWANCE_CAP_MS) if self._sync else 0.0

    async def run(self, fn: Callable[..., T], *args: object, offload: bool = False,
                  enqueued: float | None = None, inline: bool = False) -> T:
        """Run ``fn(*args)`` (inline or on the write pool), failing fast as described above.

        ``offload`` forces the pool (for writes that fsync); ``inline`` runs on the loop even
        with SYNC flush (an append that does not wait for its fdatasync); ``enqueued`` is when
        the request reached the write path (``time.monotonic()``; default now).
        """
        if self._pool is None:
            raise BrokerBusyError("the broker is not accepting writes (starting or stopping); retry shortly")
        self._check_busy()
        since = time.monotonic() if enqueued is None else enqueued
        if (self._inline or inline) and not offload:
            return self._call(fn, args, since)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, self._call, fn, args, since)

    def _check_busy(self) -> None:
        if self._cfg.enabled:
            busy = self.busy_for_ms()
            if busy > self._cfg.busy_put_ms + self.allowance_ms():
                self.rejected_busy += 1
                raise OverloadedError(
                    f"the store is busy (a write has been running for {busy:.0f} ms, [fast_failure] "
                    f"busy_put_ms); retry after {self._cfg.retry_after_s}s",
                    reason="store_busy", retry_after_s=self._cfg.retry_after_s,
                )

    def _call(self, fn: Callable[..., T], args: tuple[object, ...], enqueued: float) -> T:
        started = time.monotonic()
        waited_ms = (started - enqueued) * 1000
        limit = self.max_wait_ms + self.allowance_ms()
        if self._cfg.enabled and waited_ms > limit:
            self.rejected_wait += 1
            raise OverloadedError(
                f"the request waited {waited_ms:.0f} ms for the store (limit {limit:.0f} ms, [server] "
                f"max_wait_ms); retry after {self._cfg.retry_after_s}s",
                reason="store_wait", retry_after_s=self._cfg.retry_after_s,
            )
        ident = threading.get_ident()
        with self._lock:
            self._running[ident] = started
        try:
            return fn(*args)
        finally:
            with self._lock:
                self._running.pop(ident, None)
            took_ms = (time.monotonic() - started) * 1000
            self.put_ms_avg += _EWMA * (took_ms - self.put_ms_avg)
