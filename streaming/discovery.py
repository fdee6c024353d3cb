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
from .errors import DataLossError, TopicNotFoundError
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

__all__ = ["discover", "starting_offsets", "check_data_loss", "check_gone_brokers"]

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
    if spec.kind == "group":
        assert opts.group is not None
        group = _group_offsets(brokers, opts.group, list(ranges))
    elif spec.kind == "timestamp":
        by_time = {
            key: brokers.client_for(key).offset_at(key_topic(key), key_queue(key),
                                                   spec.timestamp_ms)
            for key in sorted(ranges)
        }
    return resolve(spec, ranges, name=name, missing=missing, group=group, by_time=by_time)


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


def gone_brokers(
    start: Mapping[QueueKey, int],
    ranges: Mapping[QueueKey, QueueRange],
    subscribed: Callable[[str], bool] = lambda _topic: True,
) -> dict[tuple[str, str], list[QueueKey]]:
    """(topic, broker) pairs in ``start`` that no longer serve a still-subscribed topic."""
    serving = {(key_topic(k), key_broker(k)) for k in ranges}
    out: dict[tuple[str, str], list[QueueKey]] = {}
    for key in sorted(start):
        pair = (key_topic(key), key_broker(key))
        if pair[1] and pair not in serving and subscribed(pair[0]):
            out.setdefault(pair, []).append(key)
    return out


def check_gone_brokers(
    start: Mapping[QueueKey, int],
    ranges: Mapping[QueueKey, QueueRange],
    known_max: Mapping[QueueKey, int],
    *,
    fail: bool,
    subscribed: Callable[[str], bool] = lambda _topic: True,
) -> set[tuple[str, str]]:
    """Fail (or warn) for brokers that left a topic's routes with unread data.

    A queue is unread when its start offset is below the last max offset this
    query saw, or when this query never saw the broker (after a restart there
    is no way to tell). Returns the (topic, broker) pairs that are gone.
    """
    gone = gone_brokers(start, ranges, subscribed)
    problems: list[str] = []
    for (topic, broker), keys in gone.items():
        unread = [k for k in keys if k not in known_max or start[k] < known_max[k]]
        if not unread:
            log.info("broker %r left the routes of %r with everything read", broker, topic)
            continue
        detail = ", ".join(
            f"queue {key_queue(k)} read up to {start[k]}"
            + (f" of {known_max[k]}" if k in known_max else " (its end is unknown)")
            for k in unread
        )
        problems.append(f"broker {broker!r} no longer serves topic {topic!r} ({detail})")
    if problems:
        text = ("a broker disappeared from the NameServer routes while its queues may still "
                "hold unread messages: " + "; ".join(problems))
        if fail:
            raise DataLossError(
                text + ". Restart that broker so it registers again (reading resumes where "
                "it stopped), or set .option('failOnDataLoss', 'false') to go on without it "
                "(its offsets stay in the checkpoint, so reading resumes if it comes back)."
            )
        log.warning("%s; failOnDataLoss=false, going on without it", text)
    return set(gone)
