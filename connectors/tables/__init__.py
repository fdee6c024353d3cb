"""Topics as Delta tables: a table per topic (raw or typed, append or upsert) and its dead-letter table."""

from __future__ import annotations

from .schema import arrow_schema, check_evolution, table_schema, validate_spec
from .service import TableTopics
from .spec import MODES, TABLE_KEYS, WRITE_MODES, TableSpec
from .topic import Upkeep

__all__ = [
    "MODES", "TABLE_KEYS", "TableSpec", "TableTopics", "Upkeep", "WRITE_MODES", "arrow_schema", "check_evolution", "table_schema",
    "validate_spec",
]
