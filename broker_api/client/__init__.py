"""The Python client for sparkmq brokers (HTTP only; FastAPI need not be installed).

    from broker_api.client import SparkMQClient
    client = SparkMQClient(endpoint="http://127.0.0.1:8080")

The face is lazy (PEP 562): each name loads its module on first use, so ``SparkMQClient``
does not load the :class:`Producer`'s pyarrow and numpy, and importing the package loads neither httpx.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_getattr

if TYPE_CHECKING:
    from .core import MessageLike, SparkMQClient, Unreachable
    from .pop import AckResult, DeadLetter, InvisibleResult, PopMessage, RetryResult
    from .producer import BufferFullError, ProduceTimeoutError, Producer, ProducerClosedError, SendFuture
    from .results import BrokerUnreachableError, PullResult, QueueInfo, SendError, SendResult

_WHERE: dict[str, str] = {
    **dict.fromkeys(("MessageLike", "SparkMQClient", "Unreachable"), "core"),
    **dict.fromkeys(("AckResult", "DeadLetter", "InvisibleResult", "PopMessage", "RetryResult"), "pop"),
    **dict.fromkeys(("BufferFullError", "ProduceTimeoutError", "Producer", "ProducerClosedError", "SendFuture"),
                    "producer"),
    **dict.fromkeys(("BrokerUnreachableError", "PullResult", "QueueInfo", "SendError", "SendResult"), "results"),
}

__getattr__ = lazy_getattr(__name__, _WHERE)

__all__ = sorted(_WHERE)  # the face: every lazily loaded name above
