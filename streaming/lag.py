"""How far a query is behind, per queue, from its progress.

PySpark's Python stream readers cannot report custom source metrics (Kafka's
``minOffsetsBehindLatest`` and friends), but each progress already holds
what is needed: ``endOffset`` (what the batch read up to) and
``latestOffset`` (the queues' ends the reader saw when planning it)::

    lag = streaming.lag(query.lastProgress)
    # {"orders/0": 0, "orders/1": 1200, ...}  (with namesrv: "orders@broker-a/0")

The broker's own view, for a query with the ``group`` option, is the
consumer group's lag on ``/metrics`` and in ``sparkmq groups``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .offsets import from_json, key_name

__all__ = ["lag"]


def _offsets(value: Any) -> Mapping[str, Any] | None:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    return value if isinstance(value, Mapping) else None


def _sources(progress: Any) -> list[Any]:
    if isinstance(progress, str):
        progress = json.loads(progress)
    if isinstance(progress, Mapping):
        return list(progress.get("sources") or [])
    return list(getattr(progress, "sources", None) or [])


def _field(source: Any, name: str) -> Any:
    return source.get(name) if isinstance(source, Mapping) else getattr(source, name, None)


def lag(progress: Any) -> dict[str, int]:
    """Offsets each queue is behind: ``latestOffset - endOffset`` of every sparkmq source.

    ``progress`` is ``query.lastProgress`` (or one of ``query.recentProgress``,
    as an object, a dict or its JSON). Queues are named ``topic/queue`` (with
    ``namesrv``: ``topic@broker/queue``); an empty dict when no batch ran yet.
    """
    out: dict[str, int] = {}
    for source in _sources(progress or {}):
        latest = _offsets(_field(source, "latestOffset"))
        end = _offsets(_field(source, "endOffset"))
        if latest is None or end is None:
            continue
        try:
            read, ends = from_json(end), from_json(latest)
        except (TypeError, ValueError, AttributeError):
            continue  # another source's offsets
        for key, top in sorted(ends.items()):
            out[key_name(key)] = max(0, top - read.get(key, 0))
    return out
