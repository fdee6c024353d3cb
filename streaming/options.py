"""Parse the reader and writer options (names follow Spark's Kafka source).

Spark hands a data source its options as a case-insensitive mapping of
strings; everything is validated here, once, on the driver, and turned into
small frozen dataclasses that pickle to the executors. Unknown option names
fail (see :mod:`optvalues`); positions are parsed in :mod:`offset_options`.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from .auth import Trust, parse_trust
from .errors import OptionError
from .offset_options import (
    EARLIEST,
    LATEST,
    OffsetSpec,
    is_broker_shape,
    parse_broker_offsets_json,
    parse_ending,
    parse_offsets_json,
    parse_starting,
)
from .optvalues import (
    READER_OPTIONS,
    WRITER_OPTIONS,
    boolean,
    check_known,
    duration_ms,
    get,
    non_negative_int,
    positive_int,
)

__all__ = [
    "ClientConfig",
    "Subscription",
    "OffsetSpec",
    "Columns",
    "ReaderOptions",
    "WriterOptions",
    "parse_client",
    "parse_columns",
    "parse_reader",
    "parse_writer",
    "parse_offsets_json",
    "parse_broker_offsets_json",
    "is_broker_shape",
    "EARLIEST",
    "LATEST",
]

log = logging.getLogger("sparkmq.streaming")

_get, _positive_int, _non_negative_int, _bool = get, positive_int, non_negative_int, boolean


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
    retries: int = 3  # fetchOffset.numRetries: passes over the addresses (driver look-ups)
    retry_interval_ms: int | None = None  # fetchOffset.retryIntervalMs (None: 0.1, 0.3, 1 s)
    trust: Trust = Trust()  # token | user + secret, caFile (see auth.py)

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
            return re.search(self.pattern, topic) is not None  # Kafka's findFirstIn
        return topic in self.topics


@dataclass(frozen=True)
class Columns:
    """Which columns the source yields (see :mod:`schema`)."""

    headers: bool = False  # includeHeaders
    sparkmq: bool = False  # includeSparkmqColumns
    broker: bool = False  # a 'broker' column: with namesrv, or with the sparkmq columns


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
    filter: str | None = None  # SQL92 over properties and tags, applied by the broker
    broker_down_timeout_ms: int = 600_000
    skip_unavailable_brokers: bool = False
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60_000
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    columns: Columns = Columns()


@dataclass(frozen=True)
class WriterOptions:
    """Everything the stream and batch writers need, validated."""

    client: ClientConfig
    topic: str | None
    sink_id: str | None
    chunk_rows: int
    send_retries: int = 2


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
    ``namesrv``, ``requestTimeoutMs`` (alias ``kafkaConsumer.pollTimeoutMs``) and
    ``fetchOffset.numRetries`` / ``fetchOffset.retryIntervalMs``."""
    raw = _get(options, "endpoint")
    namesrv = _get(options, "namesrv")
    timeout_ms = _positive_int(options, "requestTimeoutMs", None)
    if timeout_ms is None:
        timeout_ms = _positive_int(options, "kafkaConsumer.pollTimeoutMs", 30_000)
    assert timeout_ms is not None
    retries = _positive_int(options, "fetchOffset.numRetries", 3)
    assert retries is not None
    interval = None
    if _get(options, "fetchOffset.retryIntervalMs") is not None:
        interval = _non_negative_int(options, "fetchOffset.retryIntervalMs", 0)
    if raw is not None and namesrv is not None:
        raise OptionError("set either option 'endpoint' (one broker) or 'namesrv' "
                          "(a cluster found through NameServers), not both")
    if namesrv is not None:
        return ClientConfig((), timeout_ms / 1000.0, _parse_namesrv(namesrv), retries=retries,
                            retry_interval_ms=interval, trust=parse_trust(options))
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
    return ClientConfig(endpoints=endpoints, timeout_s=timeout_ms / 1000.0, retries=retries,
                        retry_interval_ms=interval, trust=parse_trust(options))


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


def parse_reader(options: Mapping[str, str], *, batch: bool) -> ReaderOptions:
    """Validate reader options; ``batch`` selects spark.read defaults and rules."""
    check_known(options, READER_OPTIONS, "reader")
    starting = parse_starting(options, batch)
    group = _get(options, "group")
    if starting.kind == "group" and group is None:
        raise OptionError("startingOffsets='group' needs the option 'group' (a consumer group)")
    page_size = _positive_int(options, "pageSize", 10_000)
    assert page_size is not None
    client = parse_client(options)
    limits = _trigger_limits(options, batch)
    return ReaderOptions(
        client=client,
        subscription=_parse_subscription(options),
        starting=starting,
        ending=parse_ending(options, batch),
        max_offsets_per_trigger=limits[0],
        fail_on_data_loss=_bool(options, "failOnDataLoss", True),
        group=group,
        tags=_get(options, "tags"),
        filter=_get(options, "filter"),
        page_size=page_size,
        broker_down_timeout_ms=_non_negative_int(options, "brokerDownTimeoutMs", 600_000),
        skip_unavailable_brokers=_skip_unavailable(options, batch),
        min_offsets_per_trigger=limits[1],
        max_trigger_delay_ms=duration_ms(options, "maxTriggerDelay", 15 * 60_000),
        min_partitions=_positive_int(options, "minPartitions", None),
        max_records_per_partition=_positive_int(options, "maxRecordsPerPartition", None),
        columns=parse_columns(options),
    )


def parse_columns(options: Mapping[str, str]) -> Columns:
    """``includeHeaders``, ``includeSparkmqColumns`` and ``namesrv`` decide the columns."""
    sparkmq = _bool(options, "includeSparkmqColumns", False)
    return Columns(headers=_bool(options, "includeHeaders", False), sparkmq=sparkmq,
                   broker=sparkmq or _get(options, "namesrv") is not None)


def _trigger_limits(options: Mapping[str, str], batch: bool) -> tuple[int | None, int | None]:
    """(maxOffsetsPerTrigger, minOffsetsPerTrigger); a batch read ignores them, warning."""
    most = _positive_int(options, "maxOffsetsPerTrigger", None)
    least = _positive_int(options, "minOffsetsPerTrigger", None)
    if most is not None and least is not None and least > most:
        raise OptionError(f"minOffsetsPerTrigger ({least}) must not exceed "
                          f"maxOffsetsPerTrigger ({most})")
    if batch and (most is not None or least is not None):
        log.warning("maxOffsetsPerTrigger/minOffsetsPerTrigger are ignored by a batch read")
        return None, None
    return most, least


def _skip_unavailable(options: Mapping[str, str], batch: bool) -> bool:
    skip = _bool(options, "skipUnavailableBrokers", False)
    if skip and not batch:
        raise OptionError("option 'skipUnavailableBrokers' is for batch reads (spark.read) "
                          "only; a stream waits for a down broker (see 'brokerDownTimeoutMs')")
    return skip


def parse_writer(options: Mapping[str, str]) -> WriterOptions:
    """Validate writer options (``topic``, ``sinkId``, ``chunkRows``, ``sendRetries``)."""
    check_known(options, WRITER_OPTIONS, "writer")
    chunk_rows = _positive_int(options, "chunkRows", 10_000)
    assert chunk_rows is not None
    return WriterOptions(
        client=parse_client(options),
        topic=_get(options, "topic"),
        sink_id=_get(options, "sinkId"),
        chunk_rows=chunk_rows,
        send_retries=_non_negative_int(options, "sendRetries", 2),
    )
