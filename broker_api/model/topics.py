"""Topic metadata (RocketMQ's TopicConfigManager): names, queue counts, permissions, table settings.

Persisted atomically to ``<data>/config/topics.json``, one object per topic:
``{"name", "queues", "perm"}`` plus ``"table"`` (a :class:`connectors.tables.TableSpec`
as JSON) for a topic with a Delta table of its own; a file without it (written
before table topics existed) loads as table mode ``off``.  Internal topics
(prefix ``RMQ_SYS_``) hold broker state such as transaction half messages;
they never appear in listings and clients cannot produce to or pull from them.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from connectors.tables.spec import TableSpec
from store.schedule_names import SCHEDULE_TOPIC, TIMER_TOPIC

from ..errors import (
    BadRequestError,
    BadTopicNameError,
    PermissionDeniedError,
    QueueNotFoundError,
    TopicExistsError,
    TopicNotFoundError,
)
from ..jsonfile import read_json, write_json_atomic

if TYPE_CHECKING:
    from store import MessageStore

__all__ = [
    "CLIENT_TOPIC_PATTERN",
    "GROUP_NAME_MAX",
    "GROUP_NAME_PATTERN",
    "GROUP_NAME_RULE",
    "GROUP_TOPIC",
    "GROUP_TOPIC_RULE",
    "PERMS",
    "SYSTEM_PREFIX",
    "TIMESTAMP_TYPES",
    "TOPIC_NAME_MAX",
    "TOPIC_NAME_PATTERN",
    "TOPIC_NAME_RULE",
    "TopicConfig",
    "TopicManager",
    "validate_group_name",
    "validate_topic_name",
]

SYSTEM_PREFIX = "RMQ_SYS_"
PERMS = ("rw", "r", "w", "")
CREATE_TIME, LOG_APPEND_TIME = "CreateTime", "LogAppendTime"
TIMESTAMP_TYPES = (CREATE_TIME, LOG_APPEND_TIME)  # Kafka's message.timestamp.type
TOPIC_NAME_MAX = 127
# The name rules, also the OpenAPI document's patterns (broker_api/http/contract.py): one definition.
# Code matches them whole (fullmatch: "name\n" is no name); the document's ``$`` is ECMA's (the end).
TOPIC_NAME_RULE = r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,%d}" % (TOPIC_NAME_MAX - 1)
TOPIC_NAME_PATTERN = rf"^{TOPIC_NAME_RULE}$"
GROUP_NAME_MAX = 120  # its %RETRY% / %DLQ% topic must fit in 127 bytes
GROUP_NAME_RULE = r"[A-Za-z0-9][A-Za-z0-9_.%%\-]{0,%d}" % (GROUP_NAME_MAX - 1)
GROUP_NAME_PATTERN = rf"^{GROUP_NAME_RULE}$"
_GROUP_NAME = re.compile(GROUP_NAME_RULE)
RESERVED_TOPICS = (SCHEDULE_TOPIC, TIMER_TOPIC)
# A client topic in the OpenAPI document: the rule without the reserved names and prefix.
CLIENT_TOPIC_PATTERN = "^(?!%s|(?:%s)$)%s$" % (SYSTEM_PREFIX, "|".join(RESERVED_TOPICS), TOPIC_NAME_RULE)
_NAME = re.compile(TOPIC_NAME_RULE)
# A consumer group's retry and dead-letter topics (RocketMQ's names; created by the broker, read by pull).
GROUP_TOPIC_RULE = r"%(?:RETRY|DLQ)%" + GROUP_NAME_RULE
GROUP_TOPIC = re.compile(GROUP_TOPIC_RULE)
_HIDDEN = frozenset(RESERVED_TOPICS)  # the delay topics keep RocketMQ's own names


def validate_group_name(name: str) -> None:
    """Raise BadRequestError unless ``name`` is a legal consumer group name."""
    if not _GROUP_NAME.fullmatch(name):
        raise BadRequestError(
            f"group name {name!r} is invalid; use 1-{GROUP_NAME_MAX} characters from A-Z a-z 0-9 _ . % -, "
            "starting with a letter or digit"
        )


def validate_topic_name(name: str) -> None:
    """Raise BadTopicNameError unless ``name`` is a legal client topic name."""
    if GROUP_TOPIC.fullmatch(name):
        return
    if not _NAME.fullmatch(name):
        raise BadTopicNameError(
            f"topic name {name!r} is invalid; use 1-127 characters from A-Z a-z 0-9 _ . -, "
            "starting with a letter or digit"
        )
    if name.startswith(SYSTEM_PREFIX):
        raise BadTopicNameError(f"topic names starting with {SYSTEM_PREFIX!r} are reserved for the broker")
    if name in _HIDDEN:
        raise BadTopicNameError(f"topic name {name!r} is reserved for delayed messages")


@dataclass(frozen=True, slots=True)
class TopicConfig:
    """One topic: how many queues, whether it may be read/written, and its table settings."""

    name: str
    queues: int
    perm: str = "rw"
    table: TableSpec = field(default_factory=TableSpec)
    timestamp_type: str = CREATE_TIME  # Kafka's message.timestamp.type: what Fetch gives as record times

    def to_json(self) -> dict[str, Any]:
        """As persisted and synced to slaves (``table`` and ``timestamp_type`` only when not the default)."""
        out: dict[str, Any] = {"name": self.name, "queues": self.queues, "perm": self.perm}
        if self.table.enabled:
            out["table"] = self.table.to_json()
        if self.timestamp_type != CREATE_TIME:
            out["timestamp_type"] = self.timestamp_type
        return out

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> TopicConfig:
        """Read :meth:`to_json`'s shape; a missing ``table`` is mode off (raises TableSpecError if malformed)."""
        table = TableSpec.from_json(obj["table"]) if obj.get("table") is not None else TableSpec()
        return cls(str(obj["name"]), int(obj["queues"]), str(obj.get("perm", "rw")), table,
                   str(obj.get("timestamp_type", CREATE_TIME)))

    @property
    def readable(self) -> bool:
        return "r" in self.perm

    @property
    def writable(self) -> bool:
        return "w" in self.perm

    @property
    def system(self) -> bool:
        return self.name.startswith(SYSTEM_PREFIX) or self.name in _HIDDEN

    def check_queue(self, queue_id: int) -> None:
        if not 0 <= queue_id < self.queues:
            raise QueueNotFoundError(
                f"topic {self.name!r} has queues 0..{self.queues - 1}; queue {queue_id} does not exist"
            )


class TopicManager:
    """The table of topics, loaded at start-up and saved on every change."""

    def __init__(self, path: Path, default_queues: int, auto_create: bool) -> None:
        self._path = path
        self._default_queues = default_queues
        self._auto_create = auto_create
        self._topics: dict[str, TopicConfig] = {}
        self._lock = threading.Lock()
        # Called (no arguments) after a topic is created or deleted.
        self.listeners: list[Callable[[], None]] = []

    def _changed(self) -> None:
        for listener in self.listeners:
            listener()

    def load(self, store: MessageStore) -> None:
        """Read topics.json and add topics the store has data for but the file lacks."""
        raw = read_json(self._path, {})
        self._topics = {name: TopicConfig.from_json({**cfg, "name": name}) for name, cfg in raw.items()}
        self.adopt_store_topics(store, notify=False)

    def adopt_store_topics(self, store: MessageStore, notify: bool = True) -> bool:
        """Add topics the store has data for but the table lacks (queues: up to the highest seen)."""
        with self._lock:
            found = [TopicConfig(name, max(max(queue_ids, default=0) + 1, 1))
                     for name, queue_ids in store.topics().items() if name not in self._topics]
            for cfg in found:
                self._topics[cfg.name] = cfg
            if found:
                self._save()
        if found and notify:
            self._changed()
        return bool(found)

    def replace_all(self, configs: list[TopicConfig], store: MessageStore, drop: bool = True) -> bool:
        """Slave: make the client topics ``configs`` (the master's); system topics stay.

        With ``drop``, a topic the master no longer has is dropped with its queues, as on
        the master.  Returns True when anything changed."""
        wanted = {c.name: c for c in configs if not c.system}
        with self._lock:
            gone = [n for n, c in self._topics.items() if drop and not c.system and n not in wanted]
            changed = [c for n, c in wanted.items() if self._topics.get(n) != c]
            if not gone and not changed:
                return False
            for name in gone:
                store.delete_topic(name)
                del self._topics[name]
            self._topics.update((c.name, c) for c in changed)
            self._save()
        self._changed()
        return True

    def _save(self) -> None:
        write_json_atomic(self._path, {n: c.to_json() for n, c in sorted(self._topics.items())})

    def exists(self, name: str) -> bool:
        return name in self._topics

    def list(self, include_system: bool = False) -> list[TopicConfig]:
        with self._lock:
            return [c for _, c in sorted(self._topics.items()) if include_system or not c.system]

    def get(self, name: str) -> TopicConfig:
        """The client-visible topic ``name``; system topics count as absent."""
        cfg = self._topics.get(name)
        if cfg is None or cfg.system:
            validate_topic_name(name)
            raise TopicNotFoundError(
                f"topic {name!r} does not exist; create it with POST /v1/topics or `sparkmq topic create {name}`"
            )
        return cfg

    def for_produce(self, name: str) -> TopicConfig:
        """The topic to write to, auto-created if the setting allows."""
        cfg = self._topics.get(name)
        if cfg is None and self._auto_create:
            validate_topic_name(name)
            cfg = self.create(name, self._default_queues, "rw", exist_ok=True)
        if cfg is None or cfg.system:
            return self.get(name)
        if not cfg.writable:
            raise PermissionDeniedError(f"topic {name!r} has perm {cfg.perm!r} and cannot be written")
        return cfg

    def for_pull(self, name: str) -> TopicConfig:
        cfg = self.get(name)
        if not cfg.readable:
            raise PermissionDeniedError(f"topic {name!r} has perm {cfg.perm!r} and cannot be read")
        return cfg

    def create(self, name: str, queues: int, perm: str = "rw", *, exist_ok: bool = False,
               table: TableSpec | None = None, timestamp_type: str = CREATE_TIME) -> TopicConfig:
        """Create a client topic; an identical existing one is returned when ``exist_ok``."""
        validate_topic_name(name)
        if timestamp_type not in TIMESTAMP_TYPES:
            raise BadRequestError(f"timestamp type {timestamp_type!r} is not one of {', '.join(TIMESTAMP_TYPES)}")
        return self._create(TopicConfig(name, queues, perm, table or TableSpec(), timestamp_type), exist_ok)

    def set_table(self, name: str, table: TableSpec) -> TopicConfig:
        """Replace the table settings of client topic ``name`` (checked by the caller) and persist."""
        with self._lock:
            cfg = replace(self.get(name), table=table)
            self._topics[name] = cfg
            self._save()
        return cfg

    def grow(self, name: str, queues: int) -> TopicConfig:
        """Give client topic ``name`` more queues (Kafka's CreatePartitions); never fewer."""
        with self._lock:
            cfg = self.get(name)
            if queues < cfg.queues:
                raise BadRequestError(f"topic {name!r} has {cfg.queues} queues; a topic never loses queues")
            cfg = self._topics[name] = replace(cfg, queues=queues)
            self._save()
        self._changed()
        return cfg

    def ensure_system(self, name: str, queues: int = 1) -> TopicConfig:
        """Create (once) an internal topic used by the broker itself."""
        assert name.startswith(SYSTEM_PREFIX) or name in _HIDDEN
        return self._create(TopicConfig(name, queues, "rw"), True)

    def ensure_group_topic(self, name: str) -> TopicConfig:
        """Create (once) a group's ``%RETRY%`` or ``%DLQ%`` topic: one queue, readable by pull."""
        assert GROUP_TOPIC.fullmatch(name)
        return self._create(TopicConfig(name, 1, "rw"), True)

    def _create(self, cfg: TopicConfig, exist_ok: bool) -> TopicConfig:
        with self._lock:
            old = self._topics.get(cfg.name)
            if old is not None:
                if old == cfg and exist_ok:
                    return old
                table = f", table mode {old.table.mode!r}" if old.table != cfg.table else ""
                raise TopicExistsError(
                    f"topic {cfg.name!r} already exists with {old.queues} queues and perm {old.perm!r}{table}; "
                    f"delete it first, use it as is, or change its table with PUT /v1/topics/{cfg.name}"
                )
            self._topics[cfg.name] = cfg
            self._save()
        self._changed()
        return cfg

    def delete(self, name: str, store: MessageStore) -> None:
        self.get(name)
        with self._lock:
            store.delete_topic(name)
            self._topics.pop(name, None)
            self._save()
        self._changed()
