"""sparkmq connectors: the Delta Lake mirror of the CommitLog, table topics, SQL and Spark views over them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .lazy import lazy_getattr

if TYPE_CHECKING:
    from .config import MirrorConfig
    from .errors import ConnectorError, MirrorError, SqlError, SqlTimeoutError
    from .mirror import DeltaMirror
    from .mirror_process import MirrorProcess, open_mirror
    from .rows import MESSAGE_SCHEMA
    from .spark_tables import register_table_topics, table_changes, table_locations
    from .spark_view import register_spark_view
    from .sql import TABLE_NAME, is_truncated, run_sql

# Each name loads its module on first use: the broker imports connectors.errors without Delta Lake.
_WHERE: dict[str, str] = {
    "MirrorConfig": "config",
    **dict.fromkeys(("ConnectorError", "MirrorError", "SqlError", "SqlTimeoutError"), "errors"),
    "DeltaMirror": "mirror",
    **dict.fromkeys(("MirrorProcess", "open_mirror"), "mirror_process"),
    "MESSAGE_SCHEMA": "rows",
    **dict.fromkeys(("register_table_topics", "table_changes", "table_locations"), "spark_tables"),
    "register_spark_view": "spark_view",
    **dict.fromkeys(("TABLE_NAME", "is_truncated", "run_sql"), "sql"),
}

__getattr__ = lazy_getattr(__name__, _WHERE)

__all__ = sorted(_WHERE)  # the face: every lazily loaded name above
