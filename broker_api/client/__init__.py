"""The Python client for sparkmq brokers (HTTP only; FastAPI need not be installed).

    from broker_api.client import SparkMQClient
    client = SparkMQClient(endpoint="http://127.0.0.1:8080")
"""

from __future__ import annotations

from .core import MessageLike, SparkMQClient, Unreachable
from .producer import BufferFullError, ProduceTimeoutError, Producer, ProducerClosedError, SendFuture
from .pop import AckResult, DeadLetter, InvisibleResult, PopMessage, RetryResult
from .results import BrokerUnreachableError, PullResult, QueueInfo, SendError, SendResult

__all__ = ["AckResult", "BrokerUnreachableError", "BufferFullError", "DeadLetter", "InvisibleResult", "MessageLike",
           "PopMessage", "ProduceTimeoutError", "Producer", "ProducerClosedError", "PullResult", "QueueInfo",
           "RetryResult", "SendError", "SendFuture", "SendResult", "SparkMQClient", "Unreachable"]
