"""An asynchronous, batching producer, the interface Kafka users know::

    from broker_api.client import Producer

    with Producer(endpoint="http://127.0.0.1:8080") as p:          # or namesrv="host:9876"
        future = p.send("orders", b"body", key="order-1")           # returns at once
        p.send("orders", "text", callback=lambda result, error: ...)
        p.flush()                                                    # everything acknowledged (or failed)
        print(future.result())                                       # SendResult(broker, "", queue_id, offset)

``send`` places the message (client/producer_route.py: the client's rules,
keyed messages never move broker silently), appends it to its queue's open
batch and returns a :class:`SendFuture`; sender threads post the batches as
Arrow IPC (client/producer_batch.py, client/producer_sender.py).  Within a
queue, messages are stored in send order.  ``SendResult.msg_id`` is empty
unless ``msg_ids=True`` (the broker then answers one id per message, which
costs it ~70 bytes per message); a message is addressed by (topic, queue_id,
queue_offset) either way.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import partial
from typing import Any

from ..errors import BadRequestError, BrokerError
from .core import SparkMQClient
from .producer_batch import (
    BufferFullError,
    Callback,
    ProducerClosedError,
    ProduceTimeoutError,
    SendFuture,
    failed_future,
)
from .producer_http import Connections
from .producer_route import Placer, nothing_waits
from .producer_sender import Accumulator, Limits, Transport

__all__ = ["BufferFullError", "ProduceTimeoutError", "Producer", "ProducerClosedError", "SendFuture"]


class Producer:
    """Send messages without waiting: batches per broker and queue, several requests in flight.

    ``linger_ms``: how long a batch waits for more messages (unless full);
    ``batch_max_messages`` / ``batch_max_bytes``: when a batch is full;
    ``max_in_flight``: requests out at once per broker (one per queue);
    ``buffer_max_bytes``: bodies (+64 B each) buffered or in flight; when full,
    ``send`` waits up to ``max_block_s`` (``on_full="block"``) or raises
    :class:`BufferFullError` at once (``on_full="raise"``).  Other keyword
    arguments (``timeout_s``, ``send_retries``, ``send_timeout_s``, ``token``,
    ``ca_file``, ...) are :class:`SparkMQClient`'s, with its meaning.
    """

    def __init__(self, endpoint: str | None = None, *, namesrv: str | Iterable[str] | None = None,
                 linger_ms: float = 5.0, batch_max_messages: int = 10_000, batch_max_bytes: int = 1 << 20,
                 max_in_flight: int = 5, buffer_max_bytes: int = 64 << 20, on_full: str = "block",
                 max_block_s: float = 60.0, msg_ids: bool = False, route_ttl_s: float = 5.0,
                 send_retries: int = 2, send_timeout_s: float = 3.0, **client_options: Any) -> None:
        _check(linger_ms, batch_max_messages, batch_max_bytes, max_in_flight, buffer_max_bytes, on_full)
        if client_options.get("keyed_failover", "wait") != "wait":
            raise BadRequestError("the Producer keeps keyed messages on their broker (keyed_failover='wait')")
        self.client = SparkMQClient(endpoint, namesrv=namesrv, route_ttl_s=route_ttl_s, send_retries=send_retries,
                                    send_timeout_s=send_timeout_s, **client_options)
        self._placer = Placer(self.client, route_ttl_s)
        limits = Limits(linger_ms / 1000, batch_max_messages, batch_max_bytes, max_in_flight, buffer_max_bytes,
                        on_full == "block", max_block_s, send_retries, send_timeout_s, msg_ids)
        faults = self.client.faults
        transport = Transport(partial(Connections, self.client), self._placer.url, self._placer.free,
                              faults.failed, faults.succeeded)
        self._acc = Accumulator(limits, transport)
        self._placer.busy = self._acc.busy
        self._closed = False

    def send(self, topic: str, body: bytes | str, *, key: str | None = None, tags: str | None = None,
             properties: Mapping[str, str] | None = None, queue_id: int | None = None,
             callback: Callback | None = None) -> SendFuture:
        """Queue one message; returns at once with its future (``callback(result, error)`` runs on a sender thread).

        Raises :class:`BufferFullError` (buffer full and not drained in time) or
        :class:`ProducerClosedError`; every other failure resolves the future.
        """
        if self._closed:
            raise ProducerClosedError("the producer is closed; create a new one to send more messages")
        data = body if type(body) is bytes else body.encode() if isinstance(body, str) else bytes(body)
        try:
            qkey = self._placer.place(topic, key, queue_id)
        except BrokerError as exc:
            return failed_future((topic, "", queue_id), exc, callback)
        future = self._acc.append(qkey, data, key, tags, dict(properties) if properties else None, callback)
        if not qkey[1]:  # a free message: the next ones follow it until its batch closes
            self._placer.filled(topic, future[0])
        return future

    def flush(self, timeout: float | None = None) -> int:
        """Send every buffered message now and wait for all outcomes; returns how many are still unknown (0 = done)."""
        return self._acc.flush(timeout)

    def pending(self) -> int:
        """Messages buffered or in flight."""
        return self._acc.unsent()

    def close(self, timeout: float | None = None) -> int:
        """Flush (up to ``timeout``), stop the sender threads, close connections; safe twice.

        Messages still unsent then fail with :class:`ProducerClosedError`;
        returns how many messages were not acknowledged before closing.
        """
        if self._closed:
            return 0
        self._closed = True
        try:
            return self._acc.close(timeout)
        finally:
            self._placer.busy = nothing_waits  # the placer and the buffer let go of each other: no cycle left
            self.client.close()

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _check(linger_ms: float, batch_max_messages: int, batch_max_bytes: int, max_in_flight: int,
           buffer_max_bytes: int, on_full: str) -> None:
    if linger_ms < 0 or min(batch_max_messages, batch_max_bytes, max_in_flight, buffer_max_bytes) < 1:
        raise BadRequestError(f"linger_ms must be >= 0 and batch_max_messages, batch_max_bytes, max_in_flight, "
                              f"buffer_max_bytes >= 1; got {linger_ms}, {batch_max_messages}, {batch_max_bytes}, "
                              f"{max_in_flight}, {buffer_max_bytes}")
    if on_full not in ("block", "raise"):
        raise BadRequestError(f"on_full is 'block' or 'raise', not {on_full!r}")
