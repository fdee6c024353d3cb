"""Long polling: park pulls that found nothing until the queue grows.

RocketMQ's PullRequestHoldService, driven by events instead of polling: the
store's reput thread calls :meth:`PullWaiters.on_arrival` when a queue grows;
if a pull is parked on that queue, the event loop is asked (thread-safely)
to set the parked pulls' events.  A parked pull re-reads the queue when its
event fires or when its wait ends.
"""

from __future__ import annotations

import asyncio
import threading

__all__ = ["PullWaiters"]

_Key = tuple[str, int]


class PullWaiters:
    """Parked pulls per (topic, queue), woken from the reput thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._waiters: dict[_Key, set[asyncio.Event]] = {}
        self._lock = threading.Lock()
        self.wakeups = 0

    def on_arrival(self, topic: str, queue_id: int, max_offset: int) -> None:
        """Store arrival listener: runs on the reput thread, must be cheap."""
        key = (topic, queue_id)
        if key not in self._waiters:  # racy read is fine: a late waiter re-checks
            return
        try:
            self._loop.call_soon_threadsafe(self._wake, key)
        except RuntimeError:  # loop closed during shutdown
            pass

    def _wake(self, key: _Key) -> None:
        with self._lock:
            events = self._waiters.pop(key, None)
        if events:
            self.wakeups += 1
            for event in events:
                event.set()

    def register(self, topic: str, queue_id: int) -> asyncio.Event:
        """Park interest in a queue; the caller must re-check the queue after this."""
        event = asyncio.Event()
        with self._lock:
            self._waiters.setdefault((topic, queue_id), set()).add(event)
        return event

    def unregister(self, topic: str, queue_id: int, event: asyncio.Event) -> None:
        with self._lock:
            events = self._waiters.get((topic, queue_id))
            if events is not None:
                events.discard(event)
                if not events:
                    del self._waiters[(topic, queue_id)]

    def wake_all(self) -> None:
        """Release every parked pull (shutdown); callable from any thread."""
        try:
            self._loop.call_soon_threadsafe(self._wake_all_now)
        except RuntimeError:  # loop already closed
            pass

    def _wake_all_now(self) -> None:
        with self._lock:
            keys = list(self._waiters)
        for key in keys:
            self._wake(key)

    def parked(self) -> int:
        with self._lock:
            return sum(len(v) for v in self._waiters.values())
