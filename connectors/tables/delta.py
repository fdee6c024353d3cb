"""TopicDelta: one Delta table of a table topic (main or dead-letter), written exactly once.

Every commit (append or MERGE) carries the Delta app transaction
``(app_id, version)`` whose version is the CommitLog offset just past the last
record the commit covers, in the same commit as the rows.  delta-rs records
transactions without checking them, so before each attempt the table's
version for ``app_id`` is read again and rows below it are dropped; a replay
after a crash (even one mid-MERGE: the MERGE commit is atomic) therefore
changes nothing twice.  The table's layout (mode, write_mode, partition) is
kept as JSON in the table's description, so a re-enabled topic can tell
whether its old table still fits.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from deltalake.exceptions import CommitFailedError, DeltaError, TableNotFoundError

from .. import upkeep
from ..errors import TableError

__all__ = ["TopicDelta"]

_log = logging.getLogger(__name__)
_MAX_ATTEMPTS = 8
MergePlan = Callable[[DeltaTable, pa.Table, CommitProperties], dict[str, Any]]


class TopicDelta:
    """A Delta table at ``uri`` written under app id ``app_id``; rows carry their offset in ``offset_column``."""

    def __init__(self, uri: str, app_id: str, schema: pa.Schema, *, partition: str | None, offset_column: str,
                 layout: dict[str, Any], cdf: bool = False) -> None:
        self.uri = uri
        self._app_id = app_id
        self._offset_column = offset_column
        self._table = self._open_or_create(schema, partition, layout, cdf)
        self.done: int | None = None  # the app transaction version last read or written

    @staticmethod
    def stored_layout(uri: str) -> dict[str, Any] | None:
        """The layout an existing table was created with (None: no table, or not ours)."""
        try:
            description = DeltaTable(uri).metadata().description
        except (TableNotFoundError, DeltaError, OSError):
            return None
        try:
            layout = json.loads(description or "")
        except ValueError:
            return None
        return layout if isinstance(layout, dict) else None

    @staticmethod
    def drop(uri: str) -> None:
        """Delete the table's directory (a layout change rebuilds the table)."""
        if "://" in uri:
            raise TableError(f"cannot rebuild {uri}: only local tables can be dropped; delete it and retry")
        shutil.rmtree(uri, ignore_errors=True)

    @property
    def table(self) -> DeltaTable:
        return self._table

    def committed_offset(self) -> int | None:
        """The CommitLog offset the table holds everything before (None: nothing committed yet)."""
        self.refresh()
        self.done = self._table.transaction_version(self._app_id)
        return self.done

    def append(self, rows: pa.Table, end_offset: int) -> int:
        """Append ``rows`` (everything before ``end_offset``) exactly once; return rows written."""
        return self._commit(rows, end_offset, lambda t, todo, props: self._write(t, todo, props))

    def merge(self, rows: pa.Table, end_offset: int, plan: MergePlan) -> int:
        """Run ``plan`` (a MERGE) with ``rows`` exactly once, the app transaction in the MERGE's commit."""
        return self._commit(rows, end_offset, plan)

    def mark(self, end_offset: int) -> None:
        """Record ``end_offset`` with no rows (keeps an idle table's resume point recent)."""
        done = self.committed_offset()
        if done is None or done < end_offset:
            self._commit_with_retries(lambda: self._write(self._table, self.schema().empty_table(),
                                                          self._props(end_offset)))
            self.done = end_offset

    def add_columns(self, schema: pa.Schema) -> list[str]:
        """Add the fields of ``schema`` the table lacks (schema evolution); return their names."""
        have = set(self.schema().names)
        new = [f for f in schema if f.name not in have]
        if not new:
            return []
        from deltalake.schema import Field as DeltaField  # noqa: PLC0415 - only needed here

        try:
            self._table.alter.add_columns([DeltaField.from_arrow(f) for f in new])
        except (DeltaError, OSError) as exc:
            raise TableError(f"cannot add columns {[f.name for f in new]} to {self.uri}: {exc}") from exc
        return [f.name for f in new]

    def schema(self) -> pa.Schema:
        return pa.schema(self._table.schema().to_arrow())  # type: ignore[arg-type]

    def row_count(self) -> int:
        """Rows in the current version (from the log's file statistics)."""
        try:
            actions = pa.table(self._table.get_add_actions(flatten=True))  # type: ignore[arg-type]
        except (DeltaError, OSError) as exc:
            raise TableError(f"cannot read Delta table {self.uri}: {exc}") from exc
        if actions.num_rows == 0 or "num_records" not in actions.column_names:
            return 0
        return int(pc.sum(actions["num_records"]).as_py() or 0)

    def compact(self) -> None:
        self._maintain("compact", upkeep.compact)

    def checkpoint(self) -> None:
        self._maintain("checkpoint", upkeep.checkpoint)

    def vacuum(self, retention_hours: float) -> None:
        self._maintain("vacuum", lambda t: upkeep.vacuum(t, retention_hours))

    def refresh(self) -> None:
        try:
            self._table.update_incremental()
        except (DeltaError, OSError) as exc:
            raise TableError(f"cannot read Delta table {self.uri}: {exc}") from exc

    # -- internals ---------------------------------------------------------

    def _commit(self, rows: pa.Table, end_offset: int, action: MergePlan) -> int:
        for attempt in range(_MAX_ATTEMPTS):
            done = self.committed_offset()
            if done is not None and done >= end_offset:
                return 0
            todo = rows if done is None else rows.filter(pc.greater_equal(rows[self._offset_column], done))
            if todo.num_rows == 0:
                return 0
            try:
                action(self._table, todo, self._props(end_offset))
                self.done = end_offset
                return todo.num_rows
            except CommitFailedError as exc:
                _log.warning("commit to %s lost a race (attempt %d): %s", self.uri, attempt + 1, exc)
                time.sleep(min(0.05 * 2**attempt, 2.0))
            except (DeltaError, OSError) as exc:
                raise TableError(f"cannot write Delta table {self.uri}: {exc}") from exc
        raise TableError(f"gave up writing {self.uri} after {_MAX_ATTEMPTS} lost races")

    def _commit_with_retries(self, step: Callable[[], object]) -> None:
        try:
            step()
        except (DeltaError, OSError) as exc:
            raise TableError(f"cannot write Delta table {self.uri}: {exc}") from exc

    def _props(self, end_offset: int) -> CommitProperties:
        return CommitProperties(app_transactions=[Transaction(self._app_id, end_offset)], max_commit_retries=0)

    @staticmethod
    def _write(table: DeltaTable, rows: pa.Table, props: CommitProperties) -> dict[str, Any]:
        write_deltalake(table, rows, mode="append", commit_properties=props, post_commithook_properties=upkeep.NO_HOOKS)
        return {}

    def _maintain(self, what: str, action: Callable[[DeltaTable], object]) -> None:
        try:
            self.refresh()
            action(self._table)
        except (DeltaError, OSError) as exc:
            raise TableError(f"{what} of Delta table {self.uri} failed: {exc}") from exc

    def _open_or_create(self, schema: pa.Schema, partition: str | None, layout: dict[str, Any],
                        cdf: bool) -> DeltaTable:
        try:
            return DeltaTable(self.uri)
        except TableNotFoundError:
            pass
        except (DeltaError, OSError) as exc:
            raise TableError(f"cannot open Delta table {self.uri}: {exc}") from exc
        if "://" not in self.uri:
            Path(self.uri).mkdir(parents=True, exist_ok=True)
        config = {"delta.enableChangeDataFeed": "true"} if cdf else None
        try:
            return DeltaTable.create(self.uri, schema, mode="ignore", partition_by=[partition] if partition else None,
                                     name=Path(self.uri).name, description=json.dumps(layout, sort_keys=True),
                                     configuration=config)
        except (DeltaError, OSError) as exc:
            raise TableError(f"cannot create Delta table {self.uri}: {exc}") from exc
