"""The MERGE of an upsert table: one source row per key, the highest CommitLog offset wins.

Source ``s`` (one batch, :func:`translate.last_per_key` applied) against target ``t``::

    ON t._sparkmq_key = s._sparkmq_key
    WHEN MATCHED AND s.__tombstone AND s.off > t.off          THEN DELETE
    WHEN MATCHED AND NOT s.__tombstone AND s.off > t.off      THEN UPDATE SET every column
    WHEN NOT MATCHED AND NOT s.__tombstone                    THEN INSERT every column

(``off`` = ``_sparkmq_commitlog_offset``.)  The offset guard makes a MERGE that
runs twice change nothing the second time; the app transaction rides in the
MERGE's own commit (``commit_properties``), so a crash mid-MERGE leaves either
the old table and the old version, or both new.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable

from .schema import KEY_COLUMN, OFFSET_COLUMN
from .translate import TOMBSTONE

__all__ = ["upsert_plan"]


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def upsert_plan(schema: pa.Schema) -> Any:
    """A callable running the upsert MERGE of source rows into a table of ``schema``."""
    assignments = {_q(name): f"s.{_q(name)}" for name in schema.names}
    on = f"t.{_q(KEY_COLUMN)} = s.{_q(KEY_COLUMN)}"
    newer = f"s.{_q(OFFSET_COLUMN)} > t.{_q(OFFSET_COLUMN)}"
    tomb = f"s.{_q(TOMBSTONE)}"

    def run(table: DeltaTable, rows: pa.Table, props: CommitProperties | None) -> dict[str, Any]:
        merger = table.merge(rows, on, source_alias="s", target_alias="t", commit_properties=props)
        merger = merger.when_matched_delete(predicate=f"{tomb} AND {newer}")
        merger = merger.when_matched_update(updates=assignments, predicate=f"NOT {tomb} AND {newer}")
        merger = merger.when_not_matched_insert(updates=assignments, predicate=f"NOT {tomb}")
        return merger.execute()

    return run
