"""One background thread per service, started and stopped the same way everywhere.

RocketMQ's services (flush, reput, HA, the broker's scans) share one
``ServiceThread`` base; here a service holds a :class:`ServiceThread` and
keeps its own loop.  ``start()`` twice starts one thread; ``stop()`` sets
:attr:`ServiceThread.stopping`, wakes the loop and joins it, and is safe twice
or before ``start()``.  A loop that raises is logged, never silent.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

__all__ = ["ServiceThread"]

_log = logging.getLogger(__name__)


class ServiceThread:
    """A named daemon thread running ``target`` until :attr:`stopping` is set."""

    def __init__(self, name: str, target: Callable[[], None], *, join_timeout_s: float = 10.0,
                 wake: Callable[[], None] | None = None) -> None:
        self.name = name
        self.stopping = threading.Event()
        self._target = target
        self._join_timeout_s = join_timeout_s
        self._wake = wake
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None

    def start(self) -> bool:
        """Start the thread; False (and nothing done) when it already runs."""
        if self._thread is not None:
            return False
        self.stopping.clear()
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()
        return True

    def stop(self) -> bool:
        """Ask the loop to end and join it; False when it was not running."""
        thread, self._thread = self._thread, None
        self.stopping.set()
        if thread is None:
            return False
        if self._wake is not None:
            self._wake()
        thread.join(timeout=self._join_timeout_s)
        if thread.is_alive():
            _log.warning("%s did not stop within %.0f s; left to end on its own", self.name,
                         self._join_timeout_s)
        return True

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; True as soon as the service is stopping."""
        return self.stopping.wait(seconds)

    def _run(self) -> None:
        try:
            self._target()
        except Exception:  # a dying service must be visible in the log
            _log.exception("%s stopped on an error", self.name)
            raise
