"""One background thread running the broker's periodic jobs.

RocketMQ's ``scheduledExecutorService``: each job has its own period; a job
that raises is logged and runs again next period.  ``stop()`` is idempotent
and joins the thread.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Callable

from store.service_thread import ServiceThread

__all__ = ["PeriodicService"]

log = logging.getLogger(__name__)


@dataclass
class _Job:
    name: str
    period_s: float
    fn: Callable[[], object]
    due: float


class PeriodicService:
    """Runs registered jobs at fixed periods on one daemon thread."""

    def __init__(self, name: str = "sparkmq-periodic") -> None:
        self._name = name
        self._jobs: list[_Job] = []
        self._worker = ServiceThread(name, self._run, join_timeout_s=30)

    def add(self, name: str, period_s: float, fn: Callable[[], object]) -> None:
        self._jobs.append(_Job(name, period_s, fn, time.monotonic() + period_s))

    def start(self) -> None:
        self._worker.start()

    def stop(self) -> None:
        self._worker.stop()

    def _run(self) -> None:
        while not self._worker.stopping.is_set():
            now = time.monotonic()
            for job in self._jobs:
                if now >= job.due:
                    job.due = now + job.period_s
                    try:
                        job.fn()
                    except Exception:  # a failing job must not kill the others
                        log.exception("periodic job %s failed", job.name)
            next_due = min((j.due for j in self._jobs), default=now + 1.0)
            self._worker.wait(max(0.01, min(1.0, next_due - time.monotonic())))
