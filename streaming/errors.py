"""One error hierarchy for the ``sparkmq`` Spark data source.

Every failure the source or sink reports is a :class:`SparkMQError`. Spark
wraps exceptions raised in Python workers, so each message says what was
wrong and what to do, and names the broker, topic and queue involved.
"""

from __future__ import annotations

__all__ = [
    "SparkMQError",
    "OptionError",
    "BrokerUnavailableError",
    "NamesrvUnavailableError",
    "BrokerRequestError",
    "TopicNotFoundError",
    "DataLossError",
    "SinkError",
    "SinkConflictError",
]


class SparkMQError(Exception):
    """Raised when the sparkmq data source cannot do what was asked."""


class OptionError(SparkMQError, ValueError):
    """Raised when a reader or writer option is missing or malformed."""


class BrokerUnavailableError(SparkMQError):
    """Raised when a broker (every address of it) does not answer; names it and where."""

    def __init__(self, message: str, *, broker: str = "", address: str = "") -> None:
        super().__init__(message)
        self.broker = broker
        self.address = address


class NamesrvUnavailableError(SparkMQError):
    """Raised when no NameServer of the ``namesrv`` option answers."""


class BrokerRequestError(SparkMQError):
    """Raised when a broker rejects a request (4xx/5xx with an error body)."""

    def __init__(self, message: str, *, status: int = 0, code: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.code = code


class TopicNotFoundError(BrokerRequestError):
    """Raised when a subscribed or assigned topic (or queue) does not exist."""


class DataLossError(SparkMQError):
    """Raised when offsets to read are gone (retention) and failOnDataLoss is true."""


class SinkError(SparkMQError):
    """Raised when the sink cannot write or commit a batch."""


class SinkConflictError(SinkError):
    """Raised when a sinkId is reused by a query whose batch ids went backwards."""
