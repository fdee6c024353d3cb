"""TopicTable: one enabled table topic: its Delta tables, its buffer of translated rows, its offsets.

Offsets (CommitLog positions, record boundaries)::

    durable   <=   committed   <=   next
    |              |                |
    |              |                +-- read and translated up to here (rows may sit in the buffer)
    |              +-- the table holds every row of the topic before this (nothing pending)
    +-- the main table's app transaction version (resume point after a restart)

The dead-letter table is always committed before the main table for the same
range, so after a crash the main table's version is a safe resume point and
the dead-letter table drops rows it already has (its own app transaction).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from ..errors import TableError
from .delta import TopicDelta
from .merge import upsert_plan
from .schema import partition_column
from .source import Source
from .spec import TableSpec
from .translate import DLQ_SCHEMA, Translator, last_per_key

__all__ = ["TopicTable", "Upkeep", "layout_of"]

_log = logging.getLogger(__name__)
# Record an idle table's resume point once this many CommitLog bytes passed it.
_MARK_BYTES = 64 << 20


@dataclass(frozen=True)
class Upkeep:
    """Commit size and maintenance cadence shared by all table topics."""

    batch_rows: int = 100_000
    compact_every_commits: int = 50
    upsert_compact_every_commits: int = 10
    checkpoint_every_commits: int = 20
    vacuum_retention_hours: float = 168.0


def layout_of(spec: TableSpec) -> dict[str, Any]:
    """What a table's files depend on; a change means the table is rebuilt."""
    return {"format": 1, "mode": spec.mode, "write_mode": spec.write_mode, "partition_by": spec.partition_by}


class TopicTable:
    """The writer state of one table topic; the service thread and ``configure`` share it under ``lock``."""

    def __init__(self, topic: str, spec: TableSpec, uri: str, dlq_uri: str, app_id: str, upkeep: Upkeep) -> None:
        self.topic = topic
        self.lock = threading.RLock()
        self._upkeep = upkeep
        self._app_id = app_id
        self.translator = Translator(spec)
        _rebuild_if_changed(spec, uri, dlq_uri, self.translator.schema)
        part = partition_column(spec)
        self.table = TopicDelta(uri, app_id, self.translator.schema, partition=part.name if part else None,
                                offset_column=self.translator.offset_column, layout=layout_of(spec),
                                cdf=spec.write_mode == "upsert")
        self.table.add_columns(self.translator.schema)
        self.dlq: TopicDelta | None = None
        if spec.mode == "typed":
            self.dlq = TopicDelta(dlq_uri, app_id, DLQ_SCHEMA, partition="store_date",
                                  offset_column="commitlog_offset", layout={"format": 1, "dead_letters": topic})
        self.durable = self.table.committed_offset()
        self.next = self.committed = self.durable or 0
        self.rows = self.table.row_count()
        self.dlq_rows = self.dlq.row_count() if self.dlq else 0
        self.commits = 0
        self.last_error: str | None = None
        self.stalled_until = 0.0  # monotonic time before which the writer leaves this table alone (after a failure)
        self.caught_up_at = time.time()
        self._pending: list[pa.Table] = []
        self._pending_dlq: list[pa.Table] = []
        self._pending_rows = 0
        self.pending_ts_ms: int | None = None
        self._since = 0.0
        self.closed = False  # set on disable: a writer step still holding this object writes nothing more
        # The table's version as last seen by a writer: status() never touches the DeltaTable (not thread-safe).
        self.version = self.table.table.version()

    @property
    def spec(self) -> TableSpec:
        return self.translator.spec

    def start_at(self, offset: int) -> None:
        """Read from ``offset`` (the oldest retained message when the table has no commit yet)."""
        self.next = self.committed = max(self.committed, offset) if self.durable is not None else offset

    # -- writer thread -------------------------------------------------------

    def absorb(self, src: Source | None, end_offset: int) -> None:
        """Translate this topic's messages (past ``next``) and buffer them; ``next`` moves to ``end_offset``."""
        with self.lock:
            if self.closed:
                return
            if src is not None and len(src):
                out = self.translator.translate(src)
                if not self._pending_rows and not self._pending_dlq:
                    self.pending_ts_ms = src.first_store_ms
                    self._since = time.monotonic()
                self._pending.append(out.rows)
                if out.dlq.num_rows:
                    self._pending_dlq.append(out.dlq)
                self._pending_rows += len(src)
            self.next = max(self.next, end_offset)
            if not self._pending_rows:
                self.committed = self.next

    def due(self) -> bool:
        if not self._pending_rows:
            return False
        lag_s = self.spec.target_lag_s
        return self._pending_rows >= self._upkeep.batch_rows or time.monotonic() - self._since >= lag_s / 2

    def full(self) -> bool:
        return self._pending_rows >= self._upkeep.batch_rows

    def flush(self) -> None:
        """Commit the buffer (dead letters first, then the table), exactly once."""
        with self.lock:
            if self.closed:
                return
            end = self.next
            if self._pending_rows:
                self._commit(end)
            self.committed = end
            if self.committed >= self.next:
                self.caught_up_at = time.time()
            if self.committed - (self.durable or 0) >= _MARK_BYTES:
                self.table.mark(self.committed)
                self.durable = self.committed
            self.version = self.table.table.version()

    def close(self) -> None:
        """Commit the buffer and record the resume point (clean stop)."""
        with self.lock:
            if self.closed:
                return
            self.flush()
            if self.durable is None or self.committed > self.durable:
                self.table.mark(self.committed)
                self.durable = self.committed
                self.version = self.table.table.version()

    def _commit(self, end: int) -> None:
        if self._pending_dlq and self.dlq is not None:
            self.dlq_rows += self.dlq.append(pa.concat_tables(self._pending_dlq), end)
        rows = pa.concat_tables(self._pending)
        if self.spec.write_mode == "upsert":
            self.table.merge(last_per_key(rows), end, upsert_plan(self.translator.schema))
            self.rows = self.table.row_count()
        else:
            self.rows += self.table.append(rows, end)
        self.durable = self.table.done
        self._pending.clear()
        self._pending_dlq.clear()
        self._pending_rows = 0
        self.pending_ts_ms = None
        self.commits += 1
        self.last_error = None
        self._after_commit()

    def _after_commit(self) -> None:
        up = self._upkeep
        every = up.upsert_compact_every_commits if self.spec.write_mode == "upsert" else up.compact_every_commits
        try:
            if every > 0 and self.commits % every == 0:
                for table in (self.table, self.dlq):
                    if table is not None:
                        table.compact()
                        table.vacuum(up.vacuum_retention_hours)
            if up.checkpoint_every_commits > 0 and self.commits % up.checkpoint_every_commits == 0:
                self.table.checkpoint()
        except TableError:
            _log.exception("upkeep of table topic %s failed; the next cadence tries again", self.topic)

    # -- configure -----------------------------------------------------------

    def evolve(self, spec: TableSpec) -> None:
        """Switch to ``spec`` (already checked by check_evolution): commit the buffer, add the new columns."""
        with self.lock:
            self.flush()
            translator = Translator(spec)
            self.table.add_columns(translator.schema)
            self.translator = translator
            self.version = self.table.table.version()

    def status(self, commitlog_max: int) -> dict[str, Any]:
        lag_bytes = max(0, commitlog_max - self.committed)
        if lag_bytes == 0:
            lag_s = 0.0
        elif self.pending_ts_ms is not None:
            lag_s = max(0.0, time.time() - self.pending_ts_ms / 1000)
        else:
            lag_s = max(0.0, time.time() - self.caught_up_at)
        return {
            "mode": self.spec.mode, "write_mode": self.spec.write_mode, "rows": self.rows, "dlq_rows": self.dlq_rows,
            "committed_offset": self.committed, "lag_bytes": lag_bytes, "lag_seconds": round(lag_s, 3),
            "version": self.version, "last_error": self.last_error,
        }


def _rebuild_if_changed(spec: TableSpec, uri: str, dlq_uri: str, schema: pa.Schema) -> None:
    """Drop an old table whose layout or columns no longer fit ``spec`` (it is rebuilt by backfill)."""
    stored = TopicDelta.stored_layout(uri)
    if stored is None:
        if Path(uri).exists() and any(Path(uri).iterdir()):
            _log.warning("table topic directory %s holds no table of ours; it is replaced", uri)
            TopicDelta.drop(uri)
        return
    fits = stored == layout_of(spec)
    if fits:
        from deltalake import DeltaTable  # noqa: PLC0415

        fits = set(DeltaTable(uri).schema().to_arrow().names) <= set(schema.names)  # type: ignore[attr-defined]
    if not fits:
        _log.warning("table topic %s changed layout or dropped columns; rebuilding it from the CommitLog", uri)
        TopicDelta.drop(uri)
        TopicDelta.drop(dlq_uri)
