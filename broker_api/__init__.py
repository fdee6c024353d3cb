"""sparkmq's broker: settings, FastAPI app, routes, long polling, groups, transactions, CLI."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Names are imported on first use, so the CLI starts without loading FastAPI and the store.
_LAZY = {
    "create_app": "app",
    "Broker": "broker",
    "BrokerUnreachableError": "client",
    "PullResult": "client",
    "QueueInfo": "client",
    "SendResult": "client",
    "SparkMQClient": "client",
    "ERROR_TABLE": "errors",
    "BadJsonError": "errors",
    "BadMessageError": "errors",
    "BadOffsetError": "errors",
    "BadRequestError": "errors",
    "BadTopicNameError": "errors",
    "BatchTooLargeError": "errors",
    "BrokerBusyError": "errors",
    "BrokerError": "errors",
    "GroupDisabledError": "errors",
    "GroupNotFoundError": "errors",
    "NotReadyError": "errors",
    "PermissionDeniedError": "errors",
    "QueueNotFoundError": "errors",
    "TopicExistsError": "errors",
    "TopicNotFoundError": "errors",
    "TransactionNotFoundError": "errors",
    "TransactionStateError": "errors",
    "UnsupportedMediaTypeError": "errors",
    "BrokerSettings": "settings",
    "load_settings": "settings",
    "ARROW_STREAM": "wire",
    "PULL_SCHEMA": "wire",
}

if TYPE_CHECKING:
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


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'broker_api' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


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
