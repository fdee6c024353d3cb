"""The delayed-message names and delay levels, without numpy: what settings and topic rules need.

The hidden topics and the properties a scheduled or timer copy carries, and :func:`parse_levels`
for the ``[delay] levels`` setting; :mod:`store.schedule` (the deliverer's side) re-exports them.
"""

from __future__ import annotations

import re

__all__ = [
    "SCHEDULE_TOPIC", "TIMER_TOPIC", "REAL_TOPIC", "REAL_QID", "DELAY", "TIMER_DELIVER_MS", "DELAY_ORIGIN",
    "DEFAULT_LEVELS", "parse_levels",
]

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
TIMER_TOPIC = "rmq_sys_wheel_timer"
REAL_TOPIC = "REAL_TOPIC"
REAL_QID = "REAL_QID"
DELAY = "DELAY"
TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
DELAY_ORIGIN = "sparkmq.delay_origin"  # CommitLog offset of the scheduled copy, on the delivered message
DEFAULT_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_LEVEL = re.compile(r"^(\d+)(ms|s|m|h|d)$")


def parse_levels(spec: str) -> list[int]:
    """``"1s 5s 10s ..."`` → delays in ms, level 1 first (units ms, s, m, h, d; RocketMQ's parseDelayLevel)."""
    out = []
    for word in spec.split():
        m = _LEVEL.match(word)
        if m is None or int(m.group(1)) <= 0:
            raise ValueError(f"delay level {word!r} is not a positive number with a unit ms, s, m, h or d")
        out.append(int(m.group(1)) * _UNITS_MS[m.group(2)])
    if not out:
        raise ValueError("at least one delay level is needed, e.g. \"1s 5s 10s\"")
    return out
