"""A bounded hand-off from the reput thread to the mirror thread.

``offer`` never blocks: when the queued batches already hold ``max_bytes`` of
CommitLog records, the batch is dropped and ``dropped`` is raised.  The mirror
notices the hole (the next batch does not start where the last one ended, or
``dropped`` is set while the inbox is empty) and reads the missing range back
from the CommitLog, so dropping costs time, never rows.
"""

from __future__ import annotations

import threading
from collections import deque

import numpy as np

from store import DispatchBatch

__all__ = ["Inbox"]


class Inbox:
    """Bounded FIFO of dispatch batches measured in CommitLog bytes."""

    def __init__(self, max_bytes: int) -> None:
        self._max_bytes = max_bytes
        self._batches: deque[tuple[DispatchBatch, int]] = deque()
        self._bytes = 0
        self._cond = threading.Condition()
        self._dropped = False
        self._dropped_total = 0
        self._closed = False

    def offer(self, batch: DispatchBatch) -> bool:
        """Queue ``batch`` unless the inbox is full or closed; return whether it was queued."""
        size = int(np.sum(batch.sizes)) if len(batch) else 0
        with self._cond:
            if self._closed:
                return False
            if self._batches and self._bytes + size > self._max_bytes:
                self._dropped = True
                self._dropped_total += 1
                return False
            self._batches.append((batch, size))
            self._bytes += size
            self._cond.notify()
            return True

    def take(self, timeout: float) -> DispatchBatch | None:
        """The oldest batch, waiting at most ``timeout`` seconds for one."""
        with self._cond:
            if not self._batches and not self._closed:
                self._cond.wait(max(0.0, timeout))
            if not self._batches:
                return None
            batch, size = self._batches.popleft()
            self._bytes -= size
            return batch

    def take_dropped(self) -> bool:
        """Whether batches were dropped since the last call (and the inbox is now empty)."""
        with self._cond:
            if self._batches or not self._dropped:
                return False
            self._dropped = False
            return True

    def head_timestamp_ms(self) -> int | None:
        """Store timestamp (ms) of the oldest queued record."""
        with self._cond:
            for batch, _ in self._batches:
                if len(batch):
                    return int(batch.store_timestamps[0])
            return None

    def close(self) -> None:
        """Refuse further batches and wake the consumer."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    @property
    def dropped_total(self) -> int:
        return self._dropped_total
