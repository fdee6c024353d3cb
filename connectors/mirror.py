"""DeltaMirror: a store dispatcher that mirrors the CommitLog into Delta Lake.

Data path::

    reput thread --dispatch()--> Inbox (bounded, drops when full)
                                   |
    mirror thread  <---take()------+      <-- store.read_dispatch_batches()
         |   fills holes (dropped batches, start-up, outages) from the CommitLog
         v
    buffer of Arrow rows --every batch_rows rows (up to 4x while behind) / batch_interval_s--> MirrorTable.append
                                   (app transaction version = CommitLog end offset)

``_next`` is the CommitLog offset the mirror has consumed up to (a record
boundary); ``_committed`` is the offset the Delta table holds everything before.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable

import pyarrow as pa
import pyarrow.compute as pc

from store import DispatchBatch, MessageStore

from .config import MirrorConfig
from .errors import MirrorError
from .inbox import Inbox
from .rows import batch_to_table
from .table import MirrorTable
from .upkeep_thread import UpkeepService

__all__ = ["DeltaMirror"]

_log = logging.getLogger(__name__)
_READ_BYTES = 8 << 20
_RETRY_S = 1.0
# On stop, read at most this much CommitLog back so a clean shutdown leaves the table complete.
_STOP_CATCH_UP_BYTES = 64 << 20
_STOP_WAIT_S = 5.0
# While behind, a commit may hold up to this many times batch_rows (fewer, larger commits).
_MAX_SCALE = 4


class DeltaMirror:
    """Mirrors every user message of ``store`` into one Delta table, exactly once."""

    def __init__(self, store: MessageStore, config: MirrorConfig, *, queue_max_bytes: int = 64 << 20) -> None:
        if not config.table_uri:
            raise MirrorError("mirror table_uri is empty; set [mirror] table_uri or let the broker fill it")
        self._store = store
        self._config = config
        self._app_id = config.app_id or "sparkmq"
        self._inbox = Inbox(queue_max_bytes)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._table: MirrorTable | None = None
        self._lock = threading.Lock()
        self._buffer: list[pa.Table] = []
        self._buffer_rows = 0
        self._buffer_ts: int | None = None
        self._buffer_since = 0.0
        self._next = 0
        self._committed = 0
        self._commits = 0
        self._rows_written = 0
        self._scale = 1
        self._catching_up = False
        self._upkeep = UpkeepService(config)  # compaction, vacuum, checkpoints next to the commits

    # -- lifecycle ---------------------------------------------------------

    def start(self) -> None:
        """Open (or create) the table, resume after its app transaction, start the thread."""
        if self._thread is not None:
            return
        self._table = MirrorTable(self._config.table_uri, self._app_id)
        resume = self._table.committed_offset()
        self._next = self._committed = resume if resume is not None else 0
        self._store.add_dispatcher(self)
        self._upkeep.start()
        self._thread = threading.Thread(target=self._run, name="sparkmq-delta-mirror", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Commit what is queued, then stop the thread. Safe to call twice."""
        if self._thread is not None:
            self._store.remove_dispatcher(self)
        self._inbox.close()
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=120)
            if self._thread.is_alive():
                _log.error("delta mirror thread did not stop within 120 s")
            self._thread = None
        self._upkeep.stop()

    # -- Dispatcher --------------------------------------------------------

    def dispatch(self, batch: DispatchBatch) -> None:
        """Hand ``batch`` to the mirror thread; never blocks the reput thread."""
        self._inbox.offer(batch)

    # -- observability -----------------------------------------------------

    def lag(self) -> dict[str, int | float]:
        """How far the table is behind the CommitLog, in bytes and seconds."""
        commitlog = max(self._commitlog_offset(), self._committed)
        lag_bytes = commitlog - self._committed
        seconds = 0.0
        if lag_bytes > 0:
            oldest = self._oldest_unmirrored_ms()
            if oldest is not None:
                seconds = max(0.0, time.time() - oldest / 1000.0)
        return {
            "mirrored_offset": self._committed,
            "commitlog_offset": commitlog,
            "lag_bytes": lag_bytes,
            "lag_seconds": round(seconds, 3),
        }

    def stats(self) -> dict[str, int]:
        """Counters for logs and benchmarks."""
        return {"commits": self._commits, "rows": self._rows_written, "dropped_batches": self._inbox.dropped_total}

    @property
    def table_uri(self) -> str:
        return self._config.table_uri

    @property
    def config(self) -> MirrorConfig:
        return self._config

    def _commitlog_offset(self) -> int:
        return int(self._store.stats()["commitlog_max_offset"])  # type: ignore[call-overload]

    def _oldest_unmirrored_ms(self) -> int | None:
        with self._lock:
            if self._buffer_ts is not None:
                return self._buffer_ts
        return self._inbox.head_timestamp_ms()

    # -- mirror thread -----------------------------------------------------

    def _run(self) -> None:
        self._guarded(lambda: self._catch_up(None))
        while not self._stop.is_set():
            if self._buffer_rows >= self._target_rows():
                # A commit is due (or failing): take nothing more until it lands.
                self._guarded(lambda: self._maybe_flush(force=True))
                continue
            batch = self._inbox.take(self._wait_time())
            if batch is not None:
                self._guarded(lambda: self._absorb(batch))
            elif self._inbox.take_dropped():
                self._guarded(lambda: self._catch_up(None))
            self._guarded(lambda: self._maybe_flush(force=False))
        self._drain_on_stop()

    def _guarded(self, step: Callable[[], object]) -> None:
        """Run one step; on failure log, wait and let the loop try again."""
        try:
            step()
        except Exception:  # noqa: BLE001 - the mirror must outlive any one failure
            _log.exception("delta mirror step failed; retrying in %.1f s", _RETRY_S)
            self._stop.wait(_RETRY_S)

    def _wait_time(self) -> float:
        if self._buffer_rows or self._next > self._committed:
            return max(0.0, self._buffer_since + self._config.batch_interval_s - time.monotonic())
        return self._config.batch_interval_s

    def _drain_on_stop(self) -> None:
        """Commit what is queued and, if the rest is small, what the CommitLog still holds."""
        try:
            while (batch := self._inbox.take(0)) is not None:
                if len(batch) and int(batch.phy_offsets[0]) > self._next:
                    break
                self._add(batch)
            if self._reput_offset_settled(_STOP_WAIT_S) - self._next <= _STOP_CATCH_UP_BYTES:
                for batch in self._read_from(self._next):
                    self._add(batch)
            self._maybe_flush(force=True)
        except Exception:  # noqa: BLE001 - whatever is left is mirrored on the next start
            _log.exception("delta mirror could not commit its last rows; they are mirrored on restart")

    def _reput_offset_settled(self, timeout_s: float) -> int:
        """The reput offset once it reached the CommitLog's end (or after ``timeout_s``)."""
        deadline = time.monotonic() + timeout_s
        while True:
            stats = self._store.stats()
            reput, end = int(stats["reput_offset"]), int(stats["commitlog_max_offset"])  # type: ignore[call-overload]
            if reput >= end or time.monotonic() >= deadline:
                return reput
            time.sleep(0.01)

    def _absorb(self, batch: DispatchBatch) -> None:
        if batch.end_offset <= self._next:
            return
        first = int(batch.phy_offsets[0]) if len(batch) else batch.end_offset
        if first > self._next:
            self._catch_up(first)
        self._add(batch)
        self._maybe_flush(force=False)

    def _catch_up(self, until: int | None) -> None:
        """Read the CommitLog from ``_next`` up to ``until`` (None: its end) into the table."""
        start = self._next
        self._catching_up = True
        try:
            rows = self._read_back(until)
        finally:
            self._catching_up = False
        if until is not None and self._next < until and not self._stop.is_set():
            # Only BLANK fillers or segments already deleted by retention lie there.
            _log.debug("CommitLog %d..%d holds no records; the mirror moves past it", self._next, until)
            self._advance_to(until)
        if rows:
            _log.info("delta mirror read %d rows back from CommitLog %d..%d", rows, start, self._next)

    def _read_back(self, until: int | None) -> int:
        rows = 0
        for batch in self._read_from(self._next):
            if self._stop.is_set():
                break
            rows += self._add(batch, until if until is not None and batch.end_offset > until else None)
            self._maybe_flush(force=False)
            if until is not None and self._next >= until:
                break
        return rows

    def _read_from(self, offset: int) -> Iterable[DispatchBatch]:
        return self._store.read_dispatch_batches(offset, _READ_BYTES)

    def _add(self, batch: DispatchBatch, until: int | None = None) -> int:
        """Buffer the rows of ``batch`` past ``_next`` (and before ``until``); return how many."""
        end = batch.end_offset if until is None else until
        if end <= self._next:
            return 0
        rows = batch_to_table(batch, from_offset=self._next, bodies=self._config.bodies)
        if until is not None:
            rows = rows.filter(pc.less(rows["commitlog_offset"], until))
        with self._lock:
            if rows.num_rows:
                if not self._buffer_rows:
                    self._buffer_ts = int(rows["store_timestamp"][0].value // 1000)
                self._buffer.append(rows)
                self._buffer_rows += rows.num_rows
            if self._next == self._committed:
                self._buffer_since = time.monotonic()
            self._next = end
        return rows.num_rows

    def _advance_to(self, offset: int) -> None:
        with self._lock:
            if self._next == self._committed:
                self._buffer_since = time.monotonic()
            self._next = offset

    def _maybe_flush(self, *, force: bool) -> None:
        if self._next <= self._committed:
            return
        due = time.monotonic() - self._buffer_since >= self._config.batch_interval_s
        full = self._buffer_rows >= self._target_rows()
        if not (force or due or full):
            return
        with self._lock:
            rows = pa.concat_tables(self._buffer) if self._buffer else None
            end = self._next
        committed = rows is not None and rows.num_rows > 0
        if committed:
            assert self._table is not None and rows is not None
            self._rows_written += self._table.append(rows, end)
            self._commits += 1
        with self._lock:
            self._buffer.clear()
            self._buffer_rows = 0
            self._buffer_ts = None
            self._buffer_since = 0.0
        self._committed = end
        if full and (self._catching_up or self._inbox.head_timestamp_ms() is not None):
            self._scale = min(_MAX_SCALE, self._scale * 2)  # still behind after a full commit: commit more at once
        elif due and not full:
            self._scale = max(1, self._scale // 2)
        if committed:
            self._upkeep.after_commit(self._commits)

    def _target_rows(self) -> int:
        return self._config.batch_rows * self._scale
