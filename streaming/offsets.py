"""Offset planning: pure functions, no I/O, no Spark.

An offset is the next queue offset to read (RocketMQ semantics). Spark keeps
offsets as JSON and compares them *as strings*, so the JSON form always has
the same key order: topics sorted, queue ids sorted numerically (stored as
string keys because JSON object keys are strings)::

    {"orders": {"0": 23, "1": 7, "10": 2, "2": 9}}    <- wrong (string order)
    {"orders": {"0": 23, "1": 7, "2": 9, "10": 2}}    <- what to_json() writes

Inside the package offsets are flat dicts ``{(topic, queue_id): offset}``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .errors import OptionError
from .options import EARLIEST, LATEST, OffsetSpec

__all__ = [
    "QueueKey",
    "QueueRange",
    "RangePlan",
    "to_json",
    "from_json",
    "resolve",
    "spread",
    "plan_end",
    "plan_ranges",
    "lost_offsets",
]

QueueKey = tuple[str, int]


@dataclass(frozen=True)
class QueueRange:
    """A queue's readable window: [min_offset, max_offset)."""

    min_offset: int
    max_offset: int


@dataclass(frozen=True)
class RangePlan:
    """Offsets [start, end) of one queue to read in one Spark partition."""

    topic: str
    queue_id: int
    start: int
    end: int
    new_queue: bool


def to_json(flat: Mapping[QueueKey, int]) -> dict[str, dict[str, int]]:
    """Flat offsets → the stable JSON form Spark stores."""
    out: dict[str, dict[str, int]] = {}
    for topic, qid in sorted(flat):
        out.setdefault(topic, {})[str(qid)] = int(flat[(topic, qid)])
    return out


def from_json(offsets: Mapping[str, Mapping[str, int]] | None) -> dict[QueueKey, int]:
    """The JSON form (as Spark hands it back) → flat offsets."""
    if not offsets:
        return {}
    return {(t, int(q)): int(o) for t, qs in offsets.items() for q, o in qs.items()}


def _from_spec_json(
    spec: OffsetSpec, ranges: Mapping[QueueKey, QueueRange], name: str
) -> dict[QueueKey, int]:
    topics = {t for t, _ in ranges}
    for topic, queues in spec.offsets.items():
        if topic not in topics:
            raise OptionError(
                f"option '{name}' names topic {topic!r}, which is not subscribed "
                f"(or has no queues); subscribed topics: {sorted(topics)}"
            )
        for qid in queues:
            if (topic, qid) not in ranges:
                raise OptionError(f"option '{name}' names queue {qid} of topic {topic!r}, "
                                  f"which does not exist")
    return {(t, q): o for t, qs in spec.offsets.items() for q, o in qs.items()}


def resolve(
    spec: OffsetSpec,
    ranges: Mapping[QueueKey, QueueRange],
    *,
    name: str,
    missing: int = EARLIEST,
    group: Mapping[QueueKey, int] | None = None,
    by_time: Mapping[QueueKey, int] | None = None,
) -> dict[QueueKey, int]:
    """Turn a starting/ending spec into concrete offsets for every queue in ``ranges``.

    ``missing`` (-2 earliest / -1 latest) applies to queues a JSON spec or a
    group does not mention.
    """
    wanted: dict[QueueKey, int] = {}
    if spec.kind == "json":
        wanted = _from_spec_json(spec, ranges, name)
    elif spec.kind == "group":
        wanted = dict(group or {})
    elif spec.kind == "timestamp":
        wanted = dict(by_time or {})
    out: dict[QueueKey, int] = {}
    for key, rng in ranges.items():
        if spec.kind == "earliest":
            value = EARLIEST
        elif spec.kind == "latest":
            value = LATEST
        else:
            value = wanted.get(key, missing)
        if value == EARLIEST:
            value = rng.min_offset
        elif value == LATEST:
            value = rng.max_offset
        out[key] = value
    return out


def spread(available: Mapping[QueueKey, int], budget: int) -> dict[QueueKey, int]:
    """Share ``budget`` offsets across queues, max-min fair.

    Every queue gets an equal share capped by what it has; what a short queue
    leaves is shared among the others. A budget smaller than the number of
    queues goes to the queues with the largest backlog (ties: key order), so
    successive micro-batches rotate through them. Deterministic.
    """
    alloc = {k: 0 for k in available}
    left = sorted(k for k, n in available.items() if n > 0)
    while left and budget > 0:
        share = budget // len(left)
        if share == 0:
            by_backlog = sorted(left, key=lambda k: (-(available[k] - alloc[k]), k))
            for key in by_backlog[:budget]:
                alloc[key] += 1
            break
        still: list[QueueKey] = []
        for key in left:
            take = min(share, available[key] - alloc[key])
            alloc[key] += take
            budget -= take
            if alloc[key] < available[key]:
                still.append(key)
        left = still
    return alloc


def plan_end(
    start: Mapping[QueueKey, int],
    ranges: Mapping[QueueKey, QueueRange],
    *,
    target: Mapping[QueueKey, int] | None = None,
    max_rows: int | None = None,
) -> dict[QueueKey, int]:
    """The end offsets of the next micro-batch.

    Queues in ``start`` but gone from ``ranges`` keep their offset; queues new
    in ``ranges`` start at 0. A start below the queue's min offset (retention)
    begins at the min offset. ``target`` caps every queue (Trigger.AvailableNow);
    ``max_rows`` caps the total (maxOffsetsPerTrigger).
    """
    end = dict(start)
    begin: dict[QueueKey, int] = {}
    available: dict[QueueKey, int] = {}
    for key, rng in ranges.items():
        s = start.get(key, 0)
        begin[key] = max(s, rng.min_offset)
        hi = rng.max_offset
        if target is not None:
            hi = min(hi, target.get(key, s))
        available[key] = max(0, hi - begin[key])
    take = available if max_rows is None else spread(available, max_rows)
    for key in ranges:
        end[key] = begin[key] + take[key]
    return end


def plan_ranges(start: Mapping[QueueKey, int], end: Mapping[QueueKey, int]) -> list[RangePlan]:
    """One range per queue with end > start, in key order (deterministic)."""
    plans: list[RangePlan] = []
    for topic, qid in sorted(end):
        new = (topic, qid) not in start
        s = 0 if new else start[(topic, qid)]
        e = end[(topic, qid)]
        if e > s:
            plans.append(RangePlan(topic, qid, s, e, new))
    return plans


def lost_offsets(
    start: Mapping[QueueKey, int], ranges: Mapping[QueueKey, QueueRange]
) -> Iterable[tuple[QueueKey, int, QueueRange]]:
    """Queues whose start offset is outside [min_offset, max_offset] (data gone)."""
    for key in sorted(start):
        rng = ranges.get(key)
        if rng is not None and not rng.min_offset <= start[key] <= rng.max_offset:
            yield key, start[key], rng
