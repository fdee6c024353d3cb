"""A table topic's columns: type mapping, spec validation and the schema evolution rules.

Type mapping (JSON Schema / Spark DDL -> Arrow -> Delta)::

    JSON Schema                          Spark DDL               Arrow                  Delta
    string                               STRING, VARCHAR(n)      string                 string
    string + enum [...]                  -                       string (values checked) string
    string + format: date-time           TIMESTAMP               timestamp[us, UTC]     timestamp
    string + format: date                DATE                    date32                 date
    integer                              BIGINT / LONG           int64                  long
    -                                    INT / SMALLINT / TINYINT int32 / int16 / int8  integer/short/byte
    number                               DOUBLE                  float64                double
    -                                    FLOAT / REAL            float32                float
    -                                    DECIMAL(p,s)            decimal128(p,s)        decimal(p,s)
    boolean                              BOOLEAN                 bool                   boolean
    array + items                        ARRAY<T>                list<T>                array
    object + properties                  STRUCT<a: T, ...>       struct                 struct

``required`` (JSON Schema) / ``NOT NULL`` (DDL) fields must be present and not
null in a body, or the message goes to the dead-letter table; in the Delta
table every column is nullable (so adding a field leaves old rows null).

Metadata columns of a typed table (the prefix ``_sparkmq_`` is reserved)::

    _sparkmq_queue_id int32 | _sparkmq_queue_offset int64 | _sparkmq_commitlog_offset int64
    _sparkmq_msg_id string  | _sparkmq_key string (keys[0]) | _sparkmq_tags string
    _sparkmq_properties map<string,string> | _sparkmq_store_time timestamp[us, UTC]

``partition_by`` ``day(f)`` / ``hour(f)`` adds ``_sparkmq_day`` (date32) /
``_sparkmq_hour`` (string ``YYYY-MM-DD-HH``, UTC) computed from field ``f``
(a timestamp or date column, or ``store_timestamp``).  Raw tables keep the
mirror's columns (:data:`connectors.rows.MESSAGE_SCHEMA`) and its ``store_date``
partition unless ``partition_by`` says otherwise.
"""

from __future__ import annotations

import re

import pyarrow as pa

from ..errors import SchemaChangeError, TableSpecError
from ..rows import MESSAGE_SCHEMA
from .columns import TIMESTAMP, WIDER, Column
from .ddl import parse_ddl
from .jsonschema import parse_json_schema
from .spec import TableSpec

__all__ = [
    "META_PREFIX", "METADATA_FIELDS", "OFFSET_COLUMN", "KEY_COLUMN", "arrow_schema", "check_evolution",
    "columns", "partition_column", "table_schema", "validate_spec",
]

META_PREFIX = "_sparkmq_"
OFFSET_COLUMN = "_sparkmq_commitlog_offset"
KEY_COLUMN = "_sparkmq_key"
STORE_TIME_COLUMN = "_sparkmq_store_time"
METADATA_FIELDS = (
    pa.field("_sparkmq_queue_id", pa.int32()),
    pa.field("_sparkmq_queue_offset", pa.int64()),
    pa.field(OFFSET_COLUMN, pa.int64()),
    pa.field("_sparkmq_msg_id", pa.string()),
    pa.field(KEY_COLUMN, pa.string()),
    pa.field("_sparkmq_tags", pa.string()),
    pa.field("_sparkmq_properties", pa.map_(pa.string(), pa.string())),
    pa.field(STORE_TIME_COLUMN, TIMESTAMP),
)
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_RAW_PARTITION_FIELDS = ("topic", "queue_id", "tags", "store_date")
_TIME_FIELDS_RAW = ("store_timestamp", "born_timestamp")


def columns(spec: TableSpec) -> tuple[Column, ...]:
    """The typed columns of ``spec.schema`` (JSON Schema object or Spark DDL string)."""
    if spec.schema is None:
        raise TableSpecError("table.schema is not set; typed tables need a JSON Schema object or a Spark DDL string")
    cols = parse_json_schema(spec.schema) if isinstance(spec.schema, dict) else parse_ddl(spec.schema)
    _check_names(cols, "")
    return cols


def arrow_schema(spec: TableSpec) -> pa.Schema:
    """The typed columns as Arrow fields (``nullable=False`` marks a required field)."""
    return pa.schema([c.arrow_field() for c in columns(spec)])


def partition_column(spec: TableSpec) -> pa.Field | None:
    """The partition column of the table (a derived one for day()/hour()), or None."""
    part = spec.partition()
    if part is None:
        return pa.field("store_date", pa.date32()) if spec.mode == "raw" else None
    transform, field = part
    if transform == "day":
        return pa.field(f"{META_PREFIX}day", pa.date32())
    if transform == "hour":
        return pa.field(f"{META_PREFIX}hour", pa.string())
    if spec.mode == "raw":
        return MESSAGE_SCHEMA.field(field)
    return next(c.arrow_field(nullable=True) for c in columns(spec) if c.name == field)


def table_schema(spec: TableSpec) -> pa.Schema:
    """Every column of the topic's Delta table, all nullable, in table order."""
    if spec.mode == "raw":
        fields = list(MESSAGE_SCHEMA)
    else:
        fields = [c.arrow_field(nullable=True) for c in columns(spec)] + list(METADATA_FIELDS)
        fields = [_all_nullable(f) for f in fields]
    part = partition_column(spec)
    if part is not None and part.name not in {f.name for f in fields}:
        fields.append(part)
    return pa.schema(fields)


def validate_spec(spec: TableSpec) -> None:
    """Raise TableSpecError naming the problem when ``spec`` cannot make a table."""
    if not spec.enabled:
        if spec.schema is not None:
            columns(spec)
        return
    if spec.write_mode == "upsert" and spec.mode != "typed":
        raise TableSpecError("table.write_mode 'upsert' needs table.mode 'typed' (the key's row holds the fields)")
    cols = columns(spec) if spec.mode == "typed" or spec.schema is not None else ()
    part = spec.partition()
    if part is not None:
        _check_partition(spec, part, cols)


def check_evolution(old: TableSpec, new: TableSpec) -> None:
    """Raise SchemaChangeError unless ``new`` only adds optional fields to (or widens) ``old``'s.

    Also refused while both are enabled: changing mode, write_mode or partition_by
    (set mode ``off`` first; enabling again rebuilds the table from the oldest retained message).
    """
    if not (old.enabled and new.enabled):
        return
    for key in ("mode", "write_mode", "partition_by"):
        if getattr(old, key) != getattr(new, key):
            raise SchemaChangeError(
                f"table.{key}",
                f"cannot change {getattr(old, key)!r} to {getattr(new, key)!r} while the table is enabled; "
                "set table.mode 'off' first, then enable it again (the table is rebuilt from the oldest "
                "retained message)",
            )
    if old.mode == "typed":
        _evolve(columns(old), columns(new), "")


def _evolve(old: tuple[Column, ...], new: tuple[Column, ...], prefix: str) -> None:
    by_name = {c.name: c for c in new}
    for col in old:
        path = f"{prefix}{col.name}"
        if col.name not in by_name:
            raise SchemaChangeError(path, "the field is removed; old rows and producers still carry it "
                                          "(keep it, optional if you like)")
        _evolve_one(col, by_name[col.name], path)
    known = {c.name for c in old}
    for col in new:
        if col.name not in known and col.required:
            raise SchemaChangeError(f"{prefix}{col.name}", "a new field must be optional (old rows have no value)")


def _evolve_one(old: Column, new: Column, path: str) -> None:
    if new.required and not old.required:
        raise SchemaChangeError(path, "an optional field cannot become required (old rows may lack it)")
    if old.kind != new.kind or (old.precision, old.scale) != (new.precision, new.scale):
        widening = new.kind in WIDER.get(old.kind, frozenset())
        verb = "would widen" if widening else "narrows or changes"
        raise SchemaChangeError(
            path, f"type {old.describe()} -> {new.describe()} {verb} the column; a Delta column keeps its type "
                  "(add a new field instead)"
        )
    if new.enum is not None and (old.enum is None or not set(old.enum) <= set(new.enum)):
        raise SchemaChangeError(path, "the allowed values narrow (enum added or values removed)")
    if old.kind == "struct":
        _evolve(old.children, new.children, f"{path}.")
    elif old.kind == "list":
        _evolve_one(old.children[0], new.children[0], f"{path}[]")


def _check_names(cols: tuple[Column, ...], prefix: str) -> None:
    seen: set[str] = set()
    for col in cols:
        path = f"{prefix}{col.name}"
        if not _NAME.match(col.name):
            raise TableSpecError(f"table.schema field {path!r}: names must match [A-Za-z_][A-Za-z0-9_]*")
        if not prefix and col.name.startswith(META_PREFIX):
            raise TableSpecError(f"table.schema field {path!r}: the prefix {META_PREFIX!r} is reserved")
        if col.name.lower() in seen:
            raise TableSpecError(f"table.schema field {path!r}: duplicate name (Delta names ignore case)")
        seen.add(col.name.lower())
        if col.kind == "struct":
            _check_names(col.children, f"{path}.")
        elif col.kind == "list" and col.children[0].kind == "struct":
            _check_names(col.children[0].children, f"{path}[].")


def _check_partition(spec: TableSpec, part: tuple[str | None, str], cols: tuple[Column, ...]) -> None:
    transform, field = part
    if spec.mode == "raw":
        allowed = _TIME_FIELDS_RAW if transform else _RAW_PARTITION_FIELDS
        if field not in allowed:
            raise TableSpecError(f"table.partition_by {spec.partition_by!r}: raw tables partition by "
                                 f"{', '.join(_RAW_PARTITION_FIELDS)} or day()/hour() of store_timestamp")
        return
    col = next((c for c in cols if c.name == field), None)
    if transform:
        if field == "store_timestamp" or (col is not None and col.kind == "timestamp"):
            return
        if transform == "day" and col is not None and col.kind == "date":
            return
        raise TableSpecError(f"table.partition_by {spec.partition_by!r}: {transform}() needs a top-level "
                             "timestamp field (or date for day()) of the schema, or store_timestamp")
    if col is None or col.kind not in ("string", "bool", "int8", "int16", "int32", "int64", "date"):
        raise TableSpecError(f"table.partition_by {spec.partition_by!r}: partition by a top-level string, integer, "
                             "boolean or date field of the schema, or use day()/hour() of a timestamp")


def _all_nullable(f: pa.Field) -> pa.Field:
    t = f.type
    if pa.types.is_struct(t):
        t = pa.struct([_all_nullable(t.field(i)) for i in range(t.num_fields)])
    elif pa.types.is_list(t):
        t = pa.list_(_all_nullable(t.value_field))
    return pa.field(f.name, t, nullable=True)
