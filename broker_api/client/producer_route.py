"""Where the :class:`~broker_api.client.producer.Producer` puts a message: (broker name, queue id).

The same rules as :meth:`SparkMQClient.produce` (client/sender.py, client/placement.py)::

    keyed message      -> the known slots[crc32(key) % len]  fixed: waits for its broker, never moves silently
    explicit queue_id  -> the first broker name that has that queue   fixed
    neither            -> one slot of a healthy master at a time (sticky), the next one in round
                          robin once its batch has closed                  free: may move on a refusal

With one broker (``endpoint=``) the slots are its queues, read once per topic
(``GET /v1/topics/{topic}``); a topic the broker does not know yet is left to
the broker (queue None: it creates the topic if allowed and places the
messages itself), and asked again for later batches.  Routes are looked up
through the client's cache (``route_ttl_s``), so a send costs a dict lookup.

Free messages stick to one slot until the batch they fill closes (full, or
taken by a sender after ``linger_ms``), as Kafka's sticky partitioner does: at
a given rate that makes one request per linger period instead of one per
queue, so the broker's fixed cost per request is paid once per period.  The
next slot is the next one in round robin that has no batch waiting or in
flight (``busy``), so a new batch is not held behind a slow request while
another queue is idle; when every slot is busy, simply the next one.
"""

from __future__ import annotations

import itertools
import random
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import BrokerError, TopicNotFoundError
from .core import SparkMQClient
from .placement import Slot
from .producer_batch import Batch
from .producer_sender import QueueKey

__all__ = ["Placer", "nothing_waits"]

_ENDPOINT_TTL_S = 5.0


@dataclass(slots=True)
class _Known:
    topic: str
    all_slots: list[Slot]  # every slot ever seen writable: keyed placement
    live: list[Slot]  # slots of brokers with a master now: free placement
    masters: dict[str, str]
    expires: float
    by_queue: dict[int, QueueKey] = field(default_factory=dict)  # explicit queue id -> its queue key
    keys_live: list[QueueKey] = field(default_factory=list)
    sticky: int = 0  # index into keys_live of the slot free messages fill now
    filling: Batch | None = None  # the batch they fill (a closed one moves them on)

    def __post_init__(self) -> None:
        for broker, qid in sorted(self.all_slots, reverse=True):  # the first broker name owning the queue wins
            self.by_queue[qid] = ((self.topic, broker, qid), True)
        self.keys_live = [((self.topic, b, q), False) for b, q in self.live]
        if self.keys_live:  # each producer starts at a random queue, so short-lived ones do not pile on one
            self.sticky = random.randrange(len(self.keys_live))


def nothing_waits(key: QueueKey) -> bool:
    """``Placer.busy`` without a producer's buffer (before it is attached, and once it is closed)."""
    return False


class Placer:
    """Places messages and finds broker URLs for the producer (thread-safe)."""

    def __init__(self, client: SparkMQClient, route_ttl_s: float) -> None:
        self._client, self._ttl = client, route_ttl_s
        self._topics: dict[str, _Known] = {}
        self._rr = itertools.count()
        self._lock = threading.Lock()
        self.busy: Callable[[QueueKey], bool] = nothing_waits  # a batch of that queue waits or is in flight

    def place(self, topic: str, key: str | None, queue_id: int | None) -> QueueKey:
        """((topic, broker name, queue id or None), fixed) for one message."""
        known = self._topics.get(topic)
        if known is None or time.monotonic() >= known.expires:
            known = self._known(topic)
        if key is not None:
            slots = known.all_slots
            if not slots:
                return (topic, self._unplaced(topic), None), True
            broker, qid = slots[zlib.crc32(key.encode()) % len(slots)]
            return (topic, broker, qid), True
        if queue_id is not None:
            placed = known.by_queue.get(queue_id)
            return placed or ((topic, self._unplaced(topic), queue_id), True)
        if known.keys_live and self._client.faults.empty():
            filling = known.filling
            if filling is not None and not filling.open:
                known.sticky, known.filling = self._next_idle(known), None  # the next queue
            return known.keys_live[known.sticky]
        return self.free(topic, frozenset())

    def _next_idle(self, known: _Known) -> int:
        """The slot after the sticky one in round robin with nothing waiting or in flight, else the next one."""
        n, busy = len(known.keys_live), self.busy
        for step in range(1, n + 1):
            i = (known.sticky + step) % n
            if not busy(known.keys_live[i]):
                return i
        return (known.sticky + 1) % n

    def filled(self, topic: str, batch: Batch) -> None:
        """A free message of ``topic`` went into ``batch``: later ones follow it until it closes."""
        known = self._topics.get(topic)
        if known is not None and known.keys_live and batch.key == known.keys_live[known.sticky][0]:
            known.filling = batch

    def free(self, topic: str, exclude: frozenset[str]) -> QueueKey:
        """A round-robin slot for a message without key or queue, avoiding ``exclude`` and brokers in back-off."""
        known = self._known(topic)
        faults = self._client.faults
        usable = [s for s in known.live if s[0] not in exclude]
        healthy = [s for s in usable if faults.available(known.masters[s[0]])] or usable
        if not healthy:
            return (topic, self._unplaced(topic), None), False
        broker, qid = healthy[next(self._rr) % len(healthy)]
        return (topic, broker, qid), False

    def url(self, topic: str, broker: str, refresh: bool = False) -> str | None:
        """The master URL of ``broker`` now (None: the NameServers route no master for it)."""
        if not self._client.routed:
            return self._client.endpoint
        if refresh:
            self._forget(topic)
        try:
            return self._known(topic).masters.get(broker)
        except BrokerError:
            return None

    def _unplaced(self, topic: str) -> str:
        if self._client.routed:
            raise TopicNotFoundError(f"no live master broker can write topic {topic!r} (check perm and "
                                     "GET /v1/cluster on the NameServer)")
        self._forget(topic)  # ask again for the next message: the broker may have created it
        return self._client.brokers().popitem()[0]

    def _forget(self, topic: str) -> None:
        with self._lock:
            self._topics.pop(topic, None)

    def _known(self, topic: str) -> _Known:
        known = self._topics.get(topic)
        if known is not None and time.monotonic() < known.expires:
            return known
        known = self._routed(topic) if self._client.routed else self._endpoint(topic)
        with self._lock:
            self._topics[topic] = known
        return known

    def _routed(self, topic: str) -> _Known:
        route = self._client._route(topic)
        cache = self._client._cache
        assert cache is not None
        cache.known.learn(topic, route)
        return _Known(topic, cache.known.slots(topic), route.slots(), route.masters, time.monotonic() + self._ttl)

    def _endpoint(self, topic: str) -> _Known:
        masters = self._client.brokers()
        (broker, _url), = masters.items()
        try:
            queues = int(self._client.describe_topic(topic)[broker]["queues"])
        except TopicNotFoundError:
            return _Known(topic, [], [], masters, 0.0)  # unknown yet: the broker places; ask again next time
        slots = [(broker, q) for q in range(queues)]
        return _Known(topic, slots, slots, masters, time.monotonic() + _ENDPOINT_TTL_S)
