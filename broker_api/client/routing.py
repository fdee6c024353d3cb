"""The client's routing: a topic's brokers from the NameServers, and a back-off for brokers that just failed.

A route lists, per broker name, its addresses by broker id: id 0 is the
master (takes writes), ids above 0 are slaves (serve reads when the master
does not answer)::

    Route.addresses = {"broker-a": {0: "http://m:8080", 1: "http://s:8090"}, ...}
    Route.slots()   = sorted((broker, queue_id) for each writable master, queue_id < write_queues)

:class:`FaultTracker` is RocketMQ's latency-fault idea for an HTTP client:
an address that failed is avoided for a back-off that doubles while it
keeps failing (``base_s``, ``2*base_s``, ... up to ``max_s``), then tried
again; one success clears it.  Only real failures count: a send refused
because its address is in its back-off is no failure of the address
(otherwise steady traffic keeps a recovered broker in back-off forever).
The exponent is capped (no overflow) and a reason is kept short (an
error message that quotes it never nests earlier ones).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import BadRequestError

__all__ = ["FaultTracker", "Route", "id_host", "parse_route", "short_reason", "urls_by_host"]

MASTER = 0


@dataclass(frozen=True, slots=True)
class Route:
    """A topic's brokers (name -> {broker id: URL}) and queue counts, from the NameServers."""

    addresses: dict[str, dict[int, str]]
    write_queues: dict[str, int]
    read_queues: dict[str, int]
    fetched: float

    @property
    def masters(self) -> dict[str, str]:
        """Broker name -> master URL (names whose master is registered)."""
        return {name: ids[MASTER] for name, ids in self.addresses.items() if MASTER in ids}

    def readers(self, broker: str) -> list[str]:
        """URLs that serve reads of ``broker``: the master first, then its slaves by id."""
        ids = self.addresses.get(broker, {})
        return [ids[i] for i in sorted(ids)]

    def readable(self) -> dict[str, list[str]]:
        """Broker name -> reader URLs, for every broker with readable queues."""
        return {name: self.readers(name) for name in sorted(self.addresses) if name in self.read_queues}

    def slots(self) -> list[tuple[str, int]]:
        masters = self.masters
        return sorted((b, q) for b, n in self.write_queues.items() if b in masters for q in range(n))


def parse_route(raw: Mapping[str, Any], fetched: float | None = None) -> Route:
    """A :class:`Route` from ``GET /v1/routes/{topic}`` of a NameServer."""
    addresses = {b["broker_name"]: {int(i): str(url) for i, url in b["addresses"].items()} for b in raw["brokers"]}
    writes = {q["broker_name"]: q["write_queues"] for q in raw["queues"] if "w" in q["perm"]}
    reads = {q["broker_name"]: q["read_queues"] for q in raw["queues"] if "r" in q["perm"]}
    return Route(addresses, writes, reads, time.monotonic() if fetched is None else fetched)


_MAX_EXPONENT = 30
_REASON_CHARS = 300


def short_reason(text: str) -> str:
    """``text`` cut to a bounded length (reasons are quoted in later error messages)."""
    return text if len(text) <= _REASON_CHARS else text[:_REASON_CHARS - 3] + "..."


@dataclass(slots=True)
class _Fault:
    failures: int
    since: float
    until: float
    reason: str = ""


@dataclass
class FaultTracker:
    """Addresses that failed recently, each avoided for a growing back-off (thread-safe)."""

    base_s: float = 1.0
    max_s: float = 60.0
    clock: Callable[[], float] = time.monotonic
    _faults: dict[str, _Fault] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def failed(self, url: str, reason: str = "") -> float:
        """Record a failure of ``url``; returns the back-off it now has, in seconds."""
        now = self.clock()
        with self._lock:
            fault = self._faults.get(url)
            failures = 1 if fault is None else fault.failures + 1
            backoff = min(self.max_s, self.base_s * 2 ** min(failures - 1, _MAX_EXPONENT))
            since = now if fault is None else fault.since
            self._faults[url] = _Fault(failures, since, now + backoff, short_reason(reason))
        return backoff

    def succeeded(self, url: str) -> None:
        with self._lock:
            self._faults.pop(url, None)

    def empty(self) -> bool:
        """True when no address is in fault (a fast check for every send of a producer)."""
        return not self._faults

    def in_fault(self, url: str) -> bool:
        """True while ``url`` has failed and not answered since (in its back-off or past it)."""
        with self._lock:
            return url in self._faults

    def failures(self, url: str) -> int:
        """Real failures in the current run (0 when healthy)."""
        with self._lock:
            fault = self._faults.get(url)
        return 0 if fault is None else fault.failures

    def available(self, url: str) -> bool:
        """False while ``url`` is in its back-off."""
        with self._lock:
            fault = self._faults.get(url)
        return fault is None or self.clock() >= fault.until

    def down_for(self, url: str) -> float | None:
        """Seconds since ``url`` first failed (in its current run of failures), None if healthy."""
        with self._lock:
            fault = self._faults.get(url)
        return None if fault is None else self.clock() - fault.since

    def reason(self, url: str) -> str:
        with self._lock:
            fault = self._faults.get(url)
        return "" if fault is None else fault.reason

    def order(self, urls: list[str]) -> list[str]:
        """``urls`` with the available ones first (in their order), then those in back-off, soonest first."""
        with self._lock:
            until = {u: self._faults[u].until for u in urls if u in self._faults}
        now = self.clock()
        ready = [u for u in urls if until.get(u, now) <= now]
        waiting = sorted((u for u in urls if until.get(u, now) > now), key=lambda u: until[u])
        return ready + waiting


def urls_by_host(brokers: list[Mapping[str, Any]]) -> dict[str, list[str]]:
    """"ip:port" of each broker of a NameServer cluster listing -> its group's URLs, master first."""
    by_name: dict[str, list[tuple[int, str]]] = {}
    for b in brokers:
        by_name.setdefault(b["broker_name"], []).append((int(b["broker_id"]), str(b["address"])))
    out: dict[str, list[str]] = {}
    for members in by_name.values():
        urls = [u for _, u in sorted(members)]
        for _, url in members:
            out.setdefault(url.split("://", 1)[-1].rstrip("/"), urls)
    return out


def id_host(msg_id: str) -> str:
    """The "ip:port" of the broker that stored ``msg_id`` (its first 16 hex digits)."""
    try:
        value = int(msg_id[:16], 16) if len(msg_id) == 32 else -1
    except ValueError:
        value = -1
    if value < 0:
        raise BadRequestError(f"message id {msg_id!r} is not 32 hexadecimal characters")
    ip = ".".join(str((value >> shift) & 0xFF) for shift in (56, 48, 40, 32))
    return f"{ip}:{value & 0xFFFFFFFF}"

