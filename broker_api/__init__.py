"""sparkmq's broker.

Rooms by reader: the broker and its services live here (``broker``,
``topics``, ``groups``, ``transactions``, ``longpoll``, ``fastfail``,
``batcher``, ``registration``, ``metrics``, ``tasks``, ``settings``);
``http/`` is the FastAPI front door, ``cli/`` the ``sparkmq`` command line,
``client/`` the Python client, ``namesrv/`` the NameServer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

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
from .lazy import lazy_getattr
from .settings import BrokerSettings, load_settings

if TYPE_CHECKING:
    from .http.app import create_app
    from .broker import Broker
    from .http.wire import ARROW_STREAM, PULL_SCHEMA

# The app, the broker and the wire formats load FastAPI and pyarrow: imported on first use.
__getattr__ = lazy_getattr(__name__, {"create_app": "http.app", "Broker": "broker",
                                      "ARROW_STREAM": "http.wire", "PULL_SCHEMA": "http.wire"})

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
