"""Retention: delete old CommitLog segments when the disk fills up, and
refuse writes past a hard limit (RocketMQ's CleanCommitLogService).

Every ``check_interval`` the service reads the disk use of the store's file
system.  Past the soft ratio it deletes segments older than the retention
period (oldest first, never the active one); past the hard ratio it also
raises a flag that makes puts fail with DiskFullError until space returns.
After deleting, ConsumeQueue min offsets move up and old index files go.
"""

from __future__ import annotations

import logging
import shutil
import threading
from collections.abc import Callable
from pathlib import Path

from .commitlog import CommitLog
from .service_thread import ServiceThread

__all__ = ["RetentionService", "disk_ratio"]

_log = logging.getLogger(__name__)


def disk_ratio(path: Path) -> float:
    usage = shutil.disk_usage(path)
    return usage.used / usage.total if usage.total else 0.0


class RetentionService:
    def __init__(
        self,
        commitlog: CommitLog,
        root: Path,
        retention_hours: float,
        soft_ratio: float,
        hard_ratio: float,
        interval_s: float,
        after_delete: Callable[[int], None],
        dispatched: Callable[[], int],
    ) -> None:
        self.commitlog, self.root = commitlog, root
        self.max_age_s = retention_hours * 3600
        self.soft, self.hard, self.interval = soft_ratio, hard_ratio, interval_s
        self.after_delete = after_delete
        self.dispatched = dispatched  # never delete what the reput service has not read
        self.disk_full = False
        self.last_ratio = 0.0
        self._worker = ServiceThread("sparkmq-retention", self._run)
        self._lock = threading.Lock()

    def start(self) -> None:
        self.check_disk()
        self._worker.start()

    def stop(self) -> None:
        self._worker.stop()

    def check_disk(self) -> float:
        self.last_ratio = disk_ratio(self.root)
        full = self.last_ratio >= self.hard
        if full != self.disk_full:
            (_log.error if full else _log.info)("disk use %.1f%% %s the hard limit %.1f%%",
                                                 self.last_ratio * 100, "passed" if full else "is back under",
                                                 self.hard * 100)
        self.disk_full = full
        return self.last_ratio

    def _run(self) -> None:
        while not self._worker.wait(self.interval):
            try:
                self.run_once(force=False)
            except OSError:
                _log.exception("retention round failed")

    def run_once(self, force: bool) -> int:
        """One round; ``force`` deletes every non-active segment regardless of age and disk."""
        with self._lock:
            ratio = self.check_disk()
            deleted = 0
            if force or ratio >= self.soft:
                deleted = self.commitlog.queue.delete_expired(0 if force else self.max_age_s, force, limit=1 << 30,
                                                              below=self.dispatched())
            if deleted:
                self.after_delete(self.commitlog.min_offset())
                self.check_disk()
            return deleted
