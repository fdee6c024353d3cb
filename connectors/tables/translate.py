"""Translate a topic's messages (a :class:`.source.Source`) into table rows and dead-letter rows.

Input: the messages of one topic in CommitLog order.  Output:

- raw mode: the same rows (plus a derived partition column if asked);
- typed mode: the schema's columns decoded from the bodies, the ``_sparkmq_*``
  metadata columns and the partition column; bodies that do not fit become
  dead-letter rows (the raw columns plus ``error_field`` and ``error``);
- upsert: every key's last message only, with ``__tombstone`` marking empty
  bodies (delete the key); messages without a key are dead letters.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..rows import MESSAGE_SCHEMA
from .decode import Decoder
from .schema import KEY_COLUMN, OFFSET_COLUMN, STORE_TIME_COLUMN, columns, partition_column, table_schema
from .source import Source
from .spec import TableSpec

__all__ = ["DLQ_SCHEMA", "TOMBSTONE", "Translated", "Translator", "conform", "last_per_key"]

DLQ_SCHEMA = pa.schema([*MESSAGE_SCHEMA, pa.field("error_field", pa.string()), pa.field("error", pa.string())])
TOMBSTONE = "__tombstone"


@dataclass
class Translated:
    """Rows for the topic's table and for its dead-letter table."""

    rows: pa.Table
    dlq: pa.Table


class Translator:
    """Translates raw rows of one topic under one spec."""

    def __init__(self, spec: TableSpec) -> None:
        self.spec = spec
        self.schema = table_schema(spec)
        self._part = partition_column(spec)
        self._upsert = spec.write_mode == "upsert"
        self._decoder: Decoder | None = None
        if spec.mode == "typed":
            cols = columns(spec)
            names = {c.name for c in cols}
            self._decoder = Decoder(cols, pa.schema([f for f in self.schema if f.name in names]))

    @property
    def offset_column(self) -> str:
        return "commitlog_offset" if self.spec.mode == "raw" else OFFSET_COLUMN

    def translate(self, src: Source) -> Translated:
        if self._decoder is None:
            return Translated(conform(self._with_partition(src.raw(None)), self.schema), DLQ_SCHEMA.empty_table())
        n = len(src)
        if not self._upsert:
            return self._typed(src, np.ones(n, dtype=bool))
        tomb = np.fromiter(map(len, src.bodies), dtype=np.int64, count=n) == 0
        has_key = np.asarray(pc.is_valid(src.keys))
        out = self._typed(src, ~tomb & has_key, extra_bad=~has_key)
        tombs = self._tombstones(src, tomb & has_key)
        rows = pa.concat_tables([out.rows.append_column(TOMBSTONE, pa.repeat(False, out.rows.num_rows)), tombs])
        return Translated(last_per_key(rows), out.dlq)

    def _typed(self, src: Source, decode_mask: np.ndarray, extra_bad: np.ndarray | None = None) -> Translated:
        assert self._decoder is not None
        everything = bool(decode_mask.all())
        idx = np.flatnonzero(decode_mask)
        bodies = src.bodies if everything else [src.bodies[i] for i in idx.tolist()]
        decoded = self._decoder.decode(bodies)
        good = idx[decoded.good]
        rows = decoded.table
        for name, column in src.meta(None if len(good) == len(src) else good).items():
            rows = rows.append_column(name, column)
        rows = conform(self._with_partition(rows), self.schema)
        errors = [(int(idx[i]), f, e) for i, (f, e) in decoded.errors.items()]
        if extra_bad is not None:
            errors += [(int(i), None, "write_mode 'upsert' needs a message key (keys[0]); this message has none")
                       for i in np.flatnonzero(extra_bad)]
        return Translated(rows, dead_letters(src, errors))

    def _tombstones(self, src: Source, mask: np.ndarray) -> pa.Table:
        idx = np.flatnonzero(mask)
        data = {f.name: pa.nulls(len(idx), f.type) for f in self.schema}
        data.update(src.meta(idx))
        table = conform(self._with_partition(pa.table(data)), self.schema)
        return table.append_column(TOMBSTONE, pa.repeat(True, len(idx)))

    def _with_partition(self, rows: pa.Table) -> pa.Table:
        part = self.spec.partition()
        if part is None or part[0] is None or self._part is None:
            return rows
        transform, field = part
        source = _time_source(rows, field, self.spec.mode)
        value = pc.cast(source, pa.date32()) if transform == "day" else pc.strftime(source, "%Y-%m-%d-%H")
        if self._part.name in rows.column_names:
            rows = rows.drop_columns([self._part.name])
        return rows.append_column(self._part.name, value)


def _time_source(rows: pa.Table, field: str, mode: str) -> pa.ChunkedArray:
    if field == "store_timestamp" and mode == "typed":
        return rows[STORE_TIME_COLUMN]
    column = rows[field]
    if pa.types.is_date(column.type):
        return pc.cast(column, pa.timestamp("us", tz="UTC"))
    return column


def last_per_key(rows: pa.Table) -> pa.Table:
    """Keep each key's row with the highest CommitLog offset (a MERGE needs one source row per key)."""
    if rows.num_rows <= 1:
        return rows
    last = rows.group_by(KEY_COLUMN).aggregate([(OFFSET_COLUMN, "max")])
    return rows.filter(pc.is_in(rows[OFFSET_COLUMN], value_set=last[f"{OFFSET_COLUMN}_max"]))


def dead_letters(src: Source, errors: list[tuple[int, str | None, str]]) -> pa.Table:
    """The raw rows at the given positions with their ``error_field`` and ``error``."""
    if not errors:
        return DLQ_SCHEMA.empty_table()
    errors.sort()
    rows = src.raw(np.asarray([i for i, _, _ in errors], dtype=np.int64)).select(MESSAGE_SCHEMA.names)
    rows = rows.append_column("error_field", pa.array([f for _, f, _ in errors], pa.string()))
    return rows.append_column("error", pa.array([e for _, _, e in errors], pa.string()))


def conform(rows: pa.Table, schema: pa.Schema) -> pa.Table:
    """``rows`` with exactly the columns of ``schema`` in its order (missing ones null), cast to it."""
    cols = [rows[f.name] if f.name in rows.column_names else pa.nulls(rows.num_rows, f.type) for f in schema]
    return pa.Table.from_arrays(cols, names=schema.names).cast(schema)
