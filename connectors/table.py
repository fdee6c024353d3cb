"""The mirror's Delta table: create, resume point, exactly-once appends, upkeep.

Each append carries a Delta app transaction ``(app_id, version)`` whose
version is the CommitLog offset just past the last record the commit covers.
delta-rs records the transaction but does not check it, so before every
attempt this module re-reads the table's version for ``app_id`` and drops the
rows the table already has.  A commit that loses a race is retried the same
way, so a row is in the table exactly once however often we retry.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from deltalake.exceptions import CommitFailedError, DeltaError, TableNotFoundError

from . import upkeep
from .errors import MirrorError
from .rows import MESSAGE_SCHEMA, PARTITION_COLUMN

__all__ = ["MirrorTable"]

_log = logging.getLogger(__name__)
_MAX_ATTEMPTS = 8


def _at_or_past(rows: pa.Table, offset: int) -> pa.Table:
    """Rows with ``commitlog_offset >= offset`` (rows come in offset order; no copy when all qualify)."""
    if rows.num_rows == 0 or rows["commitlog_offset"][0].as_py() >= offset:
        return rows
    return rows.filter(pc.greater_equal(rows["commitlog_offset"], offset))


class MirrorTable:
    """One Delta table written by one mirror (app id)."""

    def __init__(self, uri: str, app_id: str) -> None:
        self._uri = uri
        self._app_id = app_id
        self._table = self._open_or_create()

    @property
    def uri(self) -> str:
        return self._uri

    def committed_offset(self) -> int | None:
        """The CommitLog offset the table holds everything before (None: nothing yet)."""
        self._refresh()
        return self._table.transaction_version(self._app_id)

    def append(self, rows: pa.Table, end_offset: int) -> int:
        """Append ``rows`` (and every row before ``end_offset``) exactly once; return rows written."""
        for attempt in range(_MAX_ATTEMPTS):
            done = self.committed_offset()
            if done is not None and done >= end_offset:
                return 0
            todo = rows if done is None else _at_or_past(rows, done)
            if todo.num_rows == 0:
                return 0
            try:
                self._write(todo, end_offset)
                return todo.num_rows
            except CommitFailedError as exc:
                _log.warning("mirror commit lost a race (attempt %d): %s", attempt + 1, exc)
                time.sleep(min(0.05 * 2**attempt, 2.0))
            except (DeltaError, OSError) as exc:
                raise MirrorError(f"cannot append to Delta table {self._uri}: {exc}") from exc
        raise MirrorError(f"gave up appending to {self._uri} after {_MAX_ATTEMPTS} lost races")

    def compact(self) -> None:
        self._maintain("compact", upkeep.compact)

    def checkpoint(self) -> None:
        self._maintain("checkpoint", upkeep.checkpoint)

    def vacuum(self, retention_hours: float) -> None:
        self._maintain("vacuum", lambda t: upkeep.vacuum(t, retention_hours))

    def _write(self, rows: pa.Table, end_offset: int) -> None:
        props = CommitProperties(app_transactions=[Transaction(self._app_id, end_offset)], max_commit_retries=0)
        write_deltalake(
            self._table, rows, mode="append", commit_properties=props,
            post_commithook_properties=upkeep.NO_HOOKS,
        )

    def _maintain(self, what: str, action: Callable[[DeltaTable], object]) -> None:
        try:
            self._refresh()
            action(self._table)
        except (DeltaError, OSError) as exc:
            raise MirrorError(f"{what} of Delta table {self._uri} failed: {exc}") from exc

    def _refresh(self) -> None:
        try:
            self._table.update_incremental()
        except (DeltaError, OSError) as exc:
            raise MirrorError(f"cannot read Delta table {self._uri}: {exc}") from exc

    def _open_or_create(self) -> DeltaTable:
        try:
            return DeltaTable(self._uri)
        except TableNotFoundError:
            pass
        if "://" not in self._uri:
            Path(self._uri).mkdir(parents=True, exist_ok=True)
        try:
            return DeltaTable.create(
                self._uri, MESSAGE_SCHEMA, mode="ignore", partition_by=[PARTITION_COLUMN],
                name="messages", description="sparkmq CommitLog mirror",
            )
        except (DeltaError, OSError) as exc:
            raise MirrorError(f"cannot create Delta table {self._uri}: {exc}") from exc
