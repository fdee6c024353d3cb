"""The NameServer's in-memory routing state (RocketMQ's RouteInfoManager).

Four tables, all guarded by one lock::

    clusters : cluster name -> {broker name}
    brokers  : broker name  -> cluster + {broker id -> address}   (id 0 = master)
    topics   : topic        -> {broker name -> queue data (read/write queues, perm)}
    live     : address      -> live info (last heartbeat, data version, HA address)

A master's full registration replaces its broker name's queue data, so a
topic deleted on the broker disappears from its route.  Removing the last
address of a broker name (unregister or expiry) drops the name from its
cluster and its queue data from every topic.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from ..errors import (
    BrokerNameOwnedError,
    BrokerNotRegisteredError,
    TopicRouteNotFoundError,
)
from .models import BrokerRef, DataVersionBody, RegisterBody

_log = logging.getLogger(__name__)

__all__ = ["LiveInfo", "QueueData", "RegisterResult", "RouteTable"]

MASTER_ID = 0


@dataclass(frozen=True, slots=True)
class QueueData:
    """How one broker name serves one topic."""

    broker_name: str
    read_queues: int
    write_queues: int
    perm: str


@dataclass(slots=True)
class LiveInfo:
    """What the NameServer knows about one live broker address."""

    cluster: str
    broker_name: str
    broker_id: int
    ha_address: str | None
    data_version: dict[str, int]
    last_update_ms: int
    last_update_mono: float
    registrations: int = 0
    version_checks: int = 0


@dataclass(slots=True)
class _BrokerName:
    cluster: str
    addrs: dict[int, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RegisterResult:
    """RocketMQ's RegisterBrokerResult: a slave learns its master and HA address."""

    master_address: str | None
    ha_server_address: str | None


class RouteTable:
    """Thread-safe route and liveness tables, updated by brokers, read by clients."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._clusters: dict[str, set[str]] = {}
        self._brokers: dict[str, _BrokerName] = {}
        self._topics: dict[str, dict[str, QueueData]] = {}
        self._live: dict[str, LiveInfo] = {}
        # broker name -> the cluster that registered it first; kept past expiry, released only when that
        # cluster unregisters the name's last address (a clean stop), so a silent broker's name stays its own
        self._owners: dict[str, str] = {}
        # when this NameServer started: after a restart its tables are empty until brokers re-register,
        # and clients keep their cached routes while it is young (client/routes.py)
        self.started_ms = _now_ms()
        self._started_mono = time.monotonic()

    def uptime_s(self) -> float:
        """Seconds since this table (this NameServer process) started."""
        return time.monotonic() - self._started_mono

    # -- broker side -----------------------------------------------------

    def register(self, body: RegisterBody) -> RegisterResult:
        """Record a full registration; the master's topics replace its queue data."""
        with self._lock:
            self._check_owner(body, claim=True)
            entry = self._join(body)
            old = self._live.get(body.address)
            version = body.data_version.model_dump()
            if old is not None and old.broker_name == body.broker_name and _older(version, old.data_version):
                # a body the broker sent before its latest one (its request timed out on its side and
                # arrived late): a heartbeat, never a step back to topics it has since changed
                _log.info("late registration of %s at %s with data version %s (have %s): kept the newer topics",
                          body.broker_name, body.address, version, old.data_version)
                old.last_update_ms, old.last_update_mono = _now_ms(), time.monotonic()
                return self._result(body.broker_id, entry)
            if body.broker_id == MASTER_ID or MASTER_ID not in entry.addrs:
                self._replace_queue_data(body)
            self._live[body.address] = LiveInfo(
                cluster=body.cluster,
                broker_name=body.broker_name,
                broker_id=body.broker_id,
                ha_address=body.ha_address or None,
                data_version=version,
                last_update_ms=_now_ms(),
                last_update_mono=time.monotonic(),
                registrations=(old.registrations if old else 0) + 1,
                version_checks=old.version_checks if old else 0,
            )
            return self._result(body.broker_id, entry)

    def needs_register(self, ref: BrokerRef, version: DataVersionBody) -> bool:
        """True when ``version`` differs from the registered one; else a heartbeat."""
        with self._lock:
            live = self._live.get(ref.address)
            same = (
                live is not None
                and live.broker_name == ref.broker_name
                and live.broker_id == ref.broker_id
                and live.cluster == ref.cluster
                and live.data_version == version.model_dump()
            )
            if not same or live is None:
                return True
            live.last_update_ms = _now_ms()
            live.last_update_mono = time.monotonic()
            live.version_checks += 1
            return False

    def unregister(self, ref: BrokerRef) -> None:
        """Forget a broker address (clean shutdown); raises if it is unknown."""
        with self._lock:
            self._check_owner(ref, claim=False)
            entry = self._brokers.get(ref.broker_name)
            known = entry is not None and entry.addrs.get(ref.broker_id) == ref.address
            if not known and ref.address not in self._live:
                raise BrokerNotRegisteredError(
                    f"broker {ref.broker_name!r} id {ref.broker_id} at {ref.address} is not registered"
                )
            live = self._live.get(ref.address)
            self._remove_address(ref.address, live.broker_name if live else ref.broker_name)
            if ref.broker_name not in self._brokers:
                self._owners.pop(ref.broker_name, None)  # its owner stopped it cleanly: the name is free

    def expire(self, timeout_s: float) -> list[LiveInfo]:
        """Drop addresses silent for more than ``timeout_s``; returns what was dropped."""
        cutoff = time.monotonic() - timeout_s
        with self._lock:
            stale = [(a, i) for a, i in self._live.items() if i.last_update_mono < cutoff]
            for address, info in stale:
                self._remove_address(address, info.broker_name)
        return [info for _, info in stale]

    def set_master(self, broker_name: str, address: str) -> bool:
        """The controller elected ``address`` (an HTTP address it registered): it is id 0 from now on and
        the old master's address is dropped, so clients route to the new master at once."""
        with self._lock:
            entry = self._brokers.get(broker_name)
            if entry is None:
                return False
            old = entry.addrs.get(MASTER_ID)
            for broker_id, addr in list(entry.addrs.items()):
                if addr == address:
                    del entry.addrs[broker_id]
            if old is not None and old != address:
                self._live.pop(old, None)
            entry.addrs[MASTER_ID] = address
            live = self._live.get(address)
            if live is not None:
                live.broker_id = MASTER_ID
            return True

    # -- client side -----------------------------------------------------

    def route(self, topic: str) -> dict[str, Any]:
        """Brokers and queues serving ``topic``; raises TopicRouteNotFoundError."""
        with self._lock:
            queues = [q for q in self._topics.get(topic, {}).values() if q.broker_name in self._brokers]
            if not queues:
                raise TopicRouteNotFoundError(
                    f"no live broker serves topic {topic!r}; create it on a broker registered "
                    "with this NameServer, or check GET /v1/cluster"
                )
            queues.sort(key=lambda q: q.broker_name)
            brokers = [self._broker_view(q.broker_name) for q in queues]
        return {
            "topic": topic,
            "brokers": brokers,
            "queues": [
                {"broker_name": q.broker_name, "read_queues": q.read_queues,
                 "write_queues": q.write_queues, "perm": q.perm}
                for q in queues
            ],
        }

    def cluster(self) -> dict[str, Any]:
        """Clusters, broker names, and every live address with role and heartbeat."""
        with self._lock:
            clusters = {c: sorted(names) for c, names in sorted(self._clusters.items())}
            brokers = [self._live_view(a, i) for a, i in self._live.items()]
        brokers.sort(key=lambda b: (b["cluster"], b["broker_name"], b["broker_id"]))
        return {"clusters": clusters, "brokers": brokers}

    def topics(self) -> dict[str, list[str]]:
        """Topic name -> broker names serving it (live ones only)."""
        with self._lock:
            out = {t: sorted(n for n in qs if n in self._brokers) for t, qs in self._topics.items()}
        return {t: names for t, names in sorted(out.items()) if names}

    def broker_count(self) -> int:
        with self._lock:
            return len(self._live)

    # -- internals (lock held) -------------------------------------------

    def _check_owner(self, ref: BrokerRef, claim: bool) -> None:
        """Raise BrokerNameOwnedError unless ``ref``'s cluster owns its broker name (``claim``: a free
        name becomes its own) and its address."""
        owner = self._owners.get(ref.broker_name, ref.cluster)
        why = ""
        if owner != ref.cluster:
            why = f"broker name {ref.broker_name!r} belongs to cluster {owner!r}, which registered it first"
        live = self._live.get(ref.address)
        if not why and live is not None and live.cluster != ref.cluster:
            why = f"address {ref.address} is registered by broker {live.broker_name!r} of cluster {live.cluster!r}"
        if why:
            _log.warning("NameServer: refused broker %r of cluster %r at %s: %s", ref.broker_name, ref.cluster,
                         ref.address, why)
            raise BrokerNameOwnedError(f"{why}; a broker of cluster {ref.cluster!r} may not register or "
                                       "unregister it (pick another [broker] name, or stop the owner cleanly first)")
        if claim:
            self._owners[ref.broker_name] = owner


    def _join(self, body: RegisterBody) -> _BrokerName:
        """Put the address into the cluster and broker-name tables (one entry per address)."""
        entry = self._brokers.get(body.broker_name)
        if entry is None:
            entry = self._brokers[body.broker_name] = _BrokerName(body.cluster)
        elif entry.cluster != body.cluster:
            self._leave_cluster(entry.cluster, body.broker_name)
            entry.cluster = body.cluster
        self._clusters.setdefault(body.cluster, set()).add(body.broker_name)
        for broker_id, address in list(entry.addrs.items()):
            if address == body.address and broker_id != body.broker_id:
                del entry.addrs[broker_id]  # same address, new id (e.g. slave -> master)
        previous = entry.addrs.get(body.broker_id)
        if previous is not None and previous != body.address:
            self._live.pop(previous, None)  # the id moved to a new address
        entry.addrs[body.broker_id] = body.address
        return entry

    def _replace_queue_data(self, body: RegisterBody) -> None:
        name = body.broker_name
        for topic in list(self._topics):
            if topic not in body.topics:
                self._drop_queue_data(topic, name)
        for topic, q in body.topics.items():
            data = QueueData(name, q.read_queues, q.write_queues, q.perm)
            self._topics.setdefault(topic, {})[name] = data

    def _drop_queue_data(self, topic: str, broker_name: str) -> None:
        per_broker = self._topics.get(topic)
        if per_broker is not None and per_broker.pop(broker_name, None) is not None and not per_broker:
            del self._topics[topic]

    def _remove_address(self, address: str, broker_name: str) -> None:
        self._live.pop(address, None)
        entry = self._brokers.get(broker_name)
        if entry is None:
            return
        for broker_id, addr in list(entry.addrs.items()):
            if addr == address:
                del entry.addrs[broker_id]
        if not entry.addrs:
            del self._brokers[broker_name]
            self._leave_cluster(entry.cluster, broker_name)
            for topic in list(self._topics):
                self._drop_queue_data(topic, broker_name)

    def _leave_cluster(self, cluster: str, broker_name: str) -> None:
        names = self._clusters.get(cluster)
        if names is not None:
            names.discard(broker_name)
            if not names:
                del self._clusters[cluster]

    def _result(self, broker_id: int, entry: _BrokerName) -> RegisterResult:
        if broker_id == MASTER_ID:
            return RegisterResult(None, None)
        master = entry.addrs.get(MASTER_ID)
        live = self._live.get(master) if master else None
        return RegisterResult(master, live.ha_address if live else None)

    def _broker_view(self, broker_name: str) -> dict[str, Any]:
        entry = self._brokers[broker_name]
        addrs = {str(i): a for i, a in sorted(entry.addrs.items())}
        return {"broker_name": broker_name, "cluster": entry.cluster, "addresses": addrs}

    def _live_view(self, address: str, info: LiveInfo) -> dict[str, Any]:
        return {
            "cluster": info.cluster,
            "broker_name": info.broker_name,
            "broker_id": info.broker_id,
            "role": "master" if info.broker_id == MASTER_ID else "slave",
            "address": address,
            "ha_address": info.ha_address,
            "last_heartbeat_ms": info.last_update_ms,
            "silent_s": round(time.monotonic() - info.last_update_mono, 3),
            "data_version": dict(info.data_version),
            "registrations": info.registrations,
            "version_checks": info.version_checks,
        }


def _older(version: dict[str, int], than: dict[str, int]) -> bool:
    """True when data ``version`` was taken before ``than`` (a restart starts a later timestamp)."""
    return (version["timestamp"], version["counter"]) < (than["timestamp"], than["counter"])


def _now_ms() -> int:
    return int(time.time() * 1000)
