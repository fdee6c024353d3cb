"""TableTopics: the service that writes every table topic's Delta tables from the CommitLog.

One writer thread, off the produce path::

    CommitLog --read_dispatch_batches(min next of the enabled tables)--> route rows by topic
        --> TopicTable.absorb (translate, buffer) --> TopicTable.flush (DLQ, then table; app txn)

Each table resumes at its own committed CommitLog offset (the Delta app
transaction of its last commit); a table enabled on a topic that already has
messages starts at the oldest retained message (backfill).  Commits happen at
least every ``target_lag_s / 2`` while rows arrive, or every ``batch_rows`` rows.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from store import DispatchBatch, MessageStore
from store.service_thread import ServiceThread

from ..errors import TableError
from ..rows import keep_mask
from .replay import replay_dead_letters
from .schema import check_evolution, validate_spec
from .source import Source
from .spec import TableSpec
from .topic import TopicTable, Upkeep

__all__ = ["TableTopics"]

_log = logging.getLogger(__name__)
_READ_BYTES = 8 << 20
_READ_LIMIT = 64 << 20  # CommitLog bytes read per step before commits are considered
_POLL_S = 0.1
_STOP_WAIT_S = 5.0
_STOP_CATCH_UP_BYTES = 64 << 20
_RETRY_S = 1.0


class TableTopics:
    """Delta tables of the topics whose ``table.mode`` is not ``off``, written exactly once."""

    def __init__(self, store: MessageStore, root_dir: str | Path, *, app_id: str = "sparkmq",
                 upkeep: Upkeep | None = None) -> None:
        self._store = store
        self._root = str(root_dir)
        self._app_id = app_id
        self._upkeep = upkeep or Upkeep()
        self._topics: dict[str, TopicTable] = {}
        self._lock = threading.Lock()  # guards _topics
        self._configuring = threading.Lock()  # one configure at a time
        self._wake = threading.Event()
        self._worker = ServiceThread("sparkmq-table-topics", self._run, join_timeout_s=120, wake=self._wake.set)

    # -- lifecycle -------------------------------------------------------------

    def start(self) -> None:
        """Start the writer thread (tables configured before or after start are both served)."""
        self._worker.start()

    def stop(self) -> None:
        """Commit what is buffered and stop the thread. Safe to call twice."""
        self._worker.stop()

    # -- configuration ---------------------------------------------------------

    def table_uri(self, topic: str) -> str:
        return f"{self._root.rstrip('/')}/{topic}"  # a path or a URI (s3://bucket/prefix): never Path()

    def dlq_uri(self, topic: str) -> str:
        return f"{self._root.rstrip('/')}/{topic}__dlq"

    def configure(self, topic: str, spec: TableSpec | None) -> None:
        """Enable, alter (evolve in place) or disable (None or mode off) the table of ``topic``.

        Raises TableSpecError for a spec that cannot make a table and SchemaChangeError for a
        change the table cannot take; the tables are untouched then.
        """
        with self._configuring:
            self._configure(topic, spec)

    def _configure(self, topic: str, spec: TableSpec | None) -> None:
        if spec is None or not spec.enabled:
            with self._lock:
                gone = self._topics.pop(topic, None)
            if gone is not None:
                with gone.lock:  # waits for an in-flight commit; buffered rows are read again on re-enable
                    gone.closed = True
            return
        validate_spec(spec)
        with self._lock:
            current = self._topics.get(topic)
        if current is not None:
            if current.spec != spec:
                check_evolution(current.spec, spec)
                current.evolve(spec)
            return
        table = TopicTable(topic, spec, self.table_uri(topic), self.dlq_uri(topic), self._app_id, self._upkeep)
        table.start_at(self._first_offset(topic))
        with self._lock:
            self._topics[topic] = table
        self._wake.set()

    def _first_offset(self, topic: str) -> int:
        """Where a backfill of ``topic`` starts: its oldest retained message (found through its consume
        queues), else the reput offset (everything before it is in the queues, so nothing is missed)."""
        first = int(self._store.stats()["reput_offset"])  # type: ignore[call-overload]
        for queue_id in self._store.topics().get(topic, []):
            page = self._store.get_messages(topic, queue_id, self._store.min_offset(topic, queue_id), 1,
                                            settle=False)
            if page.messages:
                first = min(first, page.messages[0].phy_offset)
        return max(first, self._store.min_phy_offset())

    def specs(self) -> dict[str, TableSpec]:
        with self._lock:
            return {name: t.spec for name, t in self._topics.items()}

    # -- observability -----------------------------------------------------------

    def status(self) -> dict[str, dict[str, Any]]:
        """Per enabled topic: mode, write_mode, rows, dlq_rows, committed_offset, lag_bytes, lag_seconds,
        version, last_error."""
        end = self._store.max_phy_offset()
        with self._lock:
            tables = list(self._topics.items())
        return {name: t.status(end) for name, t in tables}

    def replay_dlq(self, topic: str) -> dict[str, int]:
        """Translate the dead letters of ``topic`` again with its current schema; rows that now fit
        move into the table (exactly once), the rest stay with their new error."""
        table = self._table(topic)
        with table.lock:
            table.flush()
            return replay_dead_letters(table, self._store)

    def _table(self, topic: str) -> TopicTable:
        with self._lock:
            table = self._topics.get(topic)
        if table is None:
            raise TableError(f"topic {topic!r} has no table; enable one with table.mode 'raw' or 'typed'")
        return table

    # -- writer thread -----------------------------------------------------------

    def _run(self) -> None:
        while not self._worker.stopping.is_set():
            try:
                worked = self._step()
            except Exception as exc:  # noqa: BLE001 - the service must outlive any one failure
                _log.exception("table topics step failed; retrying in %.1f s", _RETRY_S)
                self._note_error(exc)
                self._worker.wait(_RETRY_S)
                continue
            if not worked:
                self._wake.wait(_POLL_S)
                self._wake.clear()
        self._close_all()

    def _active(self) -> list[TopicTable]:
        with self._lock:
            return list(self._topics.values())

    def _step(self) -> bool:
        tables = self._active()
        if not tables:
            return False
        self._flush_due(tables)
        now = time.monotonic()
        # A table whose commit or translation fails waits (and keeps its offset); the others go on.
        readers = [t for t in tables if not t.full() and t.stalled_until <= now]
        if not readers:
            return False
        start = min(t.next for t in readers)
        read = 0
        for batch in self._store.read_dispatch_batches(start, _READ_BYTES):
            self._route(batch, readers)
            read = batch.end_offset - start
            if self._worker.stopping.is_set() or read >= _READ_LIMIT or any(t.full() for t in readers):
                break
        self._flush_due(readers)
        return read > 0

    def _flush_due(self, tables: list[TopicTable]) -> None:
        now = time.monotonic()
        for table in tables:
            if table.due() and table.stalled_until <= now:
                self._flush(table)

    def _route(self, batch: DispatchBatch, tables: list[TopicTable]) -> None:
        visible = keep_mask(batch, 0)
        topics = np.asarray(batch.topics, dtype=object)
        phy = np.asarray(batch.phy_offsets, dtype=np.int64)
        for table in tables:
            if batch.end_offset <= table.next or table.stalled_until > time.monotonic():
                continue
            mask = visible & (topics == table.topic) & (phy >= table.next)
            try:
                if mask.all():
                    table.absorb(Source.from_batch(batch), batch.end_offset)
                elif mask.any():
                    table.absorb(Source.from_batch(batch.take(np.flatnonzero(mask))), batch.end_offset)
                else:
                    table.absorb(None, batch.end_offset)
            except Exception as exc:  # noqa: BLE001 - one table's failure never stops the others
                _log.exception("table topic %s could not translate CommitLog %d..%d; retrying",
                               table.topic, table.next, batch.end_offset)
                self._stall(table, exc)

    def _flush(self, table: TopicTable) -> None:
        try:
            table.flush()
        except Exception as exc:  # noqa: BLE001 - one table's failure never stops the others
            _log.exception("table topic %s could not commit; retrying in %.1f s", table.topic, _RETRY_S)
            self._stall(table, exc)

    @staticmethod
    def _stall(table: TopicTable, exc: Exception) -> None:
        table.last_error = str(exc)
        table.stalled_until = time.monotonic() + _RETRY_S

    def _note_error(self, exc: Exception) -> None:
        for table in self._active():
            table.last_error = str(exc)

    def _close_all(self) -> None:
        """On stop: read what the CommitLog still holds (if little), commit every buffer."""
        tables = self._active()
        try:
            if tables and self._store.settled_reput_offset(_STOP_WAIT_S) - min(t.next for t in tables) <= _STOP_CATCH_UP_BYTES:
                start = min(t.next for t in tables)
                for batch in self._store.read_dispatch_batches(start, _READ_BYTES):
                    self._route(batch, tables)
        except Exception:  # noqa: BLE001 - read again on the next start
            _log.exception("table topics could not read the CommitLog's tail on stop")
        for table in tables:
            try:
                table.close()
            except Exception:  # noqa: BLE001 - what is left is written on the next start
                _log.exception("table topic %s could not commit its last rows; they are written on restart",
                               table.topic)

