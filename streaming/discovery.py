"""Driver-side look-ups: which queues a subscription covers, and where to start.

These functions do the I/O around the pure planning in :mod:`offsets`:
list topics and queue windows (from one broker, or from every broker the
NameServer routes a topic to), fetch a group's committed offsets or the
offsets at a timestamp, and report data loss the way the user asked.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from .brokers import Brokers
from .errors import DataLossError, OptionError, TopicNotFoundError
from .offsets import (
    QueueKey,
    QueueRange,
    key_broker,
    key_name,
    key_queue,
    key_topic,
    lost_offsets,
    resolve,
)
from .options import EARLIEST, OffsetSpec, ReaderOptions, Subscription

__all__ = ["discover", "starting_offsets", "check_data_loss"]

log = logging.getLogger("sparkmq.streaming")


def _unknown_topic(topic: str, opts: ReaderOptions, exc: Exception) -> TopicNotFoundError:
    where = (f"NameServer(s) {list(opts.client.namesrv)}" if opts.client.routed
             else f"broker {list(opts.client.endpoints)}")
    return TopicNotFoundError(
        f"topic {topic!r} does not exist on {where}; create it "
        f"(`sparkmq topic create {topic}` or POST /v1/topics) or produce to it first "
        f"[{exc}]",
        status=404,
        code="topic_not_found",
    )


def _topic_queues(
    brokers: Brokers, topic: str, opts: ReaderOptions, strict: bool
) -> dict[QueueKey, QueueRange]:
    try:
        return brokers.queues(topic)
    except TopicNotFoundError as exc:
        if strict:
            raise _unknown_topic(topic, opts, exc) from exc
        return {}


def _check_assigned(topic: str, wanted: tuple[int, ...], queues: Mapping[QueueKey, QueueRange]) -> None:
    per_broker: dict[str, set[int]] = {}
    for key in queues:
        per_broker.setdefault(key_broker(key), set()).add(key_queue(key))
    for broker, have in sorted(per_broker.items()):
        missing = sorted(set(wanted) - have)
        if missing:
            on = f" on broker {broker!r}" if broker else ""
            raise TopicNotFoundError(
                f"option 'assign': topic {topic!r} has queues {sorted(have)}{on}, not {missing}",
                status=404,
                code="queue_not_found",
            )


def discover(brokers: Brokers, opts: ReaderOptions, *, strict: bool) -> dict[QueueKey, QueueRange]:
    """The current window of every queue the subscription covers.

    ``strict`` (query start) makes an unknown subscribed/assigned topic an
    error; later look-ups skip topics that vanished (the caller decides if
    that is data loss). With ``namesrv``, ``assign`` picks the listed queue
    ids on every broker serving the topic.
    """
    sub: Subscription = opts.subscription
    if sub.kind == "pattern":
        topics = [t for t in brokers.topics() if sub.matches(t)]
    else:
        topics = list(sub.topics)
    ranges: dict[QueueKey, QueueRange] = {}
    for topic in topics:
        queues = _topic_queues(brokers, topic, opts, strict and sub.kind != "pattern")
        wanted = sub.assigned.get(topic) if sub.kind == "assign" else None
        if wanted is not None and strict:
            _check_assigned(topic, wanted, queues)
        for key, rng in queues.items():
            if wanted is None or key_queue(key) in wanted:
                ranges[key] = rng
    return ranges


def _group_offsets(brokers: Brokers, group: str, keys: list[QueueKey]) -> dict[QueueKey, int]:
    found: dict[QueueKey, int] = {}
    seen: set[tuple[str, str]] = set()
    for key in sorted(keys):
        topic, broker = key_topic(key), key_broker(key)
        if (topic, broker) in seen:
            continue
        seen.add((topic, broker))
        for qid, off in brokers.client_for(key).group_offsets(group, topic).items():
            found[(topic, broker, qid) if broker else (topic, qid)] = off
    return found


def starting_offsets(
    brokers: Brokers,
    opts: ReaderOptions,
    ranges: Mapping[QueueKey, QueueRange],
    spec: OffsetSpec,
    *,
    name: str,
    missing: int = EARLIEST,
) -> dict[QueueKey, int]:
    """Resolve a starting/ending spec into concrete offsets for ``ranges``."""
    group = by_time = None
    if spec.kind == "timestamp":
        name = name.replace("Offsets", "Timestamp")
    elif spec.kind == "timestamps":
        name += "ByTimestamp"
    if spec.kind == "group":
        assert opts.group is not None
        group = _group_offsets(brokers, opts.group, list(ranges))
    elif spec.kind in ("timestamp", "timestamps"):
        resolve(spec, ranges, name=name, missing=missing)  # checks the JSON names every queue
        by_time = _offsets_at(brokers, ranges, spec, name)
    return resolve(spec, ranges, name=name, missing=missing, group=group, by_time=by_time)


def _timestamp_of(spec: OffsetSpec, key: QueueKey) -> int:
    if spec.kind == "timestamp":
        return spec.timestamp_ms
    if len(key) == 3:
        return spec.broker_offsets[key_topic(key)][key_broker(key)][key_queue(key)]
    return spec.offsets[key_topic(key)][key_queue(key)]


def _offsets_at(
    brokers: Brokers, ranges: Mapping[QueueKey, QueueRange], spec: OffsetSpec, name: str
) -> dict[QueueKey, int]:
    """Each queue's first offset stored at or after its timestamp (store time).

    None stored there (the broker answers the queue's end): the queue's end
    with strategy ``latest``, an error with ``error`` (Kafka's default).
    """
    out: dict[QueueKey, int] = {}
    unmatched: list[str] = []
    for key in sorted(ranges):
        ts = _timestamp_of(spec, key)
        off = brokers.client_for(key).offset_at(key_topic(key), key_queue(key), ts)
        if off >= ranges[key].max_offset:
            unmatched.append(f"{key_name(key)} (timestamp {ts})")
        out[key] = off
    if unmatched and spec.strategy == "error":
        raise OptionError(
            f"option '{name}': no message at or after the timestamp in "
            f"{', '.join(unmatched[:20])}. Set .option('startingOffsetsByTimestampStrategy', "
            "'latest') to start those queues at their end instead"
        )
    return out


def check_data_loss(
    start: Mapping[QueueKey, int],
    ranges: Mapping[QueueKey, QueueRange],
    *,
    fail: bool,
    subscribed: Callable[[str], bool] = lambda _topic: True,
) -> None:
    """Raise :class:`DataLossError` (or warn) for start offsets the broker no longer has.

    Topics in ``start`` that the subscription no longer covers (the query was
    restarted with other options) are not data loss; they are just not read.
    """
    problems = [
        f"{key_name(key)}: wanted offset {off}, queue holds [{rng.min_offset}, {rng.max_offset})"
        for key, off, rng in lost_offsets(start, ranges)
    ]
    known_topics = {key_topic(k) for k in ranges}
    gone = sorted({key_topic(k) for k in start if not key_broker(k)
                   and key_topic(k) not in known_topics and subscribed(key_topic(k))})
    problems += [f"topic {t!r} no longer exists" for t in gone]
    if not problems:
        return
    text = (
        "some offsets to read are no longer on the broker (retention deleted old "
        "CommitLog segments, or a topic/queue was deleted or reset): " + "; ".join(problems)
    )
    if fail:
        raise DataLossError(
            text + ". Set .option('failOnDataLoss', 'false') to skip ahead to the "
            "oldest available offsets instead of failing."
        )
    log.warning("%s; failOnDataLoss=false, skipping ahead", text)
