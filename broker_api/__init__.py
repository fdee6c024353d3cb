"""sparkmq's broker: settings, FastAPI app, routes, long polling, groups, transactions, CLI."""

from __future__ import annotations

from .app import create_app
from .broker import Broker
from .client import (
    BrokerUnreachableError,
    PullResult,
    QueueInfo,
    SendResult,
    SparkMQClient,
)
from .errors import (
    ERROR_TABLE,
    BadJsonError,
    BadMessageError,
    BadOffsetError,
    BadRequestError,
    BadTopicNameError,
    BatchTooLargeError,
    BrokerBusyError,
    BrokerError,
    GroupDisabledError,
    GroupNotFoundError,
    NotReadyError,
    PermissionDeniedError,
    QueueNotFoundError,
    TopicExistsError,
    TopicNotFoundError,
    TransactionNotFoundError,
    TransactionStateError,
    UnsupportedMediaTypeError,
)
from .settings import BrokerSettings, load_settings
from .wire import ARROW_STREAM, PULL_SCHEMA

__all__ = [
    "ARROW_STREAM",
    "ERROR_TABLE",
    "PULL_SCHEMA",
    "BadJsonError",
    "BadMessageError",
    "BadOffsetError",
    "BadRequestError",
    "BadTopicNameError",
    "BatchTooLargeError",
    "Broker",
    "BrokerUnreachableError",
    "BrokerBusyError",
    "BrokerError",
    "BrokerSettings",
    "GroupDisabledError",
    "GroupNotFoundError",
    "NotReadyError",
    "PermissionDeniedError",
    "PullResult",
    "QueueInfo",
    "QueueNotFoundError",
    "SendResult",
    "SparkMQClient",
    "TopicExistsError",
    "TopicNotFoundError",
    "TransactionNotFoundError",
    "TransactionStateError",
    "UnsupportedMediaTypeError",
    "create_app",
    "load_settings",
]
