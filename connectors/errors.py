"""One error hierarchy for the connectors package."""

from __future__ import annotations

__all__ = [
    "ConnectorError", "MirrorError", "SchemaChangeError", "SqlError", "SqlTimeoutError",
    "TableError", "TableSpecError",
]


class ConnectorError(Exception):
    """Raised when a connector (the Delta mirror, SQL, Spark helper) fails."""


class MirrorError(ConnectorError):
    """Raised when the Delta mirror cannot read, write or resume its table."""


class SqlError(ConnectorError, ValueError):
    """Raised when a SQL statement is rejected or fails; the message is the engine's."""


class SqlTimeoutError(SqlError):
    """Raised when a SQL statement runs longer than its timeout."""


class TableError(ConnectorError):
    """Raised when a topic's Delta table cannot be translated, written or resumed."""


class TableSpecError(TableError, ValueError):
    """Raised when a topic's ``table`` settings are malformed (unknown key, bad value, bad schema)."""


class SchemaChangeError(TableError):
    """Raised when a new table schema would narrow, require or remove a field (``field`` names it)."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"schema change refused for field {field!r}: {reason}")
        self.field = field
        self.reason = reason
