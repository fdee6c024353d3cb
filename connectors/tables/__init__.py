"""Topics as Delta tables: a table per topic (raw or typed, append or upsert) and its dead-letter table."""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .schema import arrow_schema, check_evolution, table_schema, validate_spec
    from .service import TableTopics
    from .spec import MODES, TABLE_KEYS, WRITE_MODES, TableSpec
    from .topic import Upkeep

# Each name loads its module on first use: a topic's table spec is read without importing Delta Lake.
_WHERE: dict[str, str] = {
    **dict.fromkeys(("arrow_schema", "check_evolution", "table_schema", "validate_spec"), "schema"),
    "TableTopics": "service",
    **dict.fromkeys(("MODES", "TABLE_KEYS", "WRITE_MODES", "TableSpec"), "spec"),
    "Upkeep": "topic",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    setattr(sys.modules[__name__], name, value)
    return value


__all__ = [
    "MODES", "TABLE_KEYS", "TableSpec", "TableTopics", "Upkeep", "WRITE_MODES", "arrow_schema", "check_evolution", "table_schema",
    "validate_spec",
]
