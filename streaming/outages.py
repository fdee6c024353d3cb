"""Brokers that are down while a query holds offsets for their queues (driver only).

A broker is *down* for a query when the checkpoint's offsets name its queues
and, this micro-batch, it either did not answer or the NameServer no longer
routes the topic to it. Its queues keep their offsets (the planner gives
them empty ranges) while every other queue advances::

    first batch it is down      since[broker] = now        warning
    every batch after           now - since < timeout      warning (how long, how long left)
                                now - since >= timeout     BrokerUnavailableError
                                                           (failOnDataLoss=false: warning)
    it answers again            since[broker] dropped      its queues resume where they stood

``since`` lives in this object only, never in the offsets (Spark compares
offsets as strings, and a restarted query starts the clock again). A broker
that leaves the routes after this query read everything it had seen there
(a clean decommission) is not waited for.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping

from .brokers import Brokers
from .errors import BrokerUnavailableError
from .offsets import QueueKey, QueueRange, key_broker, key_queue, key_topic

__all__ = ["BrokerOutages", "missing_brokers"]

log = logging.getLogger("sparkmq.streaming")

Subscribed = Callable[[str], bool]


def missing_brokers(
    begin: Mapping[QueueKey, int],
    ranges: Mapping[QueueKey, QueueRange],
    view: Brokers,
    subscribed: Subscribed,
) -> dict[str, list[QueueKey]]:
    """Broker name → keys in ``begin`` that cannot be read this batch.

    With ``namesrv``: (topic, broker) pairs without a window in ``ranges``.
    With ``endpoint`` (broker ''), every key, but only when the broker failed.
    """
    serving = {(key_topic(k), key_broker(k)) for k in ranges}
    out: dict[str, list[QueueKey]] = {}
    for key in sorted(begin):
        broker = key_broker(key)
        if not subscribed(key_topic(key)):
            continue
        gone = (key_topic(key), broker) not in serving if broker else "" in view.unavailable
        if gone:
            out.setdefault(broker, []).append(key)
    return out


class BrokerOutages:
    """Tracks since when each down broker has been down; warns, or fails past the timeout."""

    def __init__(
        self, timeout_ms: int, fail_on_data_loss: bool, clock: Callable[[], float] = time.time
    ) -> None:
        self._timeout_s = timeout_ms / 1000.0
        self._fail = fail_on_data_loss
        self._clock = clock
        self._since: dict[str, float] = {}
        self._known_max: dict[QueueKey, int] = {}

    @property
    def down(self) -> dict[str, float]:
        """Broker name → wall-clock time it was first found down."""
        return dict(self._since)

    def update(
        self,
        begin: Mapping[QueueKey, int],
        ranges: Mapping[QueueKey, QueueRange],
        view: Brokers,
        subscribed: Subscribed = lambda _topic: True,
    ) -> set[str]:
        """Judge this batch's down brokers; returns their names. Raises past the timeout."""
        now = self._clock()
        missing = missing_brokers(begin, ranges, view, subscribed)
        for broker in sorted(set(self._since) - set(missing)):
            log.warning("broker %s answers again after %.1f s down; its queues resume at "
                        "their offsets", _label(broker, view), now - self._since.pop(broker))
        waited: set[str] = set()
        for broker, keys in sorted(missing.items()):
            if broker not in self._since and self._retired(broker, keys, begin, view):
                continue
            since = self._since.setdefault(broker, now)
            self._judge(broker, keys, now - since, view)
            waited.add(broker)
        self._known_max.update({key: rng.max_offset for key, rng in ranges.items()})
        return waited

    def _retired(
        self, broker: str, keys: list[QueueKey], begin: Mapping[QueueKey, int], view: Brokers
    ) -> bool:
        """A broker that left the routes with everything this query saw read."""
        if not broker or broker in view.unavailable:
            return False
        if any(k not in self._known_max or begin[k] < self._known_max[k] for k in keys):
            return False
        log.info("broker %r left the routes of %s with everything read; its offsets stay in "
                 "the checkpoint", broker, sorted({key_topic(k) for k in keys}))
        return True

    def _judge(self, broker: str, keys: list[QueueKey], down_s: float, view: Brokers) -> None:
        text = f"broker {_label(broker, view)} {_why(broker, keys, view)}; " \
               f"down for {down_s:.1f} s; its queues {_queues(keys)} stay at their offsets " \
               "while the other queues advance"
        if down_s < self._timeout_s:
            log.warning("%s; the query fails if it is still down after brokerDownTimeoutMs="
                        "%d (%.0f s left)", text, self._timeout_s * 1000, self._timeout_s - down_s)
            return
        if not self._fail:
            log.warning("%s; past brokerDownTimeoutMs=%d, going on without it "
                        "(failOnDataLoss=false)", text, self._timeout_s * 1000)
            return
        raise BrokerUnavailableError(
            f"{text}, for longer than brokerDownTimeoutMs={self._timeout_s * 1000:.0f}. "
            "Restart that broker (reading resumes exactly where it stopped) and restart the "
            "query, raise brokerDownTimeoutMs, or set .option('failOnDataLoss', 'false') to "
            "keep going without it.",
            broker=broker, address=",".join(view.addresses(broker)),
        )


def _label(broker: str, view: Brokers) -> str:
    where = ", ".join(view.addresses(broker)) or "address unknown"
    return f"{broker!r} ({where})" if broker else f"at {where}"


def _why(broker: str, keys: list[QueueKey], view: Brokers) -> str:
    """Whether it did not answer, and what the NameServer said about it."""
    topic = key_topic(keys[0])
    error = view.unavailable.get(broker)
    if not view.routed:
        return f"does not answer ({error})"
    listed = view.listed(topic, broker)
    if listed is None:
        said = "no NameServer answered either, so the routes seen last are used"
    elif listed:
        said = f"the NameServer still routes topic {topic!r} to it"
    else:
        said = (f"the NameServer no longer routes topic {topic!r} to it (it stopped, "
                "or missed its heartbeats)")
    if error is None:
        return f"is not readable: {said}"
    return f"does not answer: {said}; last error: {error}"


def _queues(keys: list[QueueKey]) -> str:
    per_topic: dict[str, list[int]] = {}
    for key in keys:
        per_topic.setdefault(key_topic(key), []).append(key_queue(key))
    return "; ".join(f"{t} {qs}" for t, qs in sorted(per_topic.items()))
