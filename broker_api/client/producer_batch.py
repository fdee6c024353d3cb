"""One batch of the :class:`~broker_api.client.producer.Producer`: messages for one (topic, broker, queue).

A batch keeps its messages as columns (a list of bodies, and keys, tags and
properties lists only once a message carries one), never as one dict per
message.  It travels as one Arrow IPC stream::

    body      binary    one value buffer + int32 offsets (b"".join of the bodies)
    keys      string    only when some message has a key
    tags      string    only when some message has a tag
    properties map<string,string>  only when some message has properties
    queue_id  int32     the batch's queue, when the producer placed it

The broker writes a batch of plain bodies, one key per row or none, one tag
and one queue by columns (broker_api/http/arrow_produce.py); anything else
takes its per-message path, with the same result.  A placed batch asks for
``answer=summary`` (first offset per queue): message ``i`` of the batch is at
``first_offset + i``.  Every message of a batch gets its outcome when the
batch's answer (or its final failure) arrives: a :class:`SendFuture` is a
batch and an index, so ``send`` creates one small object per message, and a
message's :class:`SendResult` is made when asked for (its callback, or
``result()``).  Once its outcome is reported a batch lets go of its bodies
and callbacks: futures a caller keeps hold little, and give Python's cyclic
garbage collector (whose full passes stop every thread) little to walk.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, overload

import numpy as np
import pyarrow as pa

from ..errors import BrokerError
from .results import SendResult

__all__ = ["ARROW_STREAM", "Batch", "BatchKey", "BufferFullError", "Callback", "ProduceTimeoutError",
           "ProducerClosedError", "SendFuture"]

log = logging.getLogger(__name__)

ARROW_STREAM = "application/vnd.apache.arrow.stream"
BatchKey = tuple[str, str, int | None]  # (topic, broker name, queue id or None = the broker places it)
Callback = Callable[[SendResult | None, BrokerError | None], None]
_PROPS = pa.map_(pa.string(), pa.string())
_SCHEMAS: dict[tuple[str, ...], bytes] = {}  # column names -> the stream's schema message
_END_OF_STREAM = b"\xff\xff\xff\xff\x00\x00\x00\x00"


class BufferFullError(BrokerError):
    """Raised when the producer's buffer (``buffer_max_bytes``) is full and the caller chose not to wait longer."""


class ProducerClosedError(BrokerError):
    """Raised when a message is sent to a closed producer, or was still unsent when it closed."""


class ProduceTimeoutError(BrokerError):
    """Raised when a send's outcome is not known within the time the caller waited for it."""


class Batch:
    """Messages for one (topic, broker, queue), in send order, and their outcome once known."""

    def __init__(self, key: BatchKey, fixed: bool) -> None:
        self.key, self.fixed = key, fixed  # fixed: keyed or explicit queue (never moves broker silently)
        self.created = time.monotonic()
        self.bodies: list[bytes] = []
        self.keys: list[str | None] | None = None
        self.tags: list[str | None] | None = None
        self.props: list[Mapping[str, str] | None] | None = None
        self.callbacks: list[Callback | None] | None = None  # one per message once one has a callback
        self.nbytes = 0
        self.plain = True  # no key, tags or properties yet: a body is all a message adds
        self.open = True  # takes more messages
        self.sending = False  # a sender thread has it
        self.not_before = 0.0  # a retry waits until then
        self.first_failure: float | None = None
        self.moves = 0
        self.taken = self.posted = self.answered = 0.0  # time.monotonic(): a sender took it, sent it, got the answer
        self.results: Sequence[SendResult] | None = None
        self.error: BrokerError | None = None
        self.done = threading.Event()

    def __len__(self) -> int:
        return len(self.bodies)

    def add(self, body: bytes, key: str | None, tags: str | None, props: Mapping[str, str] | None,
            callback: Callback | None) -> int:
        i = len(self.bodies)
        self.bodies.append(body)
        self.nbytes += len(body)
        if key is not None or self.keys is not None:
            self.keys = self.keys if self.keys is not None else [None] * i
            self.keys.append(key)
        if tags is not None or self.tags is not None:
            self.tags = self.tags if self.tags is not None else [None] * i
            self.tags.append(tags)
        if props is not None or self.props is not None:
            self.props = self.props if self.props is not None else [None] * i
            self.props.append(props)
        if callback is not None or self.callbacks is not None:
            self.add_callback(i, callback)
        self.plain = self.keys is None and self.tags is None and self.props is None
        return i

    def add_callback(self, i: int, callback: Callback | None) -> None:
        """Message ``i``'s callback slot (the first callback of a batch makes slots for the messages before it)."""
        if self.callbacks is None:
            self.callbacks = [None] * i
        self.callbacks.append(callback)

    def arrow(self) -> bytes:
        """The batch as one Arrow IPC stream (see the module docstring)."""
        n = len(self.bodies)
        offsets = np.zeros(n + 1, np.int32)
        np.cumsum(np.fromiter(map(len, self.bodies), np.int32, n), out=offsets[1:])
        body = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(self.bodies))])
        cols: dict[str, pa.Array] = {"body": body}
        if self.keys is not None:
            cols["keys"] = pa.array(self.keys, pa.string())
        if self.tags is not None:
            cols["tags"] = pa.array(self.tags, pa.string())
        if self.props is not None:
            cols["properties"] = pa.array([None if p is None else list(p.items()) for p in self.props], _PROPS)
        if self.key[2] is not None:
            cols["queue_id"] = pa.array(np.full(n, self.key[2], np.int32))
        names = tuple(cols)
        schema = _SCHEMAS.get(names)
        if schema is None:  # the stream's first message depends only on which columns there are
            schema = _SCHEMAS[names] = pa.schema([(k, a.type) for k, a in cols.items()]).serialize().to_pybytes()
        batch = pa.RecordBatch.from_arrays(list(cols.values()), names=list(names))
        return b"".join((schema, batch.serialize().to_pybytes(), _END_OF_STREAM))

    def results_from(self, broker: str, answer: Mapping[str, Any]) -> Sequence[SendResult]:
        """Each message's :class:`SendResult` from the broker's answer (summary or full)."""
        status = str(answer.get("status", "SEND_OK"))
        if "results" in answer:
            return [SendResult(broker, r["msg_id"], r["queue_id"], r["queue_offset"], status)
                    for r in answer["results"]]
        (queue,) = answer["queues"]  # a placed batch goes to one queue
        return _Consecutive(broker, int(queue["queue_id"]), int(queue["first_offset"]), status, len(self.bodies))

    def resolve(self, results: Sequence[SendResult] | None, error: BrokerError | None) -> None:
        """Set every message's outcome (once) and run the callbacks (a failing callback is the caller's)."""
        if self.done.is_set():
            return
        cause: BaseException | None = error
        for _ in range(16):  # the sender thread's frames (this batch among their locals): a reference cycle
            if cause is None:
                break
            cause.__traceback__ = None
            cause = cause.__cause__ or cause.__context__
        self.results, self.error = results, error
        self.done.set()
        callbacks, self.callbacks = self.callbacks, None
        for i, callback in enumerate(callbacks or ()):
            if callback is None:
                continue
            try:
                callback(results[i] if results is not None else None, error)
            except Exception:  # the callback's own bug: logged, the sender and the other callbacks go on
                log.exception("a send callback raised")


class _Consecutive(Sequence[SendResult]):
    """The results of a batch stored at consecutive offsets of one queue, each made when asked for."""

    __slots__ = ("_broker", "_first", "_n", "_queue_id", "_status")

    def __init__(self, broker: str, queue_id: int, first: int, status: str, n: int) -> None:
        self._broker, self._queue_id, self._first, self._status, self._n = broker, queue_id, first, status, n

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, i: int) -> SendResult: ...

    @overload
    def __getitem__(self, i: slice) -> list[SendResult]: ...

    def __getitem__(self, i: int | slice) -> SendResult | list[SendResult]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self._n))]
        if not -self._n <= i < self._n:
            raise IndexError(i)
        return SendResult(self._broker, "", self._queue_id, self._first + i % self._n, self._status)


class SendFuture(tuple[Batch, int]):
    """The outcome of one :meth:`Producer.send`: where the message landed, or why it was not stored.

    A (batch, index) pair; built by C code, so a send pays no Python ``__init__``.
    """

    __slots__ = ()

    @property
    def _batch(self) -> Batch:
        return self[0]

    @property
    def _index(self) -> int:
        return self[1]

    def done(self) -> bool:
        return self._batch.done.is_set()

    def result(self, timeout: float | None = None) -> SendResult:
        """The message's :class:`SendResult`; raises the client's error when it was not stored."""
        batch = self._batch
        if not batch.done.wait(timeout):
            raise ProduceTimeoutError(f"the message's outcome is not known after {timeout} s; it is still being sent")
        error = batch.error
        if error is not None:
            try:
                raise error
            finally:  # the traceback holds this frame: without its locals, no cycle through the batch
                del self, batch, error
        assert batch.results is not None
        return batch.results[self._index]

    def stages(self) -> dict[str, float]:
        """When (``time.monotonic()``) the message's batch was opened, taken by a sender, posted and
        answered (0.0: not yet); what a latency benchmark splits send-to-ack time with."""
        b = self._batch
        return {"opened": b.created, "taken": b.taken, "posted": b.posted, "answered": b.answered}

    def exception(self, timeout: float | None = None) -> BrokerError | None:
        """The client's error when the message was not stored, else None (raises ProduceTimeoutError when not known)."""
        if not self._batch.done.wait(timeout):
            raise ProduceTimeoutError(f"the message's outcome is not known after {timeout} s; it is still being sent")
        return self._batch.error


def failed_future(key: BatchKey, error: BrokerError, callback: Callback | None) -> SendFuture:
    """A future that already holds ``error`` (the message could not even be placed)."""
    batch = Batch(key, True)
    i = batch.add(b"", None, None, None, callback)
    batch.resolve(None, error)
    return SendFuture((batch, i))
