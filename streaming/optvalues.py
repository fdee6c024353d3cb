"""Reading single option values, and the lists of options each side accepts.

Spark hands a data source its options as a case-insensitive mapping of
strings. An option name that is not in :data:`READER_OPTIONS` (or
:data:`WRITER_OPTIONS`) fails the query at start, naming it, the closest
valid name and the full list: a typo such as ``startingOffset`` must never
silently mean the default (``latest``).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping

from .errors import OptionError

__all__ = [
    "READER_OPTIONS",
    "WRITER_OPTIONS",
    "check_known",
    "get",
    "positive_int",
    "non_negative_int",
    "boolean",
    "duration_ms",
]

_CONNECTION = ("endpoint", "namesrv", "requestTimeoutMs", "token", "user", "secret", "caFile")

READER_OPTIONS: tuple[str, ...] = _CONNECTION + (
    "subscribe", "subscribePattern", "assign",
    "startingOffsets", "startingOffsetsByTimestamp", "startingTimestamp",
    "startingOffsetsByTimestampStrategy",
    "endingOffsets", "endingOffsetsByTimestamp", "endingTimestamp",
    "failOnDataLoss", "maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay",
    "minPartitions", "maxRecordsPerPartition", "includeHeaders", "includeSparkmqColumns",
    "kafkaConsumer.pollTimeoutMs", "fetchOffset.numRetries", "fetchOffset.retryIntervalMs",
    "groupIdPrefix", "group", "tags", "filter", "pageSize", "brokerDownTimeoutMs",
    "skipUnavailableBrokers",
)

WRITER_OPTIONS: tuple[str, ...] = _CONNECTION + (
    "topic", "sinkId", "chunkRows", "sendRetries",
    # set by Spark (or the user) for every streaming sink / path-based save
    "checkpointLocation", "path",
)


def check_known(options: Mapping[str, str], valid: Iterable[str], side: str) -> None:
    """Raise :class:`OptionError` for the first option name that is not in ``valid``."""
    by_lower = {name.lower(): name for name in valid}
    for name in sorted(options):
        if name.lower() in by_lower:
            continue
        if name.lower().startswith("kafka."):
            raise OptionError(
                f"option {name!r}: format('sparkmq') has no Kafka client, so 'kafka.*' options "
                "do not apply. Replace 'kafka.bootstrap.servers' with .option('endpoint', "
                "'http://host:8080') or .option('namesrv', 'host:9876'); consumer groups are "
                "the 'group' option"
            )
        close = difflib.get_close_matches(name.lower(), list(by_lower), n=1, cutoff=0.6)
        hint = f"; did you mean {by_lower[close[0]]!r}?" if close else ""
        raise OptionError(
            f"unknown {side} option {name!r} for format('sparkmq'){hint} Valid {side} options: "
            f"{', '.join(sorted(by_lower.values(), key=str.lower))}"
        )


def get(options: Mapping[str, str], name: str) -> str | None:
    """The stripped value of ``name`` (any case), or None when unset or blank."""
    value = options.get(name.lower())
    if value is None:
        value = options.get(name)
    if value is None:
        return None
    text = str(value).strip()
    return text or None


def positive_int(options: Mapping[str, str], name: str, default: int | None) -> int | None:
    raw = get(options, name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise OptionError(f"option '{name}' must be a positive integer, got {raw!r}") from None
    if value <= 0:
        raise OptionError(f"option '{name}' must be a positive integer, got {raw!r}")
    return value


def non_negative_int(options: Mapping[str, str], name: str, default: int) -> int:
    raw = get(options, name)
    if raw is None:
        return default
    if not raw.isdigit():
        raise OptionError(f"option '{name}' must be an integer >= 0, got {raw!r}")
    return int(raw)


def boolean(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = get(options, name)
    if raw is None:
        return default
    if raw.lower() in ("true", "1", "yes"):
        return True
    if raw.lower() in ("false", "0", "no"):
        return False
    raise OptionError(f"option '{name}' must be true or false, got {raw!r}")


_UNITS_MS = {"ms": 1, "s": 1000, "sec": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000,
             "d": 86_400_000}


def duration_ms(options: Mapping[str, str], name: str, default_ms: int) -> int:
    """A time like Spark's ``timeStringAsMs``: ``500ms``, ``30s``, ``15m``, ``1h``; bare = ms."""
    raw = get(options, name)
    if raw is None:
        return default_ms
    m = re.fullmatch(r"(\d+)\s*([a-z]*)", raw.lower())
    if m is None or m.group(2) not in ("", *_UNITS_MS):
        raise OptionError(f"option '{name}' must be a duration like '500ms', '30s', '15m' or "
                          f"'1h', got {raw!r}")
    return int(m.group(1)) * _UNITS_MS.get(m.group(2), 1)
