"""sparkmq's broker.

Its root holds the wiring (``broker``, ``server``, ``batcher``) and what every
room shares (``errors``, ``metrics``, ``tasks``, ``jsonfile``, ``lazy``).  The
services live in rooms by concern: ``model/`` (topics, groups, POP, delay,
filters), ``transactions/``, ``cluster/`` (registration, replication),
``protection/`` (admission, fast failure, memory), ``auth/`` and
``settings/``; ``http/`` is the FastAPI front door, ``cli/`` the ``sparkmq``
command line, ``client/`` the Python client, ``namesrv/`` the NameServer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .lazy import lazy_getattr

if TYPE_CHECKING:
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
    from .settings.broker import BrokerSettings, load_settings
    from .http.app import create_app
    from .broker import Broker
    from .http.wire import ARROW_STREAM, PULL_SCHEMA

# Every name loads its module on first use: `python -m broker_api serve` imports the broker, not the
# client (httpx), and `from broker_api import SparkMQClient` does not import FastAPI.
_WHERE = {name: "client" for name in (
    "BrokerUnreachableError",
    "PullResult",
    "QueueInfo",
    "SendResult",
    "SparkMQClient",
)}
_WHERE.update({name: "errors" for name in (
    "ERROR_TABLE",
    "BadJsonError",
    "BadMessageError",
    "BadOffsetError",
    "BadRequestError",
    "BadTopicNameError",
    "BatchTooLargeError",
    "BrokerBusyError",
    "BrokerError",
    "GroupDisabledError",
    "GroupNotFoundError",
    "NotReadyError",
    "PermissionDeniedError",
    "QueueNotFoundError",
    "TopicExistsError",
    "TopicNotFoundError",
    "TransactionNotFoundError",
    "TransactionStateError",
    "UnsupportedMediaTypeError",
)})
_WHERE.update({"BrokerSettings": "settings.broker", "load_settings": "settings.broker", "create_app": "http.app",
               "Broker": "broker", "ARROW_STREAM": "http.wire", "PULL_SCHEMA": "http.wire"})
__getattr__ = lazy_getattr(__name__, _WHERE)

__all__ = sorted(_WHERE)  # the face: every lazily loaded name above
