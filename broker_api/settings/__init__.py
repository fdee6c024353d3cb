"""Settings: one typed object per process, read once at start-up (constructor > environment > TOML), and the generated reference.

Names load on first use, so a client or the CLI that needs one module does not load the room."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_getattr

if TYPE_CHECKING:
    from .addresses import ADDRESS_PATTERN, normalize_url, parse_namesrv_addrs
    from .broker import AuthSection, BrokerSection, BrokerSettings, DelaySection, FastFailureSection, GroupsSection, HASection, LimitsSection, MirrorSection, PopSection, ProtectionSection, RuntimeSection, ServerSection, StoreSection, TablesSection, TieredSection, TlsSection, TransactionsSection, default_config_path, load_settings
    from .doc import BEGIN, ConfigDocError, END, REGENERATE, main, render_markdown, render_toml, replace_block
    from .namesrv import NamesrvSettings, default_namesrv_config_path, load_namesrv_settings
    from .reference import Section, Setting, broker_sections, namesrv_sections
    from .sections import HARole
    from .toml import TomlSettings

__getattr__ = lazy_getattr(__name__, {
    "ADDRESS_PATTERN": "addresses",
    "AuthSection": "broker",
    "BEGIN": "doc",
    "BrokerSection": "broker",
    "BrokerSettings": "broker",
    "ConfigDocError": "doc",
    "DelaySection": "broker",
    "END": "doc",
    "FastFailureSection": "broker",
    "GroupsSection": "broker",
    "HARole": "sections",
    "HASection": "broker",
    "LimitsSection": "broker",
    "MirrorSection": "broker",
    "NamesrvSettings": "namesrv",
    "PopSection": "broker",
    "ProtectionSection": "broker",
    "REGENERATE": "doc",
    "RuntimeSection": "broker",
    "Section": "reference",
    "ServerSection": "broker",
    "Setting": "reference",
    "StoreSection": "broker",
    "TablesSection": "broker",
    "TieredSection": "broker",
    "TlsSection": "broker",
    "TomlSettings": "toml",
    "TransactionsSection": "broker",
    "broker_sections": "reference",
    "default_config_path": "broker",
    "default_namesrv_config_path": "namesrv",
    "load_namesrv_settings": "namesrv",
    "load_settings": "broker",
    "main": "doc",
    "namesrv_sections": "reference",
    "normalize_url": "addresses",
    "parse_namesrv_addrs": "addresses",
    "render_markdown": "doc",
    "render_toml": "doc",
    "replace_block": "doc",
})

__all__ = [
    "ADDRESS_PATTERN",
    "AuthSection",
    "BEGIN",
    "BrokerSection",
    "BrokerSettings",
    "ConfigDocError",
    "DelaySection",
    "END",
    "FastFailureSection",
    "GroupsSection",
    "HARole",
    "HASection",
    "LimitsSection",
    "MirrorSection",
    "NamesrvSettings",
    "PopSection",
    "ProtectionSection",
    "REGENERATE",
    "RuntimeSection",
    "Section",
    "ServerSection",
    "Setting",
    "StoreSection",
    "TablesSection",
    "TieredSection",
    "TlsSection",
    "TomlSettings",
    "TransactionsSection",
    "broker_sections",
    "default_config_path",
    "default_namesrv_config_path",
    "load_namesrv_settings",
    "load_settings",
    "main",
    "namesrv_sections",
    "normalize_url",
    "parse_namesrv_addrs",
    "render_markdown",
    "render_toml",
    "replace_block",
]
