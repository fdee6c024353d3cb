"""Sink routing with ``namesrv``: which broker each row goes to.

A task asks the NameServer once per topic which brokers can take writes,
and splits each Arrow produce body over the same (broker, queue) slots as
``broker_api.client.SparkMQClient.produce``, so a key lands on the same
broker and queue whether the Spark sink or the client sends it::

    slots = sorted((broker, queue_id) for each writable broker, queue_id < write_queues)
    row with a key    -> slots[crc32(first key) % len(slots)]   (per-key order holds)
    row without key   -> live[(seed + row number) % len(live)]   (round robin; the seed
                                                                   is the Spark partition id)

``live`` are the slots of brokers not known to be down (all slots when none
is); a key always hashes over every slot, so it keeps its broker and queue
while that broker is down (and its rows fail) instead of moving.  The slots
include broker names whose master is gone while a slave is still routed:
the NameServer dropping a dead master must not shift every key to the other
brokers (rows with a key for such a broker wait for its master, bounded,
then fail naming it). The slot's
queue id is sent as the row's ``queue_id`` unless the row has one. Rows with
neither a key nor a ``queue_id`` are *free*: a send that cannot reach their
broker may be retried on another one.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from .auth import Trust
from .errors import SinkError
from .namesrv import BrokerRoute, NamesrvLookup

__all__ = [
    "Placement",
    "TopicRouter",
    "first_keys",
    "free_rows",
    "place",
    "slot_of_rows",
    "slots_of",
    "split_by_broker",
]


def first_keys(table: pa.Table) -> list[str | None]:
    """The routing key of every row: ``keys`` (string, or first of a list), else None."""
    if "keys" not in table.schema.names:
        return [None] * table.num_rows
    col = table.column("keys")
    values = col.to_pylist()
    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        return values
    return [v[0] if v else None for v in values]


def slots_of(brokers: list[BrokerRoute]) -> list[tuple[BrokerRoute, int]]:
    """Every writable (broker, queue id), sorted by broker name then queue id."""
    ordered = sorted(brokers, key=lambda r: r.name)
    return [(r, q) for r in ordered for q in range(r.write_queues)]


def free_rows(table: pa.Table) -> np.ndarray:
    """True for rows with neither a key nor a ``queue_id`` (they may go to any broker)."""
    free = np.array([not k for k in first_keys(table)], dtype=bool)
    if "queue_id" in table.schema.names:
        free &= np.array([q is None for q in table.column("queue_id").to_pylist()], dtype=bool)
    return free


def slot_of_rows(table: pa.Table, n: int, seed: int, live: np.ndarray | None = None) -> np.ndarray:
    """Index in [0, n) of the (broker, queue) slot for every row of a produce body.

    Rows without a key go round robin over ``live`` slot indices (default: all).
    """
    pool = np.arange(n, dtype=np.int64) if live is None or not len(live) else live
    slots = pool[(np.arange(table.num_rows, dtype=np.int64) + seed) % len(pool)]
    for i, key in enumerate(first_keys(table)):
        if key:
            slots[i] = zlib.crc32(key.encode("utf-8")) % n
    return slots


def _with_queue_ids(table: pa.Table, qids: np.ndarray) -> pa.Table:
    if "queue_id" in table.schema.names:
        return table  # the row's own queue_id wins, as in the client
    return table.append_column("queue_id", pa.array(qids.astype(np.int32), pa.int32()))


@dataclass(frozen=True)
class Placement:
    """Rows of a produce body bound for one broker, and the queue id of each."""

    route: BrokerRoute
    rows: np.ndarray
    queues: np.ndarray

    def body(self, table: pa.Table) -> pa.Table:
        """The produce body for this broker (row order kept)."""
        return _with_queue_ids(table.take(pa.array(self.rows)), self.queues)


def place(
    table: pa.Table, brokers: list[BrokerRoute], seed: int, avoid: frozenset[str] = frozenset()
) -> dict[str, Placement]:
    """Broker name → its rows; rows without a key stay off the brokers in ``avoid``."""
    slots = slots_of(brokers)
    names = sorted({r.name for r, _ in slots})
    slot_broker = np.array([names.index(r.name) for r, _ in slots], dtype=np.int64)
    slot_queue = np.array([q for _, q in slots], dtype=np.int64)
    live = np.array([i for i, (r, _) in enumerate(slots) if r.name not in avoid], dtype=np.int64)
    index = slot_of_rows(table, len(slots), seed, live)
    by_name = {r.name: r for r, _ in slots}
    out: dict[str, Placement] = {}
    for number, name in enumerate(names):
        rows = np.flatnonzero(slot_broker[index] == number)
        if len(rows):
            out[name] = Placement(by_name[name], rows, slot_queue[index[rows]])
    return out


def split_by_broker(
    table: pa.Table, brokers: list[BrokerRoute], seed: int
) -> dict[str, tuple[BrokerRoute, pa.Table]]:
    """One produce body per broker, each row with its slot's queue id (row order kept)."""
    return {name: (p.route, p.body(table)) for name, p in place(table, brokers, seed).items()}


class TopicRouter:
    """Per-task cache of writable brokers per topic, from the NameServer(s)."""

    def __init__(self, namesrv: tuple[str, ...], timeout_s: float, trust: Trust = Trust()) -> None:
        self._lookup = NamesrvLookup(namesrv, timeout_s=min(10.0, timeout_s), trust=trust)
        self._namesrv = namesrv
        self._routes: dict[str, list[BrokerRoute]] = {}

    def writable(self, topic: str, refresh: bool = False) -> list[BrokerRoute]:
        """Broker names with write queues for ``topic``, with or without a live master (keys hash over all)."""
        if topic not in self._routes or refresh:
            routes = [r for r in self._lookup.route(topic).values() if r.write_queues > 0]
            if not any(r.writable for r in routes):
                raise SinkError(
                    f"no broker takes writes for topic {topic!r} according to the "
                    f"NameServer(s) {list(self._namesrv)} (every route is read-only, or "
                    "its broker has no live master; writes never go to a slave)"
                )
            self._routes[topic] = sorted(routes, key=lambda r: r.name)
        return self._routes[topic]

    def close(self) -> None:
        self._lookup.close()
