"""The producer's buffer and its sender threads.

Batches wait in one queue per (topic, broker, queue), fixed messages (keyed or
explicit queue) apart from free ones (which may move to another broker)::

    ((t, b, q), fixed) -> deque[Batch]     the last one open (takes messages), the first one next to go

A batch goes when it is full (``batch_max_messages`` / ``batch_max_bytes``),
when its first message has waited ``linger_ms``, when a later batch of its
queue is waiting, or on ``flush``; and only when no other batch of its queue
is in flight (so a queue's messages are stored in send order, and a batch
that is sent again can never overtake a later one) and its broker has fewer
than ``max_in_flight`` requests out.  While a queue's batch is in flight its
next batch grows, so batches get bigger exactly when the broker is busy.

Sender threads (``max_in_flight`` per broker, started as brokers appear)
take ready batches and POST them, each over its own kept-alive connection
(client/producer_http.py).  Idle senders do not all watch the clock: one of
them, the leader, sleeps until the soonest batch is due and is woken early
only when something makes a batch due sooner (a full batch, ``flush``, a
freed queue, a new batch with nothing else waiting); the others sleep until
a leader that took a batch hands the role on.  So a batch leaves when due,
and a request costs a wake-up or two instead of one per sender thread.
An answer that proves nothing was stored (refused connection, 503/429 busy)
sends the batch again: a fixed batch (keyed or explicit queue) to the same
broker after its back-off until ``send_timeout_s`` has passed since its first
failure, a free batch to another healthy broker at most ``send_retries``
times.  Any other failure, and a failure that leaves the outcome unknown (the
connection broke after the request went out), resolves every future of the
batch with the client's error: a batch is never stored twice.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..errors import BrokerError
from .producer_batch import (
    ARROW_STREAM,
    Batch,
    BatchKey,
    BufferFullError,
    Callback,
    ProducerClosedError,
    SendFuture,
)
from .producer_http import Connections
from .results import BrokerUnreachableError, SendResult, retryable
from .routing import short_reason

__all__ = ["Accumulator", "Limits", "QueueKey", "Transport"]

log = logging.getLogger(__name__)

QueueKey = tuple[BatchKey, bool]  # (batch key, fixed): keyed/explicit-queue and free messages batch apart
_MESSAGE_OVERHEAD = 64  # buffer bytes counted per message beside its body
_ARROW_HEADERS = {"Content-Type": ARROW_STREAM}
_IDLE_WAIT_S = 1.0
_NEVER = float("inf")


@dataclass(frozen=True, slots=True)
class Limits:
    linger_s: float
    batch_max_messages: int
    batch_max_bytes: int
    max_in_flight: int
    buffer_max_bytes: int
    block_on_full: bool
    max_block_s: float
    send_retries: int
    send_timeout_s: float
    msg_ids: bool


class Transport:
    """How a sender thread posts a batch: its connections, URL lookup, back-off and re-placement."""

    def __init__(self, connect: Callable[[], Connections], url: Callable[[str, str, bool], str | None],
                 replace: Callable[[str, frozenset[str]], QueueKey],
                 failed: Callable[[str, str], float], succeeded: Callable[[str], None]) -> None:
        self.connect, self.url, self.replace, self.failed, self.succeeded = connect, url, replace, failed, succeeded


class Accumulator:
    """The buffer of batches and the sender threads that drain it (a service: ``close`` joins them)."""

    def __init__(self, limits: Limits, transport: Transport) -> None:
        self.limits, self._t = limits, transport
        self._lock = threading.Lock()
        self._drained = threading.Condition(self._lock)  # flush() and a send waiting for buffer room
        self._leader: threading.Condition | None = None  # the idle sender that wakes when the next batch is due
        self._leader_until = _NEVER  # when it wakes by itself
        self._followers: list[threading.Condition] = []  # the other idle senders
        self._queues: dict[QueueKey, deque[Batch]] = {}  # fixed and free messages batch apart
        self._in_flight: set[QueueKey] = set()
        self._per_broker: dict[str, int] = {}
        self._threads: dict[str, list[threading.Thread]] = {}
        self._used = 0
        self._unsent = 0  # messages buffered or in flight
        self._flushing = 0
        self._closing = False

    # -- the caller's side -------------------------------------------------------

    def append(self, qkey: QueueKey, body: bytes, msg_key: str | None, tags: str | None,
               props: dict[str, str] | None, callback: Callback | None) -> SendFuture:
        size = len(body) + _MESSAGE_OVERHEAD
        lim = self.limits
        with self._lock:  # the condition's own lock, entered without a Python-level call
            if self._closing or self._used + size > lim.buffer_max_bytes:
                self._reserve(size)
            self._used += size
            q = self._queues.get(qkey)
            if q is None:
                q = self._queues[qkey] = deque()
                self._start_senders(qkey[0][1])
            batch = q[-1] if q and q[-1].open else None
            if batch is None:
                batch = Batch(*qkey)
                q.append(batch)
                if len(q) == 1 and qkey not in self._in_flight:
                    self._poke(batch.created + lim.linger_s)
            if batch.plain and msg_key is None and tags is None and props is None:
                bodies = batch.bodies  # the common case, inline: a body, its size (and its callback)
                i = len(bodies)
                bodies.append(body)
                batch.nbytes += size - _MESSAGE_OVERHEAD
                if callback is not None or batch.callbacks is not None:
                    batch.add_callback(i, callback)
            else:
                i = batch.add(body, msg_key, tags, props, callback)
            self._unsent += 1
            if i + 1 >= lim.batch_max_messages or batch.nbytes >= lim.batch_max_bytes:
                batch.open = False
                if qkey not in self._in_flight:
                    self._poke(0.0)
        return SendFuture((batch, i))

    def _reserve(self, size: int) -> None:
        """Room for ``size`` bytes: wait (bounded) or raise, as the caller chose; under the lock."""
        if self._closing:
            raise ProducerClosedError("the producer is closed; create a new one to send more messages")
        lim = self.limits
        deadline = time.monotonic() + lim.max_block_s
        while self._used and self._used + size > lim.buffer_max_bytes:
            left = deadline - time.monotonic()
            if not lim.block_on_full or left <= 0:
                raise BufferFullError(
                    f"the producer's buffer holds {self._used:,} bytes (buffer_max_bytes={lim.buffer_max_bytes:,})"
                    + (f" and did not drain within {lim.max_block_s:g} s" if lim.block_on_full else "")
                    + ": the brokers take messages slower than they are sent; slow down, or raise buffer_max_bytes")
            self._drained.wait(left)
            if self._closing:
                raise ProducerClosedError("the producer closed while this send waited for buffer space")

    def busy(self, qkey: QueueKey) -> bool:
        """Whether a batch of ``qkey`` waits or is in flight (read without the lock: a hint for placement)."""
        return qkey in self._in_flight or qkey in self._queues

    def unsent(self) -> int:
        with self._lock:
            return self._unsent

    def flush(self, timeout_s: float | None) -> int:
        """Send everything buffered now; wait until all is acknowledged or failed; messages left unsent."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._lock:
            self._flushing += 1
            self._poke(0.0)  # everything is due now: each sender that takes a batch wakes the next
            try:
                while self._unsent:
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        break
                    self._drained.wait(left)
                return self._unsent
            finally:
                self._flushing -= 1

    def close(self, timeout_s: float | None) -> int:
        """Flush (bounded), stop the senders, fail what is left with ProducerClosedError; messages failed."""
        left = self.flush(timeout_s)
        with self._lock:
            self._closing = True
            stranded = [b for q in self._queues.values() for b in q]
            self._queues.clear()
            for idle in [self._leader, *self._followers]:
                if idle is not None:
                    idle.notify()
            self._drained.notify_all()
            threads = [t for ts in self._threads.values() for t in ts]
        for batch in stranded:
            self._finish(batch, None, ProducerClosedError(
                f"the producer closed before {len(batch)} message(s) for {batch.key[0]!r} were sent"))
        for t in threads:
            t.join()
        return left

    # -- the sender threads -------------------------------------------------------

    def _start_senders(self, broker: str) -> None:
        if broker in self._threads:
            return
        self._threads[broker] = [threading.Thread(target=self._run, name=f"sparkmq-producer-{broker}-{i}",
                                                  daemon=True) for i in range(self.limits.max_in_flight)]
        for t in self._threads[broker]:
            t.start()

    def _run(self) -> None:
        me = threading.Condition(self._lock)
        conns = self._t.connect()
        try:
            while True:
                with self._lock:
                    batch = self._next(me)
                if batch is None:
                    return
                try:
                    self._send(batch, conns)
                except Exception as exc:  # a bug must fail the batch, never strand it (flush and close would wait)
                    log.exception("the producer's sender failed on a batch")
                    self._finish(batch, None, BrokerError(f"the producer could not send this batch ({exc!r})"))
        finally:
            conns.close()

    def _next(self, me: threading.Condition) -> Batch | None:
        """The next batch for this sender (None: closing), waiting as the leader or a follower; under the lock."""
        while True:
            batch = self._take()
            if batch is not None:
                if self._leader is me:  # hand the clock on: another idle sender watches the next batch
                    self._leader, self._leader_until = None, _NEVER
                    if self._followers:
                        self._leader = self._followers.pop()
                        self._leader.notify()
                return batch
            if self._closing:
                if self._leader is me:
                    self._leader = None
                return None
            if self._leader is None or self._leader is me:
                self._leader = me
                wait = self._wait_s()
                self._leader_until = time.monotonic() + wait
                me.wait(wait)
            else:
                self._followers.append(me)
                me.wait(_IDLE_WAIT_S)
                if me in self._followers:
                    self._followers.remove(me)

    def _poke(self, due: float) -> None:
        """A batch may be due at ``due`` (0: now), sooner than the leader wakes: wake it; under the lock."""
        if self._leader is not None and due < self._leader_until:
            self._leader_until = due
            self._leader.notify()

    def _ready(self, q: deque[Batch], now: float) -> bool:
        head = q[0]
        if head.not_before > now or not head.bodies:
            return False
        return (not head.open or len(q) > 1 or self._flushing > 0 or self._closing
                or now - head.created >= self.limits.linger_s)

    def _take(self) -> Batch | None:
        """The next ready batch whose queue has nothing in flight and whose broker has room; under the lock."""
        now = time.monotonic()
        for key, q in self._queues.items():
            broker = key[0][1]
            if (key in self._in_flight or self._per_broker.get(broker, 0) >= self.limits.max_in_flight
                    or not self._ready(q, now)):
                continue
            batch = q.popleft()
            if not q:
                del self._queues[key]
            batch.open, batch.sending, batch.taken = False, True, now
            self._in_flight.add(key)
            self._per_broker[broker] = self._per_broker.get(broker, 0) + 1
            return batch
        return None

    def _wait_s(self) -> float:
        """Until the soonest batch of a queue with nothing in flight may be ready (linger or retry back-off)."""
        now = time.monotonic()
        return max(0.0005, min(_IDLE_WAIT_S, self._soonest(now) - now))

    def _soonest(self, now: float) -> float:
        """When the soonest batch that could be taken is due (``now`` or earlier: ready); under the lock."""
        soonest = _NEVER
        for key, q in self._queues.items():
            if key in self._in_flight or self._per_broker.get(key[0][1], 0) >= self.limits.max_in_flight:
                continue  # its answer pokes the leader: no need to wake before
            head = q[0]
            if self._ready(q, now):
                return now
            soonest = min(soonest, max(head.not_before, head.created + self.limits.linger_s))
        return soonest

    def _release(self, batch: Batch) -> None:
        batch.sending = False
        self._in_flight.discard((batch.key, batch.fixed))
        self._per_broker[batch.key[1]] -= 1

    def _send(self, batch: Batch, conns: Connections) -> None:
        topic, broker, qid = batch.key
        url = self._t.url(topic, broker, batch.first_failure is not None)
        try:
            if url is None:
                raise BrokerUnreachableError(f"the NameServers route no master for broker {broker!r}", broker=broker)
            params = {"answer": "full" if self.limits.msg_ids or qid is None else "summary"}
            body = batch.arrow()
            batch.posted = time.monotonic()
            answer = conns.post(url, f"/v1/topics/{topic}/messages", broker, body, _ARROW_HEADERS, params)
            batch.answered = time.monotonic()
            results = batch.results_from(broker, answer)  # type: ignore[arg-type]
        except BrokerError as exc:
            self._failed(batch, url, exc)
            return
        except (KeyError, TypeError, ValueError) as exc:
            self._finish(batch, None, BrokerError(f"broker {broker!r} answered a produce with an unexpected body "
                                                  f"({type(exc).__name__}: {exc}); the messages may be stored"))
            return
        self._t.succeeded(url)
        self._finish(batch, results, None)

    def _failed(self, batch: Batch, url: str | None, exc: BrokerError) -> None:
        """Send again (fixed: same broker, bounded by time; free: another broker) or fail the batch."""
        topic, broker, _ = batch.key
        again = retryable(exc) and not self._closing
        backoff = self._t.failed(url, exc.message) if url is not None and again else 0.05
        now = time.monotonic()
        batch.first_failure = batch.first_failure or now
        if again and batch.fixed and now - batch.first_failure < self.limits.send_timeout_s:
            left = batch.first_failure + self.limits.send_timeout_s - now
            self._requeue(batch, batch.key, now + min(backoff, left))
            return
        if again and not batch.fixed and batch.moves < self.limits.send_retries:
            try:
                target = self._t.replace(topic, frozenset({broker}))
            except BrokerError:
                target = None
            if target is not None:
                batch.moves += 1
                self._requeue(batch, target[0], 0.0)
                return
        if again and batch.fixed:
            exc = BrokerUnreachableError(
                f"broker {broker!r} took no write for {self.limits.send_timeout_s:g} s "
                f"({short_reason(exc.message)}); its keyed messages were not sent to another broker name: "
                "resend them when it is back", broker=broker, url=url)
        self._finish(batch, None, exc)

    def _requeue(self, batch: Batch, key: BatchKey, not_before: float) -> None:
        with self._lock:
            self._release(batch)
            if not self._closing:
                batch.key, batch.not_before = key, not_before
                q = self._queues.get((key, batch.fixed))
                if q is None:
                    q = self._queues[(key, batch.fixed)] = deque()
                    self._start_senders(key[1])
                q.appendleft(batch)  # before anything sent later to the same queue
                self._poke(self._soonest(time.monotonic()))
                return
        self._finish(batch, None, ProducerClosedError("the producer closed while a batch waited to be sent again"))

    def _finish(self, batch: Batch, results: Sequence[SendResult] | None, error: BrokerError | None) -> None:
        """Free the batch's in-flight slot, report its outcomes, then stop counting it (flush waits on that)."""
        if batch.sending:
            with self._lock:
                self._release(batch)
                self._poke(self._soonest(time.monotonic()))  # its queue's next batch may be due already
        if error is not None:
            log.debug("a batch of %d message(s) failed: %s", len(batch), error.message)
        batch.resolve(results, error)
        n = len(batch)
        batch.bodies, batch.keys, batch.tags, batch.props = [], None, None, None  # sent: the futures need none
        with self._lock:
            self._used -= batch.nbytes + _MESSAGE_OVERHEAD * n
            self._unsent -= n
            self._drained.notify_all()
