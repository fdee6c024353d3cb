"""Sink routing with ``namesrv``: which broker each row goes to.

A task asks the NameServer once per topic which brokers can take writes
(write queues > 0), sorted by broker name, and splits each Arrow produce
body by broker::

    row with a key    -> blake2b(first key) mod #brokers   (same key, same broker:
                                                            per-key order holds)
    row without key   -> (seed + row number) mod #brokers  (round robin; the seed
                                                            is the Spark partition id)

Inside a broker the broker itself picks the queue (first key's CRC32, else
round robin), so a key keeps one queue of one broker. blake2b, not CRC32, so
the broker choice does not correlate with the broker's own queue choice.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pyarrow as pa

from .errors import SinkError
from .namesrv import BrokerRoute, NamesrvLookup

__all__ = ["TopicRouter", "first_keys", "broker_of_rows", "split_by_broker"]


def first_keys(table: pa.Table) -> list[str | None]:
    """The routing key of every row: ``keys`` (string, or first of a list), else None."""
    if "keys" not in table.schema.names:
        return [None] * table.num_rows
    col = table.column("keys")
    values = col.to_pylist()
    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        return values
    return [v[0] if v else None for v in values]


def _key_slot(key: str, n: int) -> int:
    digest = hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little") % n


def broker_of_rows(table: pa.Table, n: int, seed: int) -> np.ndarray:
    """Index in [0, n) of the broker for every row of a produce body."""
    slots = (np.arange(table.num_rows, dtype=np.int64) + seed) % n
    for i, key in enumerate(first_keys(table)):
        if key:
            slots[i] = _key_slot(key, n)
    return slots


def split_by_broker(
    table: pa.Table, brokers: list[BrokerRoute], seed: int
) -> dict[str, tuple[BrokerRoute, pa.Table]]:
    """One produce body per broker (rows keep their order within each broker)."""
    if len(brokers) == 1:
        return {brokers[0].name: (brokers[0], table)}
    slots = broker_of_rows(table, len(brokers), seed)
    out: dict[str, tuple[BrokerRoute, pa.Table]] = {}
    for i, route in enumerate(brokers):
        rows = np.flatnonzero(slots == i)
        if len(rows):
            out[route.name] = (route, table.take(pa.array(rows)))
    return out


class TopicRouter:
    """Per-task cache of writable brokers per topic, from the NameServer(s)."""

    def __init__(self, namesrv: tuple[str, ...], timeout_s: float) -> None:
        self._lookup = NamesrvLookup(namesrv, timeout_s=min(10.0, timeout_s))
        self._namesrv = namesrv
        self._routes: dict[str, list[BrokerRoute]] = {}

    def writable(self, topic: str) -> list[BrokerRoute]:
        if topic not in self._routes:
            routes = [r for r in self._lookup.route(topic).values() if r.writable]
            if not routes:
                raise SinkError(
                    f"no broker takes writes for topic {topic!r} according to the "
                    f"NameServer(s) {list(self._namesrv)} (every route is read-only)"
                )
            self._routes[topic] = sorted(routes, key=lambda r: r.name)
        return self._routes[topic]

    def close(self) -> None:
        self._lookup.close()
