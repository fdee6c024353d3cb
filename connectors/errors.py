"""One error hierarchy for the connectors package."""

from __future__ import annotations

__all__ = ["ConnectorError", "MirrorError", "SqlError", "SqlTimeoutError"]


class ConnectorError(Exception):
    """Raised when a connector (the Delta mirror, SQL, Spark helper) fails."""


class MirrorError(ConnectorError):
    """Raised when the Delta mirror cannot read, write or resume its table."""


class SqlError(ConnectorError, ValueError):
    """Raised when a SQL statement is rejected or fails; the message is the engine's."""


class SqlTimeoutError(SqlError):
    """Raised when a SQL statement runs longer than its timeout."""
