"""DiskState: whether a produce would be answered 507 disk_full now, for /readyz and /v1/broker.

A produce is refused 507 in three ways, all in the store: the retention
service's flag (disk use past ``disk_hard_limit_ratio``, checked every
``retention_check_interval_s``), or ``posix_fallocate`` finding no room for
the blocks a write reserves ahead (up to 4 MiB, or the rest of a segment).
This predicate covers each of them::

    full when   the store's flag is up                        (its 507 until the next check)
             or disk use now >= disk_hard_limit_ratio         (the flag's next value)
             or free bytes < the blocks a write may reserve   (fallocate's ENOSPC)
             or the last produce answered 507 and fewer than that many bytes were freed since

The front door reports every produce answer (:meth:`DiskState.note`), so a
507 from any cause turns readiness off at once and a stored produce turns it
back on.
"""

from __future__ import annotations

import shutil
import threading
from pathlib import Path
from typing import Any

from store import MessageStore

__all__ = ["DiskState"]

_AHEAD = 4 << 20  # store.mapped_file reserves this far past a write (or to the segment's end)


class DiskState:
    """The one disk-full predicate of /readyz, /v1/broker and the front door's 507 answers."""

    def __init__(self, store: MessageStore) -> None:
        self._store = store
        cfg = store.config
        self._root = Path(cfg.root_dir)
        self._hard = cfg.disk_hard_limit_ratio
        self.headroom_bytes = min(_AHEAD, cfg.commitlog_segment_bytes)
        self._refused_at_free: int | None = None  # free bytes when a produce was last answered 507
        self._lock = threading.Lock()

    def note(self, status: int) -> None:
        """A produce was answered ``status``: 507 turns the state full, a 2xx clears that."""
        if status == 507:
            free = self._usage()[1]
            with self._lock:
                self._refused_at_free = free
        elif 200 <= status < 300 and self._refused_at_free is not None:
            with self._lock:
                self._refused_at_free = None

    def _usage(self) -> tuple[float, int]:
        try:
            usage = shutil.disk_usage(self._root)
        except OSError:
            return 0.0, 1 << 62
        return (usage.used / usage.total if usage.total else 0.0), usage.free

    def reason(self) -> str | None:
        """Why a produce would be answered 507 now, or None when it would be stored."""
        ratio, free = self._usage()
        if self._store.stats().get("disk_full") or ratio >= self._hard:
            return f"disk use {ratio:.1%} passed the hard limit {self._hard:.0%} ([store] disk_hard_limit_ratio)"
        if free < self.headroom_bytes:
            return f"{free} bytes free, fewer than the {self.headroom_bytes} a write reserves ahead"
        refused = self._refused_at_free
        if refused is not None and free < refused + self.headroom_bytes:
            return f"the last produce was answered 507 disk_full and only {free} bytes are free"
        return None

    def snapshot(self) -> dict[str, Any]:
        """``disk_full``, its reason, the disk use and free bytes now (for /v1/broker)."""
        ratio, free = self._usage()
        reason = self.reason()
        return {"disk_full": reason is not None, "disk_full_reason": reason, "disk_used_ratio": round(ratio, 4),
                "disk_free_bytes": free}
