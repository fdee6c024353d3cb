"""Sink routing with ``namesrv``: which broker each row goes to.

A task asks the NameServer once per topic which brokers can take writes,
and splits each Arrow produce body over the same (broker, queue) slots as
``broker_api.client.SparkMQClient.produce``, so a key lands on the same
broker and queue whether the Spark sink or the client sends it::

    slots = sorted((broker, queue_id) for each writable broker, queue_id < write_queues)
    row with a key    -> slots[crc32(first key) % len(slots)]   (per-key order holds)
    row without key   -> slots[(seed + row number) % len(slots)] (round robin; the seed
                                                                   is the Spark partition id)

The slot's queue id is sent as the row's ``queue_id`` unless the row has one.
"""

from __future__ import annotations

import zlib

import numpy as np
import pyarrow as pa

from .errors import SinkError
from .namesrv import BrokerRoute, NamesrvLookup

__all__ = ["TopicRouter", "first_keys", "slot_of_rows", "slots_of", "split_by_broker"]


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


def slot_of_rows(table: pa.Table, n: int, seed: int) -> np.ndarray:
    """Index in [0, n) of the (broker, queue) slot for every row of a produce body."""
    slots = (np.arange(table.num_rows, dtype=np.int64) + seed) % n
    for i, key in enumerate(first_keys(table)):
        if key:
            slots[i] = zlib.crc32(key.encode("utf-8")) % n
    return slots


def _with_queue_ids(table: pa.Table, qids: np.ndarray) -> pa.Table:
    if "queue_id" in table.schema.names:
        return table  # the row's own queue_id wins, as in the client
    return table.append_column("queue_id", pa.array(qids.astype(np.int32), pa.int32()))


def split_by_broker(
    table: pa.Table, brokers: list[BrokerRoute], seed: int
) -> dict[str, tuple[BrokerRoute, pa.Table]]:
    """One produce body per broker, each row with its slot's queue id (row order kept)."""
    slots = slots_of(brokers)
    names = sorted({r.name for r, _ in slots})
    slot_broker = np.array([names.index(r.name) for r, _ in slots], dtype=np.int64)
    slot_queue = np.array([q for _, q in slots], dtype=np.int64)
    index = slot_of_rows(table, len(slots), seed)
    by_name = {r.name: r for r, _ in slots}
    out: dict[str, tuple[BrokerRoute, pa.Table]] = {}
    for number, name in enumerate(names):
        rows = np.flatnonzero(slot_broker[index] == number)
        if len(rows):
            part = _with_queue_ids(table.take(pa.array(rows)), slot_queue[index[rows]])
            out[name] = (by_name[name], part)
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
