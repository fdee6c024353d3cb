"""TableSpec: a topic's ``table`` settings, as stored in its metadata and sent over HTTP.

JSON shape (every key optional; unknown keys are refused, naming them)::

    {"mode": "off" | "raw" | "typed",          default "off"
     "schema": {JSON Schema object} | "DDL",   required when mode is "typed"
     "write_mode": "append" | "upsert",        default "append"
     "partition_by": "field" | "day(field)" | "hour(field)" | null,
     "target_lag_s": number > 0}                default 5

``mode = "off"`` keeps the topic in the shared ``messages`` mirror only.  The
schema itself is checked by :mod:`connectors.tables.schema`; this module checks
the shape of the settings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from ..errors import TableSpecError

__all__ = ["MODES", "WRITE_MODES", "TableSpec", "TABLE_KEYS"]

MODES = ("off", "raw", "typed")
WRITE_MODES = ("append", "upsert")
TABLE_KEYS = ("mode", "schema", "write_mode", "partition_by", "target_lag_s")
_PARTITION = re.compile(r"^(?:(day|hour)\(\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)|([A-Za-z_][A-Za-z0-9_]*))$")
_MAX_LAG_S = 3600.0


@dataclass(frozen=True, slots=True)
class TableSpec:
    """A topic's table settings; ``TableSpec()`` is the default (no table of its own)."""

    mode: str = "off"
    schema: dict[str, Any] | str | None = None
    write_mode: str = "append"
    partition_by: str | None = None
    target_lag_s: float = 5.0

    @property
    def enabled(self) -> bool:
        return self.mode != "off"

    @classmethod
    def from_json(cls, obj: Any) -> TableSpec:
        """Parse a ``table`` object; raise TableSpecError naming what is wrong."""
        return cls().merged(obj)

    def merged(self, changes: Any) -> TableSpec:
        """This spec with the keys of ``changes`` replaced (the PUT semantics), validated."""
        if not isinstance(changes, dict):
            raise TableSpecError(f"table settings must be a JSON object, got {type(changes).__name__}")
        unknown = sorted(set(changes) - set(TABLE_KEYS))
        if unknown:
            raise TableSpecError(
                f"unknown table setting(s) {', '.join(unknown)}; valid settings are {', '.join(TABLE_KEYS)}"
            )
        spec = replace(self, **changes)
        spec._validate()
        return spec

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "schema": self.schema,
            "write_mode": self.write_mode,
            "partition_by": self.partition_by,
            "target_lag_s": self.target_lag_s,
        }

    def partition(self) -> tuple[str | None, str] | None:
        """``(transform, field)`` of partition_by: ``("day", "ts")``, ``(None, "region")``, or None."""
        if self.partition_by is None:
            return None
        m = _PARTITION.fullmatch(self.partition_by)
        assert m is not None  # validated
        return (m.group(1), m.group(2)) if m.group(1) else (None, m.group(3))

    def _validate(self) -> None:
        _one_of("mode", self.mode, MODES)
        _one_of("write_mode", self.write_mode, WRITE_MODES)
        if self.schema is not None and not isinstance(self.schema, (dict, str)):
            raise TableSpecError("table.schema must be a JSON Schema object or a Spark DDL string")
        if self.mode == "typed" and not self.schema:
            raise TableSpecError("table.mode 'typed' needs table.schema (a JSON Schema object or a Spark DDL string)")
        if self.partition_by is not None and (
            not isinstance(self.partition_by, str) or not _PARTITION.fullmatch(self.partition_by)
        ):
            raise TableSpecError(
                f"table.partition_by {self.partition_by!r} is invalid; use a top-level field name, "
                "day(field) or hour(field)"
            )
        lag = self.target_lag_s
        if isinstance(lag, bool) or not isinstance(lag, (int, float)) or not 0 < lag <= _MAX_LAG_S:
            raise TableSpecError(f"table.target_lag_s must be a number in (0, {_MAX_LAG_S:g}], got {lag!r}")
        object.__setattr__(self, "target_lag_s", float(lag))


def _one_of(name: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise TableSpecError(f"table.{name} {value!r} is invalid; use one of {', '.join(allowed)}")
