"""sparkmq connectors: the Delta Lake mirror of the CommitLog, table topics, SQL and Spark views over them."""

from __future__ import annotations

from .config import MirrorConfig
from .errors import ConnectorError, MirrorError, SqlError, SqlTimeoutError
from .mirror import DeltaMirror
from .mirror_process import MirrorProcess, open_mirror
from .rows import MESSAGE_SCHEMA
from .spark_tables import register_table_topics, table_changes, table_locations
from .spark_view import register_spark_view
from .sql import TABLE_NAME, is_truncated, run_sql

__all__ = [
    "ConnectorError",
    "DeltaMirror",
    "MESSAGE_SCHEMA",
    "MirrorConfig",
    "MirrorError",
    "MirrorProcess",
    "SqlError",
    "SqlTimeoutError",
    "TABLE_NAME",
    "is_truncated",
    "open_mirror",
    "register_spark_view",
    "register_table_topics",
    "run_sql",
    "table_changes",
    "table_locations",
]
