"""Source: one topic's messages as the translator needs them, from a dispatch batch or from raw rows.

A typed table needs the bodies as bytes (for the JSON reader), eight metadata
columns and, only for bodies that fail, the raw mirror row.  Built from a
:class:`store.DispatchBatch` (the writer thread), nothing is converted that is
not written: no body column, no key lists, no topic strings.  Built from raw
rows (the dead-letter replay), the columns are taken from the table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import pyarrow as pa

from store import DispatchBatch

from ..rows import MESSAGE_SCHEMA, batch_to_table, decode_properties_column
from .schema import KEY_COLUMN, OFFSET_COLUMN, STORE_TIME_COLUMN

__all__ = ["META_SOURCES", "Source"]

_TS = pa.timestamp("us", tz="UTC")
META_SOURCES = (  # typed table column <- raw mirror column
    ("_sparkmq_queue_id", "queue_id"), ("_sparkmq_queue_offset", "queue_offset"), (OFFSET_COLUMN, "commitlog_offset"),
    ("_sparkmq_msg_id", "msg_id"), ("_sparkmq_tags", "tags"), ("_sparkmq_properties", "properties"),
    (STORE_TIME_COLUMN, "store_timestamp"),
)


@dataclass
class Source:
    """Messages of one topic in CommitLog order."""

    bodies: list[bytes]
    keys: pa.Array  # first key per message, null when none
    meta: Callable[[np.ndarray | None], dict[str, pa.Array]]  # metadata columns of the rows at idx (None: all)
    raw: Callable[[np.ndarray | None], pa.Table]  # raw mirror rows at idx (None: all)
    first_store_ms: int  # store time of the first message (0 when empty)

    def __len__(self) -> int:
        return len(self.bodies)

    @classmethod
    def from_batch(cls, batch: DispatchBatch) -> Source:
        """Every row of ``batch`` (the caller has already picked the topic's visible rows)."""
        keys = pa.array([k[0] if k else None for k in batch.keys], pa.string())

        def meta(idx: np.ndarray | None) -> dict[str, pa.Array]:
            pick = (lambda a: a) if idx is None else (lambda a: a[idx])
            rows = idx.tolist() if idx is not None else None
            strings = (lambda xs: xs) if rows is None else (lambda xs: [xs[i] for i in rows])
            store_us = np.asarray(pick(batch.store_timestamps), dtype=np.int64) * 1000
            return {
                "_sparkmq_queue_id": pa.array(np.asarray(pick(batch.queue_ids), dtype=np.int32)),
                "_sparkmq_queue_offset": pa.array(np.asarray(pick(batch.queue_offsets), dtype=np.int64)),
                OFFSET_COLUMN: pa.array(np.asarray(pick(batch.phy_offsets), dtype=np.int64)),
                "_sparkmq_msg_id": pa.array(strings(batch.msg_ids), pa.string()),
                "_sparkmq_tags": pa.array(strings(batch.tags), pa.string()),
                "_sparkmq_properties": decode_properties_column(strings(batch.properties_raw)),
                STORE_TIME_COLUMN: pa.array(store_us, pa.int64()).cast(_TS),
                KEY_COLUMN: keys if idx is None else keys.take(pa.array(idx)),
            }

        def raw(idx: np.ndarray | None) -> pa.Table:
            part = batch if idx is None else batch.take(idx)
            return batch_to_table(part, from_offset=0, bodies=True)

        first = int(batch.store_timestamps[0]) if len(batch) else 0
        return cls(batch.bodies, keys, meta, raw, first)

    @classmethod
    def from_table(cls, table: pa.Table) -> Source:
        """Raw mirror rows (:data:`connectors.rows.MESSAGE_SCHEMA`), e.g. read back from a dead-letter table."""
        table = table.select(MESSAGE_SCHEMA.names).combine_chunks()
        keys = _first_keys(table["keys"].combine_chunks())

        def meta(idx: np.ndarray | None) -> dict[str, pa.Array]:
            part = table if idx is None else table.take(pa.array(idx))
            out = {name: part[src].combine_chunks() for name, src in META_SOURCES}
            out[KEY_COLUMN] = keys if idx is None else keys.take(pa.array(idx))
            return out

        def raw(idx: np.ndarray | None) -> pa.Table:
            return table if idx is None else table.take(pa.array(idx))

        first = int(table["store_timestamp"][0].value // 1000) if table.num_rows else 0
        return cls([b or b"" for b in table["body"].to_pylist()], keys, meta, raw, first)


def _first_keys(keys: pa.Array) -> pa.Array:
    return pa.array([k[0] if k else None for k in keys.to_pylist()], pa.string())
