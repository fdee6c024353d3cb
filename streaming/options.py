"""Parse the reader and writer options (names follow Spark's Kafka source).

Spark hands a data source its options as a case-insensitive mapping of
strings; everything is validated here, once, on the driver, and turned into
small frozen dataclasses that pickle to the executors.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from .errors import OptionError

__all__ = [
    "ClientConfig",
    "Subscription",
    "OffsetSpec",
    "ReaderOptions",
    "WriterOptions",
    "parse_client",
    "parse_reader",
    "parse_writer",
    "parse_offsets_json",
    "parse_broker_offsets_json",
    "is_broker_shape",
    "EARLIEST",
    "LATEST",
]

EARLIEST = -2
LATEST = -1

SpecKind = Literal["earliest", "latest", "group", "json", "timestamp"]


@dataclass(frozen=True)
class ClientConfig:
    """Where the brokers are and how long to wait for them.

    ``endpoints`` are one broker's addresses: its master, then its slaves
    (reads fall back to a slave, writes go to the first only). ``broker``
    names the broker when the addresses came from a NameServer route.
    """

    endpoints: tuple[str, ...]
    timeout_s: float = 30.0
    namesrv: tuple[str, ...] = ()
    broker: str = ""

    @property
    def routed(self) -> bool:
        """True when brokers are found through NameServers (option ``namesrv``)."""
        return bool(self.namesrv)


@dataclass(frozen=True)
class Subscription:
    """Which topics (and queues) the reader follows."""

    kind: Literal["subscribe", "pattern", "assign"]
    topics: tuple[str, ...] = ()
    pattern: str = ""
    assigned: Mapping[str, tuple[int, ...]] = field(default_factory=dict)

    def matches(self, topic: str) -> bool:
        if self.kind == "pattern":
            return re.fullmatch(self.pattern, topic) is not None
        return topic in self.topics


@dataclass(frozen=True)
class OffsetSpec:
    """A starting or ending position: a keyword, JSON offsets or a timestamp."""

    kind: SpecKind
    offsets: Mapping[str, Mapping[int, int]] = field(default_factory=dict)
    timestamp_ms: int = 0
    broker_offsets: Mapping[str, Mapping[str, Mapping[int, int]]] = field(default_factory=dict)


@dataclass(frozen=True)
class ReaderOptions:
    """Everything the stream and batch readers need, validated."""

    client: ClientConfig
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec
    max_offsets_per_trigger: int | None
    fail_on_data_loss: bool
    group: str | None
    tags: str | None
    page_size: int
    broker_down_timeout_ms: int = 600_000
    skip_unavailable_brokers: bool = False


@dataclass(frozen=True)
class WriterOptions:
    """Everything the stream and batch writers need, validated."""

    client: ClientConfig
    topic: str | None
    sink_id: str | None
    chunk_rows: int
    send_retries: int = 2


def _get(options: Mapping[str, str], name: str) -> str | None:
    value = options.get(name.lower())
    if value is None:
        value = options.get(name)
    if value is None:
        return None
    text = str(value).strip()
    return text or None


def _positive_int(options: Mapping[str, str], name: str, default: int | None) -> int | None:
    raw = _get(options, name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise OptionError(f"option '{name}' must be a positive integer, got {raw!r}") from None
    if value <= 0:
        raise OptionError(f"option '{name}' must be a positive integer, got {raw!r}")
    return value


def _non_negative_int(options: Mapping[str, str], name: str, default: int) -> int:
    raw = _get(options, name)
    if raw is None:
        return default
    if not raw.isdigit():
        raise OptionError(f"option '{name}' must be an integer >= 0, got {raw!r}")
    return int(raw)


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = _get(options, name)
    if raw is None:
        return default
    if raw.lower() in ("true", "1", "yes"):
        return True
    if raw.lower() in ("false", "0", "no"):
        return False
    raise OptionError(f"option '{name}' must be true or false, got {raw!r}")


def _parse_namesrv(raw: str) -> tuple[str, ...]:
    addrs: list[str] = []
    for part in raw.split(";"):
        addr = part.strip().rstrip("/")
        if not addr:
            continue
        if not addr.startswith(("http://", "https://")):
            addr = "http://" + addr
        if not re.match(r"^https?://[^/\s]+$", addr):
            raise OptionError(
                f"option 'namesrv': {part.strip()!r} is not a NameServer address like "
                "127.0.0.1:9876 (several are ';'-separated)"
            )
        addrs.append(addr)
    if not addrs:
        raise OptionError("option 'namesrv' names no NameServer, e.g. '127.0.0.1:9876'")
    return tuple(addrs)


def parse_client(options: Mapping[str, str]) -> ClientConfig:
    """Read ``endpoint`` (a broker's master URL, then its slaves', comma separated) or
    ``namesrv``, and ``requestTimeoutMs``."""
    raw = _get(options, "endpoint")
    namesrv = _get(options, "namesrv")
    timeout_ms = _positive_int(options, "requestTimeoutMs", 30_000)
    assert timeout_ms is not None
    if raw is not None and namesrv is not None:
        raise OptionError("set either option 'endpoint' (one broker) or 'namesrv' "
                          "(a cluster found through NameServers), not both")
    if namesrv is not None:
        return ClientConfig((), timeout_ms / 1000.0, _parse_namesrv(namesrv))
    if raw is None:
        raise OptionError(
            "option 'endpoint' is required: the broker URL(s), comma separated, "
            "e.g. .option('endpoint', 'http://127.0.0.1:8080'); or use "
            ".option('namesrv', '127.0.0.1:9876') to find brokers through a NameServer"
        )
    endpoints = tuple(e.strip().rstrip("/") for e in raw.split(",") if e.strip())
    for url in endpoints:
        if not re.match(r"^https?://[^/\s]+$", url):
            raise OptionError(
                f"option 'endpoint': {url!r} is not a broker URL like http://host:port"
            )
    return ClientConfig(endpoints=endpoints, timeout_s=timeout_ms / 1000.0)


def _parse_subscription(options: Mapping[str, str]) -> Subscription:
    given = {n: _get(options, n) for n in ("subscribe", "subscribePattern", "assign")}
    present = [n for n, v in given.items() if v is not None]
    if len(present) != 1:
        raise OptionError(
            "exactly one of the options 'subscribe', 'subscribePattern' or 'assign' must be "
            f"set, got {present or 'none'}"
        )
    if given["subscribe"] is not None:
        topics = tuple(sorted({t.strip() for t in given["subscribe"].split(",") if t.strip()}))
        if not topics:
            raise OptionError("option 'subscribe' names no topic")
        return Subscription("subscribe", topics=topics)
    if given["subscribePattern"] is not None:
        pattern = given["subscribePattern"]
        try:
            re.compile(pattern)
        except re.error as exc:
            raise OptionError(f"option 'subscribePattern' is not a regex: {exc}") from exc
        return Subscription("pattern", pattern=pattern)
    return _parse_assign(str(given["assign"]))


def _parse_assign(raw: str) -> Subscription:
    example = """e.g. {"orders":[0,1]}"""
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise OptionError(f"option 'assign' is not valid JSON ({exc}); {example}") from exc
    ok = isinstance(data, dict) and data and all(
        isinstance(q, list) and all(isinstance(i, int) and i >= 0 for i in q)
        for q in data.values()
    )
    if not ok:
        raise OptionError(f"option 'assign' must map topics to lists of queue ids; {example}")
    assigned = {t: tuple(sorted(set(q))) for t, q in sorted(data.items())}
    return Subscription("assign", topics=tuple(assigned), assigned=assigned)


_OFFSETS_EXAMPLE = ("""e.g. {"orders":{"0":23,"1":-2}}, or with 'namesrv' """
                    """{"orders":{"broker-a":{"0":23},"broker-b":{"0":-2}}} """
                    "(-2 = earliest, -1 = latest)")


def _load_offsets(raw: str, name: str) -> dict[str, Any]:
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise OptionError(f"option '{name}' is not valid JSON ({exc}); {_OFFSETS_EXAMPLE}") from exc
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise OptionError(f"option '{name}' must map topics to {{queue id: offset}}; "
                          f"{_OFFSETS_EXAMPLE}")
    return data


def _queue_offsets(queues: Mapping[str, Any], where: str, name: str) -> dict[int, int]:
    parsed: dict[int, int] = {}
    for qid, off in queues.items():
        if not str(qid).isdigit():
            raise OptionError(f"option '{name}': queue id {qid!r} of {where} "
                              f"is not a non-negative integer; {_OFFSETS_EXAMPLE}")
        if isinstance(off, bool) or not isinstance(off, int) or off < EARLIEST:
            raise OptionError(f"option '{name}': offset {off!r} for {where}/{qid} must be "
                              f"an integer >= -2; {_OFFSETS_EXAMPLE}")
        parsed[int(qid)] = off
    return parsed


def is_broker_shape(data: Mapping[str, Any]) -> bool:
    """True for ``{"orders": {"broker-a": {"0": 12}}}`` (a broker level under each topic)."""
    return any(isinstance(v, dict) for qs in data.values() for v in qs.values())


def parse_offsets_json(raw: str, name: str) -> dict[str, dict[int, int]]:
    """``{"orders":{"0":23,"1":-2}}`` → ``{"orders": {0: 23, 1: -2}}`` (-2 earliest, -1 latest)."""
    data = _load_offsets(raw, name)
    if is_broker_shape(data):
        raise OptionError(f"option '{name}' has a broker level, which needs option 'namesrv'; "
                          f"{_OFFSETS_EXAMPLE}")
    return {topic: _queue_offsets(qs, f"topic {topic!r}", name) for topic, qs in data.items()}


def parse_broker_offsets_json(raw: str, name: str) -> dict[str, dict[str, dict[int, int]]]:
    """``{"orders":{"broker-a":{"0":12}}}`` → ``{"orders": {"broker-a": {0: 12}}}``."""
    data = _load_offsets(raw, name)
    out: dict[str, dict[str, dict[int, int]]] = {}
    for topic, brokers in data.items():
        if not all(isinstance(v, dict) for v in brokers.values()):
            raise OptionError(f"option '{name}': with 'namesrv', topic {topic!r} must map "
                              f"broker names to {{queue id: offset}}; {_OFFSETS_EXAMPLE}")
        out[topic] = {b: _queue_offsets(qs, f"{topic}/{b}", name) for b, qs in brokers.items()}
    return out


def _parse_spec(options: Mapping[str, str], name: str, default: str) -> OffsetSpec:
    raw = _get(options, name) or default
    low = raw.lower()
    if low in ("earliest", "latest", "group"):
        return OffsetSpec(low)  # type: ignore[arg-type]
    if raw.startswith("{"):
        if _get(options, "namesrv") is not None:
            return OffsetSpec("json", broker_offsets=parse_broker_offsets_json(raw, name))
        return OffsetSpec("json", offsets=parse_offsets_json(raw, name))
    raise OptionError(
        f"option '{name}' must be 'earliest', 'latest', 'group' or JSON offsets, got {raw!r}"
    )


def _parse_starting(options: Mapping[str, str], batch: bool) -> OffsetSpec:
    ts = _get(options, "startingTimestamp")
    if ts is not None:
        if not ts.isdigit():
            raise OptionError(f"option 'startingTimestamp' must be epoch milliseconds, got {ts!r}")
        return OffsetSpec("timestamp", timestamp_ms=int(ts))
    spec = _parse_spec(options, "startingOffsets", "earliest" if batch else "latest")
    if batch and spec.kind == "latest":
        raise OptionError("startingOffsets='latest' is not allowed in a batch read")
    return spec


def _parse_ending(options: Mapping[str, str], batch: bool) -> OffsetSpec:
    if not batch:
        if _get(options, "endingOffsets") is not None:
            raise OptionError("option 'endingOffsets' is for batch reads (spark.read) only")
        return OffsetSpec("latest")
    spec = _parse_spec(options, "endingOffsets", "latest")
    if spec.kind in ("earliest", "group"):
        raise OptionError(f"endingOffsets='{spec.kind}' is not allowed; use 'latest' or JSON")
    flat = [o for q in spec.offsets.values() for o in q.values()]
    flat += [o for bs in spec.broker_offsets.values() for q in bs.values() for o in q.values()]
    if EARLIEST in flat:
        raise OptionError("endingOffsets may not use -2 (earliest); use an offset or -1 (latest)")
    return spec


def parse_reader(options: Mapping[str, str], *, batch: bool) -> ReaderOptions:
    """Validate reader options; ``batch`` selects spark.read defaults and rules."""
    starting = _parse_starting(options, batch)
    group = _get(options, "group")
    if starting.kind == "group" and group is None:
        raise OptionError("startingOffsets='group' needs the option 'group' (a consumer group)")
    max_per_trigger = _positive_int(options, "maxOffsetsPerTrigger", None)
    page_size = _positive_int(options, "pageSize", 10_000)
    assert page_size is not None
    return ReaderOptions(
        client=parse_client(options),
        subscription=_parse_subscription(options),
        starting=starting,
        ending=_parse_ending(options, batch),
        max_offsets_per_trigger=max_per_trigger,
        fail_on_data_loss=_bool(options, "failOnDataLoss", True),
        group=group,
        tags=_get(options, "tags"),
        page_size=page_size,
        broker_down_timeout_ms=_non_negative_int(options, "brokerDownTimeoutMs", 600_000),
        skip_unavailable_brokers=_skip_unavailable(options, batch),
    )


def _skip_unavailable(options: Mapping[str, str], batch: bool) -> bool:
    skip = _bool(options, "skipUnavailableBrokers", False)
    if skip and not batch:
        raise OptionError("option 'skipUnavailableBrokers' is for batch reads (spark.read) "
                          "only; a stream waits for a down broker (see 'brokerDownTimeoutMs')")
    return skip


def parse_writer(options: Mapping[str, str]) -> WriterOptions:
    """Validate writer options (``topic``, ``sinkId``, ``chunkRows``, ``sendRetries``)."""
    chunk_rows = _positive_int(options, "chunkRows", 10_000)
    assert chunk_rows is not None
    return WriterOptions(
        client=parse_client(options),
        topic=_get(options, "topic"),
        sink_id=_get(options, "sinkId"),
        chunk_rows=chunk_rows,
        send_retries=_non_negative_int(options, "sendRetries", 2),
    )
