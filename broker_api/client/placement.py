"""Where a keyed message goes: stable across route changes (a broker down or dropped by the NameServer).

The client remembers, per topic, every broker name it has seen take writes
and that name's write queue count.  A key hashes over the slots of *all*
known names, not only those with a live master::

    slots = sorted((name, queue_id) for each known name, queue_id < its write queues)
    key   -> slots[crc32(key) % len(slots)]

With every broker up this is the same formula as before (and as the Spark
sink's), so keys land where they always did; while a broker name has no
master, or the NameServer has dropped it, its keys still map to it and wait
for it (or, with ``keyed_failover="move"``, move with a warning) instead of
silently shifting to other broker names.  A new broker name joining the
topic changes the slots, as in RocketMQ.
"""

from __future__ import annotations

import threading
import zlib
from collections.abc import Callable

from .routing import Route

__all__ = ["KnownBrokers", "Slot"]

Slot = tuple[str, int]


class KnownBrokers:
    """Per topic: broker name -> write queue count, for every name ever seen writable (thread-safe)."""

    def __init__(self) -> None:
        self._known: dict[str, dict[str, int]] = {}
        self._lock = threading.Lock()

    def learn(self, topic: str, route: Route) -> None:
        """Add the writable names of ``route`` (a name never disappears; its queue count follows the route)."""
        with self._lock:
            known = self._known.setdefault(topic, {})
            known.update((name, n) for name, n in route.write_queues.items() if n > 0)

    def forget(self, topic: str) -> None:
        """Drop what is known of ``topic`` (it was deleted)."""
        with self._lock:
            self._known.pop(topic, None)

    def names(self, topic: str) -> list[str]:
        with self._lock:
            return sorted(self._known.get(topic, {}))

    def slots(self, topic: str) -> list[Slot]:
        with self._lock:
            known = dict(self._known.get(topic, {}))
        return sorted((name, q) for name, n in known.items() for q in range(n))

    def slot(self, topic: str, key: str) -> Slot:
        """The (broker name, queue id) of ``key``; the topic must have been learned."""
        slots = self.slots(topic)
        return slots[zlib.crc32(key.encode()) % len(slots)]


def live_slot(route: Route, key: str, usable: Callable[[str], bool]) -> Slot | None:
    """``key`` hashed over the slots of the brokers with a ``usable`` master now (``keyed_failover="move"``)."""
    masters = route.masters
    slots = [s for s in route.slots() if usable(masters[s[0]])]
    return slots[zlib.crc32(key.encode()) % len(slots)] if slots else None
