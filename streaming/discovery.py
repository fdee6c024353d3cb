"""Driver-side look-ups: which queues a subscription covers, and where to start.

These functions do the I/O around the pure planning in :mod:`offsets`:
list topics and queue windows, fetch a group's committed offsets or the
offsets at a timestamp, and report data loss the way the user asked.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from .client import BrokerClient
from .errors import DataLossError, TopicNotFoundError
from .offsets import QueueKey, QueueRange, lost_offsets, resolve
from .options import EARLIEST, OffsetSpec, ReaderOptions, Subscription

__all__ = ["discover", "starting_offsets", "check_data_loss"]

log = logging.getLogger("sparkmq.streaming")


def _unknown_topic(topic: str, client_urls: tuple[str, ...], exc: Exception) -> TopicNotFoundError:
    return TopicNotFoundError(
        f"topic {topic!r} does not exist on broker {list(client_urls)}; create it "
        f"(`sparkmq topic create {topic}` or POST /v1/topics) or produce to it first "
        f"[{exc}]",
        status=404,
        code="topic_not_found",
    )


def _topic_queues(
    client: BrokerClient, topic: str, urls: tuple[str, ...], strict: bool
) -> dict[int, QueueRange]:
    try:
        return client.queues(topic)
    except TopicNotFoundError as exc:
        if strict:
            raise _unknown_topic(topic, urls, exc) from exc
        return {}


def discover(
    client: BrokerClient, opts: ReaderOptions, *, strict: bool
) -> dict[QueueKey, QueueRange]:
    """The current window of every queue the subscription covers.

    ``strict`` (query start) makes an unknown subscribed/assigned topic an
    error; later look-ups skip topics that vanished (the caller decides if
    that is data loss).
    """
    sub: Subscription = opts.subscription
    urls = opts.client.endpoints
    if sub.kind == "pattern":
        topics = [t for t in client.topics() if sub.matches(t)]
    else:
        topics = list(sub.topics)
    ranges: dict[QueueKey, QueueRange] = {}
    for topic in topics:
        queues = _topic_queues(client, topic, urls, strict and sub.kind != "pattern")
        wanted = sub.assigned.get(topic) if sub.kind == "assign" else None
        if wanted is not None and strict:
            missing = sorted(set(wanted) - set(queues))
            if missing:
                raise TopicNotFoundError(
                    f"option 'assign': topic {topic!r} has queues {sorted(queues)}, "
                    f"not {missing}",
                    status=404,
                    code="queue_not_found",
                )
        for qid, rng in queues.items():
            if wanted is None or qid in wanted:
                ranges[(topic, qid)] = rng
    return ranges


def _group_offsets(
    client: BrokerClient, group: str, topics: set[str]
) -> dict[QueueKey, int]:
    found: dict[QueueKey, int] = {}
    for topic in sorted(topics):
        for qid, off in client.group_offsets(group, topic).items():
            found[(topic, qid)] = off
    return found


def starting_offsets(
    client: BrokerClient,
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
        group = _group_offsets(client, opts.group, {t for t, _ in ranges})
    elif spec.kind == "timestamp":
        by_time = {
            key: client.offset_at(key[0], key[1], spec.timestamp_ms) for key in sorted(ranges)
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
        f"{t}/{q}: wanted offset {off}, queue holds [{rng.min_offset}, {rng.max_offset})"
        for (t, q), off, rng in lost_offsets(start, ranges)
    ]
    known_topics = {t for t, _ in ranges}
    gone = sorted({t for t, _ in start if t not in known_topics and subscribed(t)})
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
