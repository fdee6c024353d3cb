"""The broker's typed settings, read once at start-up and passed down.

Precedence, highest first: constructor arguments (CLI flags) > environment
variables (``SPARKMQ_`` prefix, ``__`` between a section and its field, e.g.
``SPARKMQ_STORE__FLUSH_MODE=sync``) > the TOML file (``conf/broker.toml`` or
``--config PATH``) > the defaults below.  ``conf/broker.toml`` documents
every field line by line.

The ``[store]`` section is generated from :class:`store.StoreConfig`'s fields
so the two never drift; ``[mirror]`` carries exactly the fields of
``connectors.MirrorConfig``.
"""

from __future__ import annotations

import dataclasses
import os
import typing
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator
from pydantic_settings import (
    SettingsConfigDict,
)

from connectors import MirrorConfig
from store import StoreConfig

from .namesrv.wire import parse_namesrv_addrs
from .toml_settings import TomlSettings

__all__ = [
    "BrokerSettings",
    "BrokerSection",
    "LimitsSection",
    "FastFailureSection",
    "GroupsSection",
    "ProtectionSection",
    "TransactionsSection",
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

    name: str = "broker-a"
    cluster: str = "DefaultCluster"
    broker_id: int = Field(default=0, ge=0)
    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)
    data_dir: str = "data"
    auto_create_topics: bool = True
    default_queues: int = Field(default=4, ge=1, le=1024)
    log_level: Literal["debug", "info", "warning", "error"] = "warning"
    stats_log_interval_s: float = Field(default=60.0, gt=0)
    namesrv_addr: str = ""
    register_interval_s: float = Field(default=30.0, gt=0)

    @field_validator("namesrv_addr")
    @classmethod
    def _check_namesrv_addr(cls, value: str) -> str:
        if value.strip():
            parse_namesrv_addrs(value)  # NamesrvAddressError is a ValueError: a clear validation error
        return value

    @property
    def role(self) -> str:
        """``master`` for broker id 0, ``slave`` otherwise (RocketMQ's BrokerRole, no HA yet)."""
        return "master" if self.broker_id == 0 else "slave"


class LimitsSection(_Section):
    """Request size limits and pull page caps."""

    max_batch_messages: int = Field(default=100_000, ge=1)
    max_request_bytes: int = Field(default=64 << 20, ge=1024)
    default_pull_messages: int = Field(default=32, ge=1)
    max_pull_messages_json: int = Field(default=1000, ge=1)
    max_pull_messages_arrow: int = Field(default=10_000, ge=1)
    max_pull_bytes: int = Field(default=64 << 20, ge=1024)
    max_wait_ms: int = Field(default=30_000, ge=0)


class FastFailureSection(_Section):
    """BrokerFastFailure: answer 503 + Retry-After instead of piling up."""

    enabled: bool = True
    max_queue_wait_ms: int = Field(default=200, ge=1)
    busy_put_ms: int = Field(default=1000, ge=1)
    retry_after_s: int = Field(default=1, ge=1)
    write_threads: int = Field(default=8, ge=1, le=64)


class GroupsSection(_Section):
    """Consumer offsets persistence."""

    offsets_flush_interval_s: float = Field(default=5.0, gt=0)


class ProtectionSection(_Section):
    """Slow-consumer protection (RocketMQ's protectBroker)."""

    disable_slow_consumers: bool = False
    max_lag_messages: int = Field(default=10_000_000, ge=1)
    check_interval_s: float = Field(default=30.0, gt=0)


class TransactionsSection(_Section):
    """Half messages, commit/rollback and the exactly-once sink records."""

    timeout_s: float = Field(default=300.0, gt=0)
    check_interval_s: float = Field(default=1.0, gt=0)
    keep_decisions: int = Field(default=100_000, ge=100)
    keep_sink_batches: int = Field(default=1000, ge=1)
    keep_sinks: int = Field(default=10_000, ge=1)


def _section_from(config: type, name: str, overrides: dict[str, tuple[Any, Any]]) -> type[_Section]:
    """A pydantic section with exactly the fields and defaults of the dataclass ``config``."""
    hints = typing.get_type_hints(config)
    fields: dict[str, Any] = {}
    for f in dataclasses.fields(config):
        if f.name in overrides:
            fields[f.name] = overrides[f.name]
        elif f.default_factory is not dataclasses.MISSING:
            fields[f.name] = (hints[f.name], Field(default_factory=f.default_factory))
        else:
            fields[f.name] = (hints[f.name], f.default)
    return create_model(name, __base__=_Section, **fields)


# "" means <data_dir>/store, filled in by store_config().
StoreSection = _section_from(StoreConfig, "StoreSection", {"root_dir": (str, "")})
# Exactly the fields of connectors.MirrorConfig.
MirrorSection = _section_from(MirrorConfig, "MirrorSection", {})


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
    groups: GroupsSection = GroupsSection()
    protection: ProtectionSection = ProtectionSection()
    transactions: TransactionsSection = TransactionsSection()
    store: StoreSection = StoreSection()  # type: ignore[valid-type]
    mirror: MirrorSection = MirrorSection()  # type: ignore[valid-type]

    @property
    def data_path(self) -> Path:
        return Path(self.broker.data_dir)

    @property
    def meta_path(self) -> Path:
        """Where topics, groups, offsets and transaction records live."""
        return self.data_path / "config"

    def store_config(self) -> StoreConfig:
        values = self.store.model_dump()
        values["root_dir"] = values["root_dir"] or str(self.data_path / "store")
        return StoreConfig(**values)

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
    return cls(**{k: v for k, v in overrides.items() if v})
