"""The broker's typed settings, read once at start-up and passed down.

Precedence, highest first: constructor arguments (CLI flags) > environment
variables (``SPARKMQ_`` prefix, ``__`` between a section and its field, e.g.
``SPARKMQ_STORE__FLUSH_MODE=sync``) > the TOML file (``conf/broker.toml`` or
``--config PATH``) > the defaults below.  Every field carries its one-line
description; ``python -m broker_api.settings.doc`` renders them into
``conf/broker.toml`` and the README's configuration reference.

The ``[store]`` section is generated from :class:`store.StoreConfig`'s fields
so the two never drift; ``[mirror]`` carries exactly the fields of
``connectors.MirrorConfig``.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import typing
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator, model_validator
from pydantic_settings import (
    SettingsConfigDict,
)

from connectors import MirrorConfig
from store import HAConfig, StoreConfig
from store.tiered import TieredConfig

from ..auth.config import AuthSection, TlsSection
from .addresses import parse_namesrv_addrs
from .pop import PopSection
from .sections import DelaySection, HASection, KafkaSection, RuntimeSection, TablesSection, TransactionsSection
from .toml import TomlSettings

__all__ = [
    "BrokerSettings",
    "BrokerSection",
    "LimitsSection",
    "FastFailureSection",
    "ServerSection",
    "GroupsSection",
    "ProtectionSection",
    "TransactionsSection",
    "PopSection",
    "DelaySection",
    "HASection",
    "TablesSection",
    "RuntimeSection",
    "AuthSection",
    "TlsSection",
    "MirrorSection",
    "StoreSection",
    "load_settings",
    "default_config_path",
]

_ENV_PREFIX = "SPARKMQ_"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BrokerSection(_Section):
    """Identity, listening address, data directory, topic auto-creation."""

    name: str = Field(default="broker-a", description=(
        "Broker name (`--broker-name`), registered with the NameServers, shown in /v1/broker and used as the "
        "Delta mirror's app id; a master and its slaves share one name."))
    cluster: str = Field(default="DefaultCluster", description=(
        "Cluster name (`--cluster`), registered with the NameServers and shown in /v1/broker."))
    broker_id: int = Field(default=0, ge=0, description=(
        "0 = master, > 0 = slave of the master with the same name (`--broker-id`); shown as `role`."))
    host: str = Field(default="127.0.0.1", description=(
        "HTTP listen address (`--host`); keep 127.0.0.1 unless remote clients need the broker."))
    port: int = Field(default=8080, ge=0, le=65535, description="HTTP listen port (`--port`); 0 picks a free port.")
    data_dir: str = Field(default="data", description=(
        "Data directory (`--data-dir`): `store/`, `config/` (metadata), `delta/` (mirror)."))
    auto_create_topics: bool = Field(default=True, description=(
        "Create a topic on its first produce (with `default_queues` queues); false answers 404 topic_not_found."))
    default_queues: int = Field(default=4, ge=1, le=1024, description=(
        "Queues of a topic created without an explicit count."))
    log_level: Literal["debug", "info", "warning", "error"] = Field(default="warning", description=(
        "Log level of the broker and uvicorn (`--log-level`)."))
    stats_log_interval_s: float = Field(default=60.0, gt=0, description=(
        "How often (seconds) store statistics are logged at info level."))
    namesrv_addr: str = Field(default="", description=(
        'NameServers to register with (`--namesrv`), RocketMQ style "host:port;host:port"; "" = none.'))
    register_interval_s: float = Field(default=30.0, gt=0, description=(
        "Re-registration (heartbeat) period in seconds; a topic change registers at once."))

    @field_validator("namesrv_addr")
    @classmethod
    def _check_namesrv_addr(cls, value: str) -> str:
        if value.strip():
            parse_namesrv_addrs(value)  # NamesrvAddressError is a ValueError: a clear validation error
        return value

    @property
    def role(self) -> str:
        """``master`` for broker id 0, ``slave`` otherwise (``[ha] role`` says which kind of master)."""
        return "master" if self.broker_id == 0 else "slave"


class LimitsSection(_Section):
    """Request size limits and pull page caps."""

    max_batch_messages: int = Field(default=100_000, ge=1, description=(
        "Most messages one produce request may carry (413 batch_too_large past it)."))
    max_request_bytes: int = Field(default=64 << 20, ge=1024, description=(
        "Largest produce request body in bytes, 64 MiB (413 batch_too_large past it)."))
    default_pull_messages: int = Field(default=32, ge=1, description=(
        "Messages per pull page when the request does not say max_messages."))
    max_pull_messages_json: int = Field(default=1000, ge=1, description="Cap on max_messages for JSON pulls.")
    max_pull_messages_arrow: int = Field(default=10_000, ge=1, description=(
        "Cap on max_messages for Arrow pulls (Accept: application/vnd.apache.arrow.stream)."))
    max_pull_bytes: int = Field(default=64 << 20, ge=1024, description=(
        "Cap on the bytes of one pull page, 64 MiB (a page holds at least one message)."))
    max_wait_ms: int = Field(default=30_000, ge=0, description=(
        "Longest long-poll hold in milliseconds (a pull's wait_ms is capped to this)."))


class FastFailureSection(_Section):
    """BrokerFastFailure: answer 503 + Retry-After instead of piling up."""

    enabled: bool = Field(default=True, description=(
        "Answer 503 broker_busy with Retry-After instead of letting produces pile up."))
    max_queue_wait_ms: int = Field(default=0, ge=0, description=(
        "A write that waited longer than this (ms) for the store is refused before it is written; "
        "0 = `[server] max_wait_ms`. With flush_mode = \"sync\" the recent fdatasync time is added "
        "(waiting on the disk is not \"busy\")."))
    busy_put_ms: int = Field(default=1000, ge=1, description=(
        "While a write has run longer than this (ms), the store counts as busy and new writes are refused "
        "(with flush_mode = \"sync\", plus the recent fdatasync time)."))
    retry_after_s: int = Field(default=1, ge=1, description="Retry-After (seconds) on those 503 answers.")
    write_threads: int = Field(default=8, ge=1, le=64, description=(
        "Threads writing to the store; with flush_mode = \"sync\" concurrent writes share one fdatasync."))


class ServerSection(_Section):
    """Admission control (RocketMQ's per-class queues and fast failure) and the control listener."""

    admin_port: int = Field(default=0, ge=-1, le=65535, description=(
        "Port of the control listener (its own thread and event loop) serving /healthz, /readyz, /metrics "
        "and /v1/broker, which the data path cannot starve (RocketMQ's VIP channel); 0 = any free port "
        "(printed in the ready line), -1 = none (the main port still answers them ahead of admission)."))
    max_wait_ms: int = Field(default=1000, ge=1, description=(
        "Longest wait (ms) of any request for an admission slot or for the store; past it, 503 broker_busy."))
    event_loop: Literal["asyncio", "uvloop"] = Field(default="asyncio", description=(
        "Event loop of the main listener: \"asyncio\" serves every connection in turn under overload; "
        "\"uvloop\" is faster when the broker keeps up, but past its capacity it was seen to leave whole "
        "groups of connections unserved for seconds (benchmarks/bench_storm.py)."))
    produce_inflight: int = Field(default=256, ge=1, description=(
        "Produce requests admitted at once; as many more may wait up to produce_wait_ms, the rest get "
        "503 broker_busy with Retry-After before their body is read."))
    produce_inflight_bytes: int = Field(default=16 << 20, ge=1024, description=(
        "Produce request bytes (Content-Length) admitted at once, 16 MiB; a larger request is admitted "
        "only alone."))
    produce_wait_ms: int = Field(default=200, ge=0, description=(
        "Longest wait (ms) of a produce for a slot (RocketMQ waitTimeMillsInSendQueue)."))
    pull_inflight: int = Field(default=256, ge=1, description=(
        "Pull requests admitted at once; parked long polls (wait_ms) do not count while parked."))
    pull_wait_ms: int = Field(default=1000, ge=0, description="Longest wait (ms) of a pull for a slot.")
    transaction_inflight: int = Field(default=64, ge=1, description=(
        "Transaction commit/rollback and sink commit requests admitted at once."))
    transaction_wait_ms: int = Field(default=1000, ge=0, description=(
        "Longest wait (ms) of a transaction end for a slot."))
    admin_inflight: int = Field(default=32, ge=1, description=(
        "Other requests (topics, groups, offsets, SQL, retention) admitted at once."))
    admin_wait_ms: int = Field(default=1000, ge=0, description="Longest wait (ms) of another request for a slot.")
    other_inflight_bytes: int = Field(default=4 << 20, ge=1024, description=(
        "Request bytes admitted at once for each class other than produce, 4 MiB."))
    header_read_timeout_s: float = Field(default=10.0, gt=0, description=(
        "A request's headers must be complete within this many seconds of the connection opening (or of the "
        "previous answer on it); past it the connection is closed, however slowly bytes still come."))
    body_read_timeout_s: float = Field(default=10.0, gt=0, description=(
        "A request body that makes no progress for this many seconds is answered 408 request_timeout and its "
        "connection closed. Bodies are read before an admission slot is taken, so a slow body holds no slot."))


class GroupsSection(_Section):
    """Consumer offsets persistence."""

    offsets_flush_interval_s: float = Field(default=5.0, gt=0, description=(
        "How often (seconds) changed consumer offsets are written to config/consumer_offsets.json "
        "(also at shutdown)."))


class ProtectionSection(_Section):
    """Slow-consumer protection (RocketMQ's protectBroker)."""

    disable_slow_consumers: bool = Field(default=False, description=(
        "Disable a group whose lag passes max_lag_messages: its pulls (?group=) get 403 group_disabled "
        "until PUT /v1/groups/{group} re-enables it."))
    max_lag_messages: int = Field(default=10_000_000, ge=1, description=(
        "Lag (messages, summed over the group's queues) that counts as too slow."))
    check_interval_s: float = Field(default=30.0, gt=0, description="How often (seconds) the lag check runs.")


def _section_from(config: type, name: str, doc: str, overrides: dict[str, tuple[Any, Any]]) -> type[_Section]:
    """A pydantic section with exactly the fields, defaults and descriptions (``metadata["doc"]``) of ``config``."""
    hints = typing.get_type_hints(config)
    fields: dict[str, Any] = {}
    for f in dataclasses.fields(config):
        description = f.metadata.get("doc")
        if f.name in overrides:
            fields[f.name] = overrides[f.name]
        elif f.default_factory is not dataclasses.MISSING:
            fields[f.name] = (hints[f.name], Field(default_factory=f.default_factory, description=description))
        else:
            fields[f.name] = (hints[f.name], Field(default=f.default, description=description))
    return create_model(name, __base__=_Section, __doc__=doc, **fields)


if typing.TYPE_CHECKING:  # built at run time from the dataclasses: mypy cannot see their fields
    StoreSection: Any
    MirrorSection: Any
    TieredSection: Any

StoreSection = _section_from(
    StoreConfig, "StoreSection",
    "The message store (`store.StoreConfig`): CommitLog, ConsumeQueues, index, flushing, retention.",
    {"root_dir": (str, Field(default="", description='Store directory; "" = `<data_dir>/store`.'))})
TieredSection = _section_from(
    TieredConfig, "TieredSection",
    "The tiered CommitLog (`store.tiered.TieredConfig`): old segments move to an object store (S3) and are "
    "read back on demand; see the tiered-storage guide.", {})
# Exactly the fields of connectors.MirrorConfig.
MirrorSection = _section_from(
    MirrorConfig, "MirrorSection",
    "The Delta Lake mirror of every message and the embedded SQL engine (`connectors.MirrorConfig`).", {})


class BrokerSettings(TomlSettings):
    """Every setting of a running broker, in small typed sections."""

    model_config = SettingsConfigDict(
        env_prefix=_ENV_PREFIX,
        env_nested_delimiter="__",
        extra="ignore",
        frozen=True,
    )

    broker: BrokerSection = BrokerSection()
    limits: LimitsSection = LimitsSection()
    fast_failure: FastFailureSection = FastFailureSection()
    server: ServerSection = ServerSection()
    groups: GroupsSection = GroupsSection()
    protection: ProtectionSection = ProtectionSection()
    transactions: TransactionsSection = TransactionsSection()
    pop: PopSection = PopSection()
    delay: DelaySection = DelaySection()
    ha: HASection = HASection()
    tls: TlsSection = TlsSection()
    auth: AuthSection = AuthSection()
    store: StoreSection = StoreSection()  # type: ignore[valid-type]
    tiered: TieredSection = TieredSection()  # type: ignore[valid-type]
    mirror: MirrorSection = MirrorSection()  # type: ignore[valid-type]
    tables: TablesSection = TablesSection()
    runtime: RuntimeSection = RuntimeSection()
    kafka: KafkaSection = KafkaSection()

    @property
    def data_path(self) -> Path:
        return Path(self.broker.data_dir)

    @model_validator(mode="after")
    def _check_ha_role(self) -> BrokerSettings:
        role, broker_id = self.ha.role, self.broker.broker_id
        if self.ha.controller:
            if role == "slave" or broker_id > 0:
                raise ValueError("controller mode ([ha] controller, --controller) assigns the role and the broker "
                                 "id: drop --broker-id / --broker-role slave (async_master or sync_master only picks "
                                 "how the master acknowledges)")
            if self.broker.port == 0:
                raise ValueError("controller mode needs a fixed HTTP port (--port): the controller hands it to "
                                 "clients and slaves before the socket listens")
            return self
        if role == "slave" and broker_id == 0:
            raise ValueError('[ha] role = "slave" needs a broker id > 0 (`--broker-id 1`); id 0 is the master')
        if role in ("async_master", "sync_master") and broker_id > 0:
            raise ValueError(f'[ha] role = "{role}" needs broker id 0; a broker id > 0 is a slave')
        return self

    @model_validator(mode="after")
    def _check_tiered(self) -> BrokerSettings:
        self.tiered_config()  # a ValueError names the bad [tiered] value
        return self

    @property
    def ha_role(self) -> str:
        """``async_master``, ``sync_master`` or ``slave`` (``[ha] role``, else by broker id)."""
        return self.ha.role or ("async_master" if self.broker.broker_id == 0 else "slave")

    def ha_config(self) -> HAConfig:
        """The store's replication settings (``store.HAConfig``) from ``[ha]``."""
        h = self.ha
        return HAConfig(
            listen_host=h.listen_host or self.broker.host, listen_port=h.listen_port,
            master_address=h.master_addr or None, heartbeat_interval_s=h.heartbeat_interval_s,
            housekeeping_interval_s=h.housekeeping_interval_s, transfer_batch_bytes=h.transfer_batch_bytes,
            slave_timeout_ms=h.slave_timeout_ms, slave_fallbehind_max_bytes=h.slave_fallbehind_max_bytes,
            reconnect_min_s=h.reconnect_min_s, reconnect_max_s=h.reconnect_max_s)

    @property
    def auth_path(self) -> Path:
        """Where users.json and acls.json live (``[auth] dir``, else ``<data_dir>/auth``)."""
        return Path(self.auth.dir) if self.auth.dir else self.data_path / "auth"

    @property
    def scheme(self) -> str:
        """``https`` with ``[tls]`` certificates, else ``http``."""
        return "https" if self.tls.enabled else "http"

    @property
    def meta_path(self) -> Path:
        """Where topics, groups, offsets and transaction records live."""
        return self.data_path / "config"

    def store_config(self) -> StoreConfig:
        values = self.store.model_dump()
        values["root_dir"] = values["root_dir"] or str(self.data_path / "store")
        values["store_host"] = values["store_host"] or self.store_host(self.broker.port)
        return StoreConfig(**values)

    def tiered_config(self) -> TieredConfig:
        """The tiered CommitLog's settings (``[tiered]``); ``enabled`` is False without a uri."""
        return TieredConfig(**self.tiered.model_dump())

    def advertised_host(self) -> str:
        """The host NameServers hand to clients: a wildcard listen address becomes this machine's IP."""
        host = self.broker.host
        if host in ("0.0.0.0", "::", ""):
            host = socket.gethostname()
        try:
            return socket.gethostbyname(host)
        except OSError:
            return "127.0.0.1"

    def store_host(self, port: int) -> str:
        """``ip:port`` that message ids carry: [store] store_host, else the advertised address and ``port``."""
        return self.store.store_host or f"{self.advertised_host()}:{port}"

    @property
    def tables_path(self) -> Path:
        """Where table topics' Delta tables live (``[tables] root_dir``, else ``<data_dir>/tables``)."""
        return Path(self.tables.root_dir) if self.tables.root_dir else self.data_path / "tables"

    @property
    def tables_root(self) -> str:
        """``tables_path`` as a string, or the ``[tables] root_dir`` URI as given (``s3://bucket/prefix``)."""
        root = self.tables.root_dir
        return root.rstrip("/") if "://" in root else str(self.tables_path)

    def mirror_values(self) -> dict[str, Any]:
        """MirrorConfig keyword arguments, with the empty defaults filled in."""
        values = self.mirror.model_dump()
        values["table_uri"] = values["table_uri"] or str(self.data_path / "delta" / "messages")
        values["app_id"] = values["app_id"] or self.broker.name
        return values


def default_config_path() -> Path | None:
    """``$SPARKMQ_CONFIG`` if set, else ``./conf/broker.toml`` if it exists."""
    explicit = os.environ.get(_ENV_PREFIX + "CONFIG")
    if explicit:
        return Path(explicit)
    candidate = Path("conf") / "broker.toml"
    return candidate if candidate.is_file() else None


def load_settings(config: Path | str | None = None, **overrides: dict[str, Any]) -> BrokerSettings:
    """Build the settings; ``overrides`` are sections of constructor values.

    ``config`` is a TOML file; ``None`` picks :func:`default_config_path`.
    Raises FileNotFoundError when an explicit config file is missing.
    """
    path = Path(config) if config is not None else default_config_path()
    if path is not None and not path.is_file():
        raise FileNotFoundError(f"config file {str(path)!r} does not exist")
    cls: type[BrokerSettings] = BrokerSettings
    if path is not None:
        model_config = SettingsConfigDict(**{**BrokerSettings.model_config, "toml_file": path})
        cls = type("BrokerSettingsFromFile", (BrokerSettings,), {"model_config": model_config})
    sections: dict[str, Any] = {k: v for k, v in overrides.items() if v}
    return cls(**sections)
