"""Decode JSON bodies into typed Arrow columns, a batch at a time; name what is wrong with bad ones.

The fast path joins the bodies with newlines and hands them to pyarrow's JSON
reader with the table's schema (unknown fields ignored): no Python per field.
Blank bodies are set aside first, so every body yields at least one row and a
row count equal to the body count means one row per body.
When the reader rejects a range (or yields a different number of rows), the
range is halved until the failing bodies are single; only those are looked at
in Python (:mod:`.diagnose`) to say which field is wrong and why.  Required
fields and enum values are then checked column-wise with Arrow compute.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from .columns import Column
from .diagnose import diagnose

__all__ = ["Decoded", "Decoder"]


@dataclass
class Decoded:
    """Typed rows for the bodies at ``good`` (positions in the input) and the reasons for the rest."""

    table: pa.Table
    good: np.ndarray
    errors: dict[int, tuple[str | None, str]] = field(default_factory=dict)  # position -> (field, error)


class Decoder:
    """Decodes bodies for one schema (a tuple of top-level columns)."""

    def __init__(self, columns: tuple[Column, ...], target: pa.Schema) -> None:
        self._columns = columns
        self._target = target
        read = pa.schema([c.arrow_field(decoding=True) for c in columns])
        self._parse = pj.ParseOptions(explicit_schema=read, unexpected_field_behavior="ignore")
        self._empty = read.empty_table()

    def decode(self, bodies: list[bytes]) -> Decoded:
        """Decode every body; bodies that fail land in ``errors`` with the field and the reason."""
        parts: list[tuple[int, pa.Table]] = []
        errors: dict[int, tuple[str | None, str]] = {}
        # A blank body yields no row: decode only the others, so every body decoded yields at least one row
        # and a row count equal to the body count means one row per body.
        blank = [not b or b.isspace() for b in bodies]
        where = np.flatnonzero(~np.asarray(blank, dtype=bool)) if any(blank) else None
        todo = bodies if where is None else [bodies[i] for i in where.tolist()]
        self._decode_range(todo, 0, len(todo), parts, errors)
        good = np.concatenate([np.arange(lo, lo + t.num_rows) for lo, t in parts]) if parts else np.zeros(0, np.int64)
        if where is not None:
            good = where[good]
            errors = {int(where[i]): e for i, e in errors.items()}
            errors.update({i: diagnose(bodies[i], self._columns, None) for i in np.flatnonzero(blank).tolist()})
        table = pa.concat_tables([t for _, t in parts]) if parts else self._empty
        table = table.cast(self._target)
        keep = self._check_values(table, good, errors)
        if not keep.all():
            table, good = table.filter(pa.array(keep)), good[keep]
        return Decoded(table, good, errors)

    def _decode_range(self, bodies: list[bytes], lo: int, hi: int, parts: list[tuple[int, pa.Table]],
                      errors: dict[int, tuple[str | None, str]]) -> None:
        if lo >= hi:
            return
        exc: Exception | None = None
        try:
            table = self._read(bodies[lo:hi])
            if table.num_rows == hi - lo:
                parts.append((lo, table))
                return
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as err:
            exc = err
        if hi - lo == 1:
            errors[lo] = diagnose(bodies[lo], self._columns, exc)
            return
        mid = (lo + hi) // 2
        self._decode_range(bodies, lo, mid, parts, errors)
        self._decode_range(bodies, mid, hi, parts, errors)

    def _read(self, bodies: list[bytes]) -> pa.Table:
        data = b"\n".join(bodies)
        if data.count(b"\n") != len(bodies) - 1 or b"\r" in data:
            # Newlines outside strings are whitespace, and raw newlines inside strings are invalid JSON:
            # replacing them keeps every valid body's meaning and its own line.
            data = b"\n".join(b.replace(b"\n", b" ").replace(b"\r", b" ") for b in bodies)
        opts = pj.ReadOptions(use_threads=False, block_size=max(1 << 20, len(data) + 1))
        return pj.read_json(io.BytesIO(data), read_options=opts, parse_options=self._parse)

    def _check_values(self, table: pa.Table, good: np.ndarray, errors: dict[int, tuple[str | None, str]]) -> np.ndarray:
        keep = np.ones(table.num_rows, dtype=bool)
        if table.num_rows == 0:
            return keep
        for col in self._columns:
            _check_column(col, table.column(col.name), col.name, None, keep, good, errors)
        return keep


def _check_column(col: Column, values: pa.ChunkedArray | pa.Array, path: str, parent_valid: np.ndarray | None,
                  keep: np.ndarray, good: np.ndarray, errors: dict[int, tuple[str | None, str]]) -> None:
    valid = np.asarray(pc.is_valid(values))
    if col.required:
        missing = ~valid if parent_valid is None else (~valid & parent_valid)
        _reject(missing, path, "required field is missing or null", keep, good, errors)
    if col.enum is not None:
        bad = valid & ~np.asarray(pc.is_in(values, value_set=pa.array(col.enum)).fill_null(True))
        _reject(bad, path, f"value is not one of {list(col.enum)}", keep, good, errors)
    if col.kind == "struct":
        for child in col.children:
            sub = pc.struct_field(values, [child.name])
            _check_column(child, sub, f"{path}.{child.name}", valid, keep, good, errors)


def _reject(rows: np.ndarray, path: str, reason: str, keep: np.ndarray, good: np.ndarray,
            errors: dict[int, tuple[str | None, str]]) -> None:
    for i in np.flatnonzero(rows & keep):
        errors[int(good[i])] = (path, f"field {path!r}: {reason}")
    keep &= ~rows
