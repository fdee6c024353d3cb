"""Read every setting (key, type, bounds, default, env var, description) off the settings models.

Used by :mod:`broker_api.settings.doc` to render the configuration reference;
nothing here is written by hand except how a type or a default is spelled.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass
from types import UnionType
from typing import Any, Literal

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from .namesrv import NamesrvSettings
from .broker import BrokerSettings

__all__ = ["ConfigDocError", "Section", "Setting", "broker_sections", "namesrv_sections"]


class ConfigDocError(Exception):
    """Raised when a setting has no description, or a file to update has broken generated-block markers."""


@dataclass(frozen=True)
class Setting:
    """One key as the reference shows it; ``default`` is spelled as in TOML."""

    key: str
    type: str
    default: str
    env: str
    description: str


@dataclass(frozen=True)
class Section:
    """A TOML section (``name`` is ``""`` for the NameServer's top level) and its settings in model order."""

    name: str
    description: str
    settings: tuple[Setting, ...]


def broker_sections() -> list[Section]:
    """``[broker] [limits] ... [store] [mirror]`` in :class:`BrokerSettings` field order."""
    prefix = str(BrokerSettings.model_config.get("env_prefix", ""))
    delimiter = str(BrokerSettings.model_config.get("env_nested_delimiter", "__"))
    sections = []
    for name, field in BrokerSettings.model_fields.items():
        model = field.annotation
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            raise ConfigDocError(f"BrokerSettings.{name} is not a settings section")
        env = f"{prefix}{name.upper()}{delimiter}"
        sections.append(Section(name, _doc(model), _settings(model, env, f"[{name}]")))
    return sections


def namesrv_sections() -> list[Section]:
    """The NameServer's settings (one top-level section)."""
    prefix = str(NamesrvSettings.model_config.get("env_prefix", ""))
    return [Section("", _doc(NamesrvSettings), _settings(NamesrvSettings, prefix, "namesrv"))]


def _doc(model: type[BaseModel]) -> str:
    doc = (model.__doc__ or "").strip()
    if not doc:
        raise ConfigDocError(f"settings model {model.__name__} has no docstring to describe its section")
    return " ".join(doc.split("\n\n")[0].split())


def _settings(model: type[BaseModel], env_prefix: str, where: str) -> tuple[Setting, ...]:
    out = []
    for key, field in model.model_fields.items():
        if not field.description:
            raise ConfigDocError(f"setting {where} {key} has no description; add Field(description=...) "
                                 "(or metadata={'doc': ...} on a StoreConfig/MirrorConfig field)")
        out.append(Setting(key, type_name(field), toml_value(field.get_default(call_default_factory=True)),
                           f"{env_prefix}{key.upper()}", " ".join(field.description.split())))
    return tuple(out)


def type_name(field: FieldInfo) -> str:
    """``int (1–1024)``, ``float (> 0)``, ``"sync" | "async"``, ``str``."""
    name = _annotation_name(field.annotation)
    bounds: dict[str, Any] = {}
    for m in field.metadata:
        for attr in ("ge", "gt", "le", "lt"):
            if isinstance(m, annotated_types.BaseMetadata) and hasattr(m, attr):
                bounds[attr] = getattr(m, attr)
    if "ge" in bounds and "le" in bounds:
        return f"{name} ({bounds['ge']}–{bounds['le']})"
    symbols = {"ge": "≥", "gt": ">", "le": "≤", "lt": "<"}
    parts = [f"{symbols[k]} {v}" for k, v in bounds.items()]
    return f"{name} ({', '.join(parts)})" if parts else name


def _annotation_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    if origin is Literal:
        return " | ".join(f'"{a}"' if isinstance(a, str) else repr(a) for a in typing.get_args(annotation))
    if origin in (typing.Union, UnionType):
        return " | ".join(_annotation_name(a) for a in typing.get_args(annotation))
    return getattr(annotation, "__name__", str(annotation))


def toml_value(value: Any) -> str:
    """A default spelled as a TOML value (strings quoted, booleans lower-case)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    raise ConfigDocError(f"cannot spell default {value!r} as a TOML value")
