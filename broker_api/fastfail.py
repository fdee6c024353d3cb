"""Store writes off the event loop, with RocketMQ's BrokerFastFailure.

With SYNC flush, writes run on a small thread pool so concurrent puts share
one fdatasync (group commit).  With ASYNC flush a put never waits for the
disk, so plain produces run inline on the event loop (a thread hop costs
more than the put itself); writes that fsync broker metadata (transaction
decisions) always use the pool.  Two checks answer 503 with ``Retry-After``
instead of letting requests pile up:

* a write that waited in the pool's queue longer than ``max_queue_wait_ms``
  is dropped before it touches the store (RocketMQ: waitTimeMillsInSendQueue);
  for inline writes the queue is the event loop, so a write is dropped while
  the loop's lag (measured by a 50 ms heartbeat) is past that limit;
* while any write has been running longer than ``busy_put_ms`` the store is
  busy (RocketMQ: isOSPageCacheBusy) and new writes are refused up front.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, TypeVar

from .errors import BrokerBusyError
from .settings import FastFailureSection

__all__ = ["WriteGate"]

T = TypeVar("T")
_HEARTBEAT_S = 0.05


class WriteGate:
    """A bounded-wait door to the store's write path."""

    def __init__(self, section: FastFailureSection, inline: bool = False) -> None:
        self._cfg = section
        self._inline = inline
        self._pool: ThreadPoolExecutor | None = None
        self._running: dict[int, float] = {}
        self._lock = threading.Lock()
        self.rejected_wait = 0
        self.rejected_busy = 0
        self.loop_lag_ms = 0.0
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

    async def run(self, fn: Callable[..., T], *args: object, offload: bool = False) -> T:
        """Run ``fn(*args)`` (inline or on the write pool), failing fast as described above.

        ``offload`` forces the pool (for writes that fsync).
        """
        if self._pool is None:
            raise BrokerBusyError("the broker is not accepting writes (starting or stopping); retry shortly")
        self._check_busy()
        if self._inline and not offload:
            return self._call(fn, args, time.monotonic() - self.loop_lag_ms / 1000)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, self._call, fn, args, time.monotonic())

    def _check_busy(self) -> None:
        if self._cfg.enabled:
            busy = self.busy_for_ms()
            if busy > self._cfg.busy_put_ms:
                self.rejected_busy += 1
                raise BrokerBusyError(
                    f"the store is busy (a write has been running for {busy:.0f} ms); retry after "
                    f"{self._cfg.retry_after_s}s", retry_after_s=self._cfg.retry_after_s,
                )

    def _call(self, fn: Callable[..., T], args: tuple[object, ...], enqueued: float) -> T:
        started = time.monotonic()
        waited_ms = (started - enqueued) * 1000
        if self._cfg.enabled and waited_ms > self._cfg.max_queue_wait_ms:
            self.rejected_wait += 1
            raise BrokerBusyError(
                f"the request waited {waited_ms:.0f} ms for the store (limit {self._cfg.max_queue_wait_ms} ms, "
                f"[fast_failure] max_queue_wait_ms); retry after {self._cfg.retry_after_s}s",
                retry_after_s=self._cfg.retry_after_s,
            )
        ident = threading.get_ident()
        with self._lock:
            self._running[ident] = started
        try:
            return fn(*args)
        finally:
            with self._lock:
                self._running.pop(ident, None)
