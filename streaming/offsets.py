"""Offset planning: pure functions, no I/O, no Spark.

An offset is the next queue offset to read (RocketMQ semantics). Spark keeps
offsets as JSON and compares them *as strings*, so the JSON form always has
the same key order: topics sorted, queue ids sorted numerically (stored as
string keys because JSON object keys are strings)::

    {"orders": {"0": 23, "1": 7, "10": 2, "2": 9}}    <- wrong (string order)
    {"orders": {"0": 23, "1": 7, "2": 9, "10": 2}}    <- what to_json() writes

With the ``namesrv`` option a topic is served by several brokers, and the
JSON grows a broker level (brokers sorted by name)::

    {"orders": {"broker-a": {"0": 12, "1": 7}, "broker-b": {"0": 3}}}

**Initial offsets live in the checkpoint.** Spark asks ``initialOffset()``
again when it restarts a query whose batch 0 is in the offset log but not
committed, so a start resolved from ``latest``, a group or a timestamp would
move. ``initialOffset()`` therefore marks its answer, and batch 0's end
(which Spark writes to ``offsets/0`` before running the batch) carries the
start it was planned from; a replayed batch 0 starts there::

    initialOffset()        {"$initial": 1, "orders": {"0": 5}}
    batch 0's end          {"$from": {"orders": {"0": 5}}, "orders": {"0": 9}}
    later offsets          {"orders": {"0": 12}}

Keys starting with ``$`` are never topic names (topics are ``[%|a-zA-Z0-9_-]``).

Inside the package offsets are flat dicts ``{QueueKey: offset}``; a key is
``(topic, queue_id)`` with ``endpoint`` and ``(topic, broker, queue_id)`` with
``namesrv`` (one query never mixes the two, so keys always sort).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import OptionError
from .offset_options import EARLIEST, LATEST, OffsetSpec

__all__ = [
    "QueueKey",
    "key_topic",
    "key_queue",
    "key_broker",
    "key_name",
    "QueueRange",
    "RangePlan",
    "to_json",
    "from_json",
    "INITIAL",
    "FROM",
    "initial_json",
    "batch_start",
    "resolve",
    "prorate",
    "split_plans",
    "plan_end",
    "plan_ranges",
    "lost_offsets",
]

QueueKey = tuple[str, int] | tuple[str, str, int]

INITIAL = "$initial"
FROM = "$from"


def key_topic(key: QueueKey) -> str:
    """The topic of a queue key."""
    return key[0]


def key_queue(key: QueueKey) -> int:
    """The queue id of a queue key."""
    return int(key[-1])


def key_broker(key: QueueKey) -> str:
    """The broker name of a queue key ('' for a single-broker ``endpoint`` key)."""
    return str(key[1]) if len(key) == 3 else ""


def key_name(key: QueueKey) -> str:
    """``topic/queue`` or ``topic@broker/queue`` for messages."""
    broker = key_broker(key)
    return f"{key[0]}@{broker}/{key[-1]}" if broker else f"{key[0]}/{key[-1]}"


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
    broker: str = ""


def to_json(flat: Mapping[QueueKey, int]) -> dict[str, Any]:
    """Flat offsets → the stable JSON form Spark stores."""
    out: dict[str, Any] = {}
    for key in sorted(flat):
        level = out.setdefault(key[0], {})
        if len(key) == 3:
            level = level.setdefault(str(key[1]), {})
        level[str(key[-1])] = int(flat[key])
    return out


def from_json(offsets: Mapping[str, Mapping[str, Any]] | None) -> dict[QueueKey, int]:
    """The JSON form (as Spark hands it back), either shape → flat offsets."""
    flat: dict[QueueKey, int] = {}
    for topic, level in (offsets or {}).items():
        if topic.startswith("$"):
            continue
        for name, value in level.items():
            if isinstance(value, Mapping):
                for qid, off in value.items():
                    flat[(topic, str(name), int(qid))] = int(off)
            else:
                flat[(topic, int(name))] = int(value)
    return flat


def initial_json(flat: Mapping[QueueKey, int]) -> dict[str, Any]:
    """What ``initialOffset()`` answers: the start, marked as not yet planned."""
    return {INITIAL: 1, **to_json(flat)}


def batch_start(start: Mapping[str, Any], end: Mapping[str, Any]) -> dict[QueueKey, int]:
    """Where the batch (start, end] begins: batch 0's end names it, else ``start``."""
    origin = end.get(FROM)
    return from_json(origin if isinstance(origin, Mapping) else start)


def _from_spec_json(
    spec: OffsetSpec, ranges: Mapping[QueueKey, QueueRange], name: str
) -> dict[QueueKey, int]:
    topics = {key_topic(k) for k in ranges}
    wanted: dict[QueueKey, int] = {(t, q): o for t, qs in spec.offsets.items() for q, o in qs.items()}
    wanted.update({(t, b, q): o for t, bs in spec.broker_offsets.items()
                   for b, qs in bs.items() for q, o in qs.items()})
    for key in wanted:
        if key_topic(key) not in topics:
            raise OptionError(
                f"option '{name}' names topic {key_topic(key)!r}, which is not subscribed "
                f"(or has no queues); subscribed topics: {sorted(topics)}"
            )
        if key not in ranges:
            where = f" on broker {key_broker(key)!r}" if key_broker(key) else ""
            raise OptionError(f"option '{name}' names queue {key_queue(key)} of topic "
                              f"{key_topic(key)!r}{where}, which does not exist")
    missing = sorted(set(ranges) - set(wanted))
    if missing:
        raise OptionError(
            f"option '{name}' must name every queue of the subscribed topics (as Kafka's "
            f"source requires); missing: {', '.join(key_name(k) for k in missing[:20])}"
            f"{' ...' if len(missing) > 20 else ''}. Use -2 for earliest, -1 for latest"
        )
    return wanted


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
    if spec.kind in ("json", "timestamps"):
        wanted = _from_spec_json(spec, ranges, name)
    elif spec.kind == "group":
        wanted = dict(group or {})
    if spec.kind in ("timestamp", "timestamps"):
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


def prorate(available: Mapping[QueueKey, int], budget: int) -> dict[QueueKey, int]:
    """Share ``budget`` offsets across queues in proportion to each one's backlog.

    As Spark's Kafka source: a queue's share is ``budget * backlog / total``,
    rounded down, except that a share below one is rounded up so no queue
    with a backlog starves (the total may then pass ``budget`` by a little).
    Capped at the backlog. Deterministic.
    """
    total = sum(n for n in available.values() if n > 0)
    if total <= budget:
        return {k: max(0, n) for k, n in available.items()}
    out: dict[QueueKey, int] = {}
    for key, n in available.items():
        if n <= 0:
            out[key] = 0
            continue
        share = budget * n / total
        out[key] = min(n, math.ceil(share) if share < 1 else math.floor(share))
    return out


def plan_end(
    start: Mapping[QueueKey, int],
    ranges: Mapping[QueueKey, QueueRange],
    *,
    target: Mapping[QueueKey, int] | None = None,
    max_rows: int | None = None,
) -> dict[QueueKey, int]:
    """The end offsets of the next micro-batch.

    Queues in ``start`` but gone from ``ranges`` (a broker that is down) keep
    their offset; queues new in ``ranges`` start at 0. A start below the
    queue's min offset (retention) begins at the min offset; one above its max
    offset (the broker came back with less data, failOnDataLoss=false) goes
    back to the max offset. ``target`` caps every queue (Trigger.AvailableNow);
    ``max_rows`` caps the total (maxOffsetsPerTrigger).
    """
    end = dict(start)
    begin: dict[QueueKey, int] = {}
    available: dict[QueueKey, int] = {}
    for key, rng in ranges.items():
        s = start.get(key, 0)
        begin[key] = min(max(s, rng.min_offset), rng.max_offset)
        hi = rng.max_offset
        if target is not None:
            hi = min(hi, target.get(key, s))
        available[key] = max(0, hi - begin[key])
    take = available if max_rows is None else prorate(available, max_rows)
    for key in ranges:
        end[key] = begin[key] + take[key]
    return end


def plan_ranges(start: Mapping[QueueKey, int], end: Mapping[QueueKey, int]) -> list[RangePlan]:
    """One range per queue with end > start, in key order (deterministic)."""
    plans: list[RangePlan] = []
    for key in sorted(end):
        new = key not in start
        s = 0 if new else start[key]
        e = end[key]
        if e > s:
            plans.append(RangePlan(key_topic(key), key_queue(key), s, e, new, key_broker(key)))
    return plans


def _divide(plan: RangePlan, parts: int) -> list[RangePlan]:
    """``plan`` cut into ``parts`` consecutive ranges of near-equal size (none empty)."""
    out: list[RangePlan] = []
    size, start = plan.end - plan.start, plan.start
    for i in range(max(1, parts)):
        end = start + (size - (start - plan.start)) // (parts - i) if parts > 1 else plan.end
        if end > start:
            out.append(RangePlan(plan.topic, plan.queue_id, start, end,
                                 plan.new_queue and start == plan.start, plan.broker))
        start = end
    return out


def split_plans(
    plans: list[RangePlan], min_partitions: int | None, max_records: int | None
) -> list[RangePlan]:
    """Cut big ranges so one queue is read by several Spark tasks (Kafka's options).

    ``maxRecordsPerPartition`` cuts every range into pieces of at most that
    many offsets; then, when fewer than ``minPartitions`` ranges remain, each
    range gets about ``minPartitions * size / total`` pieces (at least one).
    """
    if max_records:
        plans = [p for plan in plans
                 for p in _divide(plan, -(-(plan.end - plan.start) // max_records))]
    if min_partitions and 0 < len(plans) < min_partitions:
        total = sum(p.end - p.start for p in plans)
        plans = [p for plan in plans
                 for p in _divide(plan, max(1, round((plan.end - plan.start) / total
                                                     * min_partitions)))]
    return plans


def lost_offsets(
    start: Mapping[QueueKey, int], ranges: Mapping[QueueKey, QueueRange]
) -> Iterable[tuple[QueueKey, int, QueueRange]]:
    """Queues whose start offset is outside [min_offset, max_offset] (data gone)."""
    for key in sorted(start):
        rng = ranges.get(key)
        if rng is not None and not rng.min_offset <= start[key] <= rng.max_offset:
            yield key, start[key], rng
