"""The NameServer's typed settings, read once at start-up.

Precedence, highest first: constructor arguments (``sparkmq namesrv`` flags)
> environment variables (``SPARKMQ_NAMESRV_`` + the field name in capitals,
e.g. ``SPARKMQ_NAMESRV_BROKER_TIMEOUT_S=30``) > the TOML file
(``conf/namesrv.toml``, ``--config PATH`` or ``$SPARKMQ_NAMESRV_CONFIG``)
> the defaults below.  ``conf/namesrv.toml`` documents every field.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import Field
from pydantic_settings import (
    SettingsConfigDict,
)

from ..toml_settings import TomlSettings

__all__ = ["NamesrvSettings", "load_namesrv_settings", "default_namesrv_config_path"]

_ENV_PREFIX = "SPARKMQ_NAMESRV_"


class NamesrvSettings(TomlSettings):
    """Where the NameServer listens and how it decides a broker is gone."""

    model_config = SettingsConfigDict(env_prefix=_ENV_PREFIX, extra="ignore", frozen=True)

    host: str = "127.0.0.1"
    port: int = Field(default=9876, ge=0, le=65535)
    scan_interval_s: float = Field(default=5.0, gt=0)
    broker_timeout_s: float = Field(default=120.0, gt=0)
    log_level: Literal["debug", "info", "warning", "error"] = "info"


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
