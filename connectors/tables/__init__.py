"""Topics as Delta tables: a table per topic (raw or typed, append or upsert) and its dead-letter table."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_getattr

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

__getattr__ = lazy_getattr(__name__, _WHERE)

__all__ = sorted(_WHERE)  # the face: every lazily loaded name above
