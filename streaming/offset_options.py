"""Starting and ending positions: ``startingOffsets``, ``endingOffsets`` and their timestamp forms.

Precedence follows Spark's Kafka source: ``startingTimestamp`` (one epoch-ms
value for every queue) > ``startingOffsetsByTimestamp`` (per queue) >
``startingOffsets``; the same for the ``ending*`` options (batch reads
only). JSON names topics, then queue ids (with ``namesrv`` a broker level
in between)::

    {"orders": {"0": 23, "1": -2}}                              -2 earliest, -1 latest
    {"orders": {"broker-a": {"0": 23}, "broker-b": {"0": -2}}}  with 'namesrv'
    {"orders": {"0": 1700000000000, "1": 1700000000000}}        ...ByTimestamp (epoch ms)

As in Kafka, JSON must name every queue of the subscribed topics.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from .errors import OptionError
from .optvalues import get

__all__ = [
    "EARLIEST",
    "LATEST",
    "OffsetSpec",
    "parse_offsets_json",
    "parse_broker_offsets_json",
    "is_broker_shape",
    "parse_starting",
    "parse_ending",
]

EARLIEST = -2
LATEST = -1

SpecKind = Literal["earliest", "latest", "group", "json", "timestamp", "timestamps"]


@dataclass(frozen=True)
class OffsetSpec:
    """A starting or ending position: a keyword, JSON offsets or timestamps.

    ``timestamps`` keeps its per-queue epoch-ms values in ``offsets`` /
    ``broker_offsets``. ``strategy`` says what a timestamp that matches no
    message means: ``error`` (fail) or ``latest`` (the queue's end).
    """

    kind: SpecKind
    offsets: Mapping[str, Mapping[int, int]] = field(default_factory=dict)
    timestamp_ms: int = 0
    broker_offsets: Mapping[str, Mapping[str, Mapping[int, int]]] = field(default_factory=dict)
    strategy: Literal["error", "latest"] = "latest"


_OFFSETS_EXAMPLE = ("""e.g. {"orders":{"0":23,"1":-2}}, or with 'namesrv' """
                    """{"orders":{"broker-a":{"0":23},"broker-b":{"0":-2}}} """
                    "(-2 = earliest, -1 = latest)")


def _load(raw: str, name: str) -> dict[str, Any]:
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise OptionError(f"option '{name}' is not valid JSON ({exc}); {_OFFSETS_EXAMPLE}") from exc
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise OptionError(f"option '{name}' must map topics to {{queue id: offset}}; "
                          f"{_OFFSETS_EXAMPLE}")
    return data


def _queue_values(queues: Mapping[str, Any], where: str, name: str, low: int) -> dict[int, int]:
    what = "an integer >= -2" if low == EARLIEST else "epoch milliseconds (an integer >= 0)"
    parsed: dict[int, int] = {}
    for qid, off in queues.items():
        if not str(qid).isdigit():
            raise OptionError(f"option '{name}': queue id {qid!r} of {where} "
                              f"is not a non-negative integer; {_OFFSETS_EXAMPLE}")
        if isinstance(off, bool) or not isinstance(off, int) or off < low:
            raise OptionError(f"option '{name}': value {off!r} for {where}/{qid} must be "
                              f"{what}; {_OFFSETS_EXAMPLE}")
        parsed[int(qid)] = off
    return parsed


def is_broker_shape(data: Mapping[str, Any]) -> bool:
    """True for ``{"orders": {"broker-a": {"0": 12}}}`` (a broker level under each topic)."""
    return any(isinstance(v, dict) for qs in data.values() for v in qs.values())


def parse_offsets_json(raw: str, name: str, low: int = EARLIEST) -> dict[str, dict[int, int]]:
    """``{"orders":{"0":23,"1":-2}}`` → ``{"orders": {0: 23, 1: -2}}`` (-2 earliest, -1 latest)."""
    data = _load(raw, name)
    if is_broker_shape(data):
        raise OptionError(f"option '{name}' has a broker level, which needs option 'namesrv'; "
                          f"{_OFFSETS_EXAMPLE}")
    return {topic: _queue_values(qs, f"topic {topic!r}", name, low) for topic, qs in data.items()}


def parse_broker_offsets_json(
    raw: str, name: str, low: int = EARLIEST
) -> dict[str, dict[str, dict[int, int]]]:
    """``{"orders":{"broker-a":{"0":12}}}`` → ``{"orders": {"broker-a": {0: 12}}}``."""
    data = _load(raw, name)
    out: dict[str, dict[str, dict[int, int]]] = {}
    for topic, brokers in data.items():
        if not all(isinstance(v, dict) for v in brokers.values()):
            raise OptionError(f"option '{name}': with 'namesrv', topic {topic!r} must map "
                              f"broker names to {{queue id: offset}}; {_OFFSETS_EXAMPLE}")
        out[topic] = {b: _queue_values(qs, f"{topic}/{b}", name, low)
                      for b, qs in brokers.items()}
    return out


def _json_spec(options: Mapping[str, str], raw: str, name: str, kind: str, low: int,
               strategy: str = "latest") -> OffsetSpec:
    if get(options, "namesrv") is not None:
        return OffsetSpec(kind, broker_offsets=parse_broker_offsets_json(raw, name, low),  # type: ignore[arg-type]
                          strategy=strategy)  # type: ignore[arg-type]
    return OffsetSpec(kind, offsets=parse_offsets_json(raw, name, low),  # type: ignore[arg-type]
                      strategy=strategy)  # type: ignore[arg-type]


def _keyword_or_json(options: Mapping[str, str], name: str, default: str) -> OffsetSpec:
    raw = get(options, name) or default
    low = raw.lower()
    if low in ("earliest", "latest", "group"):
        return OffsetSpec(low)  # type: ignore[arg-type]
    if raw.startswith("{"):
        return _json_spec(options, raw, name, "json", EARLIEST)
    raise OptionError(
        f"option '{name}' must be 'earliest', 'latest', 'group' or JSON offsets, got {raw!r}"
    )


def _by_time(options: Mapping[str, str], prefix: str, strategy: str) -> OffsetSpec | None:
    """``<prefix>Timestamp`` (global) or ``<prefix>OffsetsByTimestamp`` (JSON), if set."""
    ts = get(options, f"{prefix}Timestamp")
    if ts is not None:
        if not ts.isdigit():
            raise OptionError(f"option '{prefix}Timestamp' must be epoch milliseconds, "
                              f"got {ts!r}")
        return OffsetSpec("timestamp", timestamp_ms=int(ts), strategy=strategy)  # type: ignore[arg-type]
    raw = get(options, f"{prefix}OffsetsByTimestamp")
    if raw is not None:
        return _json_spec(options, raw, f"{prefix}OffsetsByTimestamp", "timestamps", 0, strategy)
    return None


def _flat(spec: OffsetSpec) -> list[int]:
    flat = [o for q in spec.offsets.values() for o in q.values()]
    return flat + [o for bs in spec.broker_offsets.values() for q in bs.values() for o in q.values()]


def parse_starting(options: Mapping[str, str], batch: bool) -> OffsetSpec:
    """The start: by timestamp first (``startingOffsetsByTimestampStrategy``), else offsets."""
    strategy = (get(options, "startingOffsetsByTimestampStrategy") or "error").lower()
    if strategy not in ("error", "latest"):
        raise OptionError("option 'startingOffsetsByTimestampStrategy' must be 'error' or "
                          f"'latest', got {strategy!r}")
    spec = _by_time(options, "starting", strategy)
    if spec is not None:
        return spec
    spec = _keyword_or_json(options, "startingOffsets", "earliest" if batch else "latest")
    if batch and (spec.kind == "latest" or LATEST in _flat(spec)):
        raise OptionError("startingOffsets='latest' (or -1 in its JSON) is not allowed in a "
                          "batch read; a batch reads [startingOffsets, endingOffsets)")
    return spec


def parse_ending(options: Mapping[str, str], batch: bool) -> OffsetSpec:
    """Batch reads only; a timestamp that matches nothing reads to the end (as Kafka)."""
    if not batch:
        for name in ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp"):
            if get(options, name) is not None:
                raise OptionError(f"option '{name}' is for batch reads (spark.read) only; "
                                  "a stream has no end")
        return OffsetSpec("latest")
    spec = _by_time(options, "ending", "latest")
    if spec is not None:
        return spec
    spec = _keyword_or_json(options, "endingOffsets", "latest")
    if spec.kind in ("earliest", "group"):
        raise OptionError(f"endingOffsets='{spec.kind}' is not allowed; use 'latest' or JSON")
    if EARLIEST in _flat(spec):
        raise OptionError("endingOffsets may not use -2 (earliest); use an offset or -1 (latest)")
    return spec
