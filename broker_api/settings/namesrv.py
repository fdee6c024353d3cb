"""The NameServer's typed settings, read once at start-up.

Precedence, highest first: constructor arguments (``sparkmq namesrv`` flags)
> environment variables (``SPARKMQ_NAMESRV_`` + the field name in capitals,
e.g. ``SPARKMQ_NAMESRV_BROKER_TIMEOUT_S=30``) > the TOML file
(``conf/namesrv.toml``, ``--config PATH`` or ``$SPARKMQ_NAMESRV_CONFIG``)
> the defaults below.  Every field carries its one-line description;
``python -m broker_api.settings.doc`` renders them into ``conf/namesrv.toml``
and the README's configuration reference.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator
from pydantic_settings import (
    SettingsConfigDict,
)

from .toml import TomlSettings

__all__ = ["NamesrvSettings", "load_namesrv_settings", "default_namesrv_config_path"]

_ENV_PREFIX = "SPARKMQ_NAMESRV_"


class NamesrvSettings(TomlSettings):
    """Where the NameServer listens and how it decides a broker is gone."""

    model_config = SettingsConfigDict(env_prefix=_ENV_PREFIX, extra="ignore", frozen=True)

    host: str = Field(default="127.0.0.1", description=(
        "HTTP listen address (`--host`); keep 127.0.0.1 unless brokers or clients run elsewhere."))
    port: int = Field(default=9876, ge=0, le=65535, description=(
        "HTTP listen port (`--port`); 0 picks a free port (printed on the ready line)."))
    scan_interval_s: float = Field(default=5.0, gt=0, description=(
        "How often (seconds) brokers that stopped heartbeating are looked for (10 s in older RocketMQ)."))
    broker_timeout_s: float = Field(default=120.0, gt=0, description=(
        "A broker silent this long (seconds) is dropped with its routes; brokers heartbeat every 30 s."))
    log_level: Literal["debug", "info", "warning", "error"] = Field(default="info", description=(
        "Log level; info logs broker removals and errors."))
    tls_certfile: str = Field(default="", description=(
        'PEM certificate chain to serve HTTPS with (`--ssl-certfile`); "" = plain HTTP.'))
    tls_keyfile: str = Field(default="", description="PEM private key of tls_certfile (`--ssl-keyfile`).")
    auth_enabled: bool = Field(default=False, description=(
        "Require credentials on every request but /healthz (as a broker's [auth]); a registration needs "
        "`Cluster:<cluster>` Admin, route look-ups any user."))
    auth_dir: str = Field(default="namesrv-auth", description=(
        "Directory of users.json and acls.json (`sparkmq user add NAME --auth-dir DIR`)."))
    auth_max_clock_skew_s: float = Field(default=300.0, gt=0, description=(
        "Largest difference (seconds) between a signed request's date and this clock."))

    controller_enabled: bool = Field(default=False, description=(
        "Embed the controller (`--controller`): brokers started with `--controller` heartbeat here, and "
        "when a master stops, an in-sync slave is elected and the routes point at it at once."))
    controller_master_timeout_s: float = Field(default=3.0, gt=0, description=(
        "Controller: a master silent this long (seconds) is replaced by an in-sync slave; brokers "
        "heartbeat every second."))
    controller_allow_unclean_election: bool = Field(default=False, description=(
        "Controller: when no in-sync replica is alive, elect any live replica (acknowledged messages "
        "may be lost); false keeps the group without a master until one comes back."))
    controller_state_file: str = Field(default="namesrv-controller/state.json", description=(
        "Controller: where masters, epochs and in-sync sets are kept (written atomically on every change, "
        "read at start), so a restart loses nothing."))
    controller_scan_interval_s: float = Field(default=0.5, gt=0, description=(
        "Controller: how often (seconds) masters are checked for silence."))
    controller_etcd_endpoints: str = Field(default="", description=(
        "Controller: keep the state in etcd instead of `controller_state_file` (comma list of host:port of "
        "its members, e.g. `10.0.0.1:2379,10.0.0.2:2379,10.0.0.3:2379`); controllers sharing a prefix elect "
        "one leader, the others stand by. Empty: the local file."))
    controller_etcd_prefix: str = Field(default="/sparkmq/controller", min_length=2, description=(
        "Controller with etcd: the key prefix of its state and leader keys (one per controller cluster)."))

    @model_validator(mode="after")
    def _check_tls(self) -> NamesrvSettings:
        if bool(self.tls_certfile) != bool(self.tls_keyfile):
            raise ValueError("tls_certfile and tls_keyfile go together (--ssl-certfile and --ssl-keyfile)")
        for name in ("tls_certfile", "tls_keyfile"):
            value = getattr(self, name)
            if value and not Path(value).is_file():
                raise ValueError(f"{name} {value!r} is not a readable file")
        return self


def default_namesrv_config_path() -> Path | None:
    """``$SPARKMQ_NAMESRV_CONFIG`` if set, else ``./conf/namesrv.toml`` if it exists."""
    explicit = os.environ.get(_ENV_PREFIX + "CONFIG")
    if explicit:
        return Path(explicit)
    candidate = Path("conf") / "namesrv.toml"
    return candidate if candidate.is_file() else None


def load_namesrv_settings(config: Path | str | None = None, **overrides: Any) -> NamesrvSettings:
    """Build the settings; ``overrides`` that are not None win over env and file.

    Raises FileNotFoundError when an explicit config file is missing.
    """
    path = Path(config) if config is not None else default_namesrv_config_path()
    if path is not None and not path.is_file():
        raise FileNotFoundError(f"config file {str(path)!r} does not exist")
    cls: type[NamesrvSettings] = NamesrvSettings
    if path is not None:
        model_config = SettingsConfigDict(**{**NamesrvSettings.model_config, "toml_file": path})
        cls = type("NamesrvSettingsFromFile", (NamesrvSettings,), {"model_config": model_config})
    return cls(**{k: v for k, v in overrides.items() if v is not None})
