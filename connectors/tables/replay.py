"""Replay a table topic's dead letters with its current schema, exactly once.

Steps (the caller holds the topic's lock, so the writer thread waits)::

    1. read the dead-letter table and translate its raw rows again;
    2. put the rows that now fit into the table:
         append: only offsets the table does not hold yet (a replay cut short by a crash
                 and run again adds nothing twice);
         upsert: MERGE with the offset guard, leaving out keys that have a later message
                 in the CommitLog (a later update already won, a later tombstone deleted it);
    3. overwrite the dead-letter table with the rows that still fail (with their new error).

A crash between 2 and 3 leaves rows in both tables; running the replay again
finds them in the table (step 2 adds nothing) and removes them from the dead letters.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from deltalake import write_deltalake
from deltalake.exceptions import DeltaError

from store import MessageStore

from .. import upkeep
from ..errors import TableError
from ..rows import MESSAGE_SCHEMA
from .merge import upsert_plan
from .schema import KEY_COLUMN, OFFSET_COLUMN, STORE_TIME_COLUMN
from .source import Source
from .translate import TOMBSTONE, conform

if TYPE_CHECKING:
    from .topic import TopicTable

__all__ = ["replay_dead_letters"]


def replay_dead_letters(table: TopicTable, store: MessageStore) -> dict[str, int]:
    """Move the dead letters of ``table`` that now fit; return ``{"replayed": n, "remaining": m}``."""
    if table.dlq is None:
        raise TableError(f"topic {table.topic!r} has no dead-letter table (only typed tables have one)")
    table.dlq.refresh()
    letters = pa.table(table.dlq.table.to_pyarrow_table())
    if letters.num_rows == 0:
        return {"replayed": 0, "remaining": 0}
    raw = conform(letters, MESSAGE_SCHEMA).sort_by("commitlog_offset")
    out = table.translator.translate(Source.from_table(raw))
    try:
        if table.spec.write_mode == "upsert":
            fresh = _not_superseded(out.rows, store, table.topic)
            if fresh.num_rows:
                upsert_plan(table.translator.schema)(table.table.table, fresh, None)
        else:
            fresh = _not_in_table(out.rows, table)
            if fresh.num_rows:
                write_deltalake(table.table.table, fresh, mode="append", post_commithook_properties=upkeep.NO_HOOKS)
        write_deltalake(table.dlq.table, out.dlq, mode="overwrite", post_commithook_properties=upkeep.NO_HOOKS)
    except (DeltaError, OSError) as exc:
        raise TableError(f"replay of the dead letters of {table.topic!r} failed: {exc}; run it again") from exc
    table.table.refresh()
    table.rows = table.table.row_count()
    table.version = table.table.table.version()
    table.dlq.refresh()
    table.dlq_rows = out.dlq.num_rows
    return {"replayed": letters.num_rows - out.dlq.num_rows, "remaining": out.dlq.num_rows}


def _not_in_table(rows: pa.Table, table: TopicTable) -> pa.Table:
    if rows.num_rows == 0:
        return rows
    dataset = table.table.table.to_pyarrow_dataset()
    present = dataset.to_table(columns=[OFFSET_COLUMN],
                               filter=ds.field(OFFSET_COLUMN).isin(rows[OFFSET_COLUMN].combine_chunks()))
    if present.num_rows == 0:
        return rows
    return rows.filter(pc.invert(pc.is_in(rows[OFFSET_COLUMN], value_set=present[OFFSET_COLUMN].combine_chunks())))


def _not_superseded(rows: pa.Table, store: MessageStore, topic: str) -> pa.Table:
    """Rows whose key has no later message in the CommitLog (found through the key index)."""
    if rows.num_rows == 0:
        return rows
    rows = rows.filter(pc.invert(rows[TOMBSTONE]))
    now_ms = int(time.time() * 1000) + 1000
    keep = np.ones(rows.num_rows, dtype=bool)
    keys = rows[KEY_COLUMN].to_pylist()
    offsets = rows[OFFSET_COLUMN].to_pylist()
    stamps = pc.cast(rows[STORE_TIME_COLUMN], pa.int64()).to_pylist()
    for i, (key, offset, micros) in enumerate(zip(keys, offsets, stamps)):
        later = store.query_by_key(topic, key, micros // 1000, now_ms, max_count=256)
        keep[i] = not any(m.phy_offset > offset for m in later)
    return rows.filter(pa.array(keep))
