"""RocketMQ's scanNotActiveBroker: drop brokers that stopped heartbeating."""

from __future__ import annotations

import logging
import threading

from .route_table import RouteTable

__all__ = ["ScanService"]

log = logging.getLogger("sparkmq.namesrv")


class ScanService:
    """Every ``interval_s`` remove brokers silent for more than ``timeout_s``."""

    def __init__(self, table: RouteTable, interval_s: float, timeout_s: float) -> None:
        self._table = table
        self._interval_s = interval_s
        self._timeout_s = timeout_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="namesrv-scan", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop and join the scan thread; safe to call twice."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._stop.set()
        thread.join(timeout=10)

    def scan_once(self) -> int:
        """One scan; returns how many broker addresses were removed."""
        removed = self._table.expire(self._timeout_s)
        for info in removed:
            log.warning(
                "broker %s id %d (cluster %s) silent for more than %.1fs; removed with its routes",
                info.broker_name, info.broker_id, info.cluster, self._timeout_s,
            )
        return len(removed)

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            try:
                self.scan_once()
            except Exception:  # keep scanning: a bug here must not stop expiry forever
                log.exception("broker scan failed; retrying in %.1fs", self._interval_s)
