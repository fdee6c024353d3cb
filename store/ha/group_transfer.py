"""GroupTransferService: SYNC_MASTER puts wait here until a slave's ack covers them.

Like RocketMQ's GroupTransferService, but with no thread of its own: the
putting thread waits on one condition variable for its batch's end offset;
every ack that moves the high-water mark (``push_to_slave_offset``, the
largest offset any slave acknowledged, monotonic) wakes all waiters, which
re-check and leave.  One wait covers a whole batch of messages.
"""

from __future__ import annotations

import threading
import time

__all__ = ["GroupTransferService"]


class GroupTransferService:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._acked = 0
        self._stopped = False

    @property
    def push_to_slave_offset(self) -> int:
        """The largest CommitLog offset a slave has acknowledged."""
        return self._acked

    def notify_ack(self, offset: int) -> None:
        """A slave acknowledged everything before ``offset``."""
        if offset <= self._acked:
            return
        with self._cond:
            if offset > self._acked:
                self._acked = offset
                self._cond.notify_all()

    def wait_for(self, offset: int, timeout_s: float) -> bool:
        """Block until a slave acknowledged ``offset``; False after ``timeout_s`` or on stop."""
        if self._acked >= offset:
            return True
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._acked < offset:
                left = deadline - time.monotonic()
                if left <= 0 or self._stopped:
                    return False
                self._cond.wait(left)
            return True

    def start(self) -> None:
        with self._cond:
            self._stopped = False

    def stop(self) -> None:
        """Release every waiter (they answer False)."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
