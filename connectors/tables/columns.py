"""Column: one field of a typed table, parsed from a JSON Schema or a Spark DDL string.

Both schema languages are parsed into the same small tree, so the Arrow
mapping, the evolution rules and the body checks are written once::

    Column(name, kind, required, children, enum, precision, scale)
      kind: string | bool | int8 | int16 | int32 | int64 | float32 | float64
            | decimal | date | timestamp | list (children = (item,)) | struct (children = fields)
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

__all__ = ["Column", "SCALAR_KINDS", "WIDER"]

TIMESTAMP = pa.timestamp("us", tz="UTC")
_SCALAR_TYPES: dict[str, pa.DataType] = {
    "string": pa.string(),
    "bool": pa.bool_(),
    "int8": pa.int8(),
    "int16": pa.int16(),
    "int32": pa.int32(),
    "int64": pa.int64(),
    "float32": pa.float32(),
    "float64": pa.float64(),
    "date": pa.date32(),
    "timestamp": TIMESTAMP,
}
SCALAR_KINDS = frozenset(_SCALAR_TYPES) | {"decimal"}
# kind -> the kinds it may be changed to without losing values (widening).
WIDER: dict[str, frozenset[str]] = {
    "int8": frozenset({"int16", "int32", "int64"}),
    "int16": frozenset({"int32", "int64"}),
    "int32": frozenset({"int64"}),
    "float32": frozenset({"float64"}),
}


@dataclass(frozen=True)
class Column:
    """One field; ``children`` holds a struct's fields or a list's single item column."""

    name: str
    kind: str
    required: bool = False
    children: tuple[Column, ...] = ()
    enum: tuple[str, ...] | None = None
    precision: int = 0
    scale: int = 0

    def arrow_type(self, *, decoding: bool = False) -> pa.DataType:
        """The column's Arrow type; ``decoding`` gives the type pyarrow's JSON reader can fill
        (dates are read as timestamps, then cast)."""
        if self.kind == "struct":
            return pa.struct([c.arrow_field(decoding=decoding) for c in self.children])
        if self.kind == "list":
            return pa.list_(self.children[0].arrow_field(decoding=decoding))
        if self.kind == "decimal":
            return pa.decimal128(self.precision, self.scale)
        if decoding and self.kind == "date":
            return pa.timestamp("s")
        return _SCALAR_TYPES[self.kind]

    def arrow_field(self, *, decoding: bool = False, nullable: bool | None = None) -> pa.Field:
        keep_null = (not self.required) if nullable is None else nullable
        return pa.field(self.name, self.arrow_type(decoding=decoding), nullable=keep_null or decoding)

    def describe(self) -> str:
        """The type as people write it: ``int64``, ``decimal(12,2)``, ``list<string>``, ``struct``."""
        if self.kind == "decimal":
            return f"decimal({self.precision},{self.scale})"
        if self.kind == "list":
            return f"list<{self.children[0].describe()}>"
        if self.enum is not None:
            return f"enum{list(self.enum)}"
        return self.kind
