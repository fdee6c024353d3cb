"""Consumer groups: committed offsets and per-group switches.

RocketMQ's ConsumerOffsetManager and SubscriptionGroupManager in one small
class.  An offset is the *next* offset to consume.  Offsets are kept in
memory, persisted atomically to ``consumer_offsets.json`` every few seconds
(when changed) and at shutdown; group switches (``consume_enabled``, set by
slow-consumer protection or an operator) go to ``subscription_groups.json``
on every change.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from ..errors import GroupDisabledError
from ..jsonfile import read_json, write_json_atomic

__all__ = ["SYSTEM_GROUP_PREFIX", "GroupManager"]

SYSTEM_GROUP_PREFIX = "CID_RMQ_SYS_"  # RocketMQ's prefix for the broker's own consumer groups

Offsets = dict[str, dict[str, dict[int, int]]]  # group -> topic -> queue -> offset


class GroupManager:
    """Committed offsets and consume switches of every consumer group."""

    def __init__(self, meta_dir: Path) -> None:
        self._offsets_path = meta_dir / "consumer_offsets.json"
        self._groups_path = meta_dir / "subscription_groups.json"
        self._offsets: Offsets = {}
        self._groups: dict[str, dict[str, Any]] = {}
        self._dirty = False
        self._lock = threading.Lock()

    def load(self) -> None:
        raw = read_json(self._offsets_path, {})
        self._offsets = {
            g: {t: {int(q): int(o) for q, o in qs.items()} for t, qs in ts.items()} for g, ts in raw.items()
        }
        self._groups = read_json(self._groups_path, {})

    def persist(self) -> None:
        """Write the offsets if they changed since the last write."""
        with self._lock:
            if not self._dirty:
                return
            snapshot = {
                g: {t: {str(q): o for q, o in sorted(qs.items())} for t, qs in ts.items()}
                for g, ts in self._offsets.items()
            }
            self._dirty = False
        write_json_atomic(self._offsets_path, snapshot)

    def commit(self, group: str, topic: str, offsets: dict[int, int]) -> None:
        with self._lock:
            self._offsets.setdefault(group, {}).setdefault(topic, {}).update(offsets)
            self._dirty = True

    def offsets(self, group: str, topic: str) -> dict[int, int]:
        with self._lock:
            return dict(self._offsets.get(group, {}).get(topic, {}))

    def topics_of(self, group: str) -> dict[str, dict[int, int]]:
        with self._lock:
            return {t: dict(qs) for t, qs in self._offsets.get(group, {}).items()}

    def names(self, include_system: bool = False) -> list[str]:
        """Group names; the broker's own (``CID_RMQ_SYS_*``, e.g. POP's revive progress) only if asked."""
        with self._lock:
            found = set(self._offsets) | set(self._groups)
        return sorted(g for g in found if include_system or not g.startswith(SYSTEM_GROUP_PREFIX))

    def exists(self, group: str) -> bool:
        return group in self._offsets or group in self._groups

    def all_offsets(self) -> Offsets:
        with self._lock:
            return {g: {t: dict(qs) for t, qs in ts.items()} for g, ts in self._offsets.items()}

    def all_configs(self) -> dict[str, dict[str, Any]]:
        """Every group's switches as stored (subscription_groups.json)."""
        with self._lock:
            return {g: dict(c) for g, c in self._groups.items()}

    def replace_all(self, offsets: Offsets, configs: dict[str, dict[str, Any]]) -> None:
        """Slave: take the master's offsets and group switches as they are (RocketMQ SlaveSynchronize)."""
        with self._lock:
            if offsets != self._offsets:
                self._offsets = {g: {t: dict(qs) for t, qs in ts.items()} for g, ts in offsets.items()}
                self._dirty = True
            groups_changed = configs != self._groups
            if groups_changed:
                self._groups = {g: dict(c) for g, c in configs.items()}
            snapshot = dict(self._groups)
        if groups_changed:
            write_json_atomic(self._groups_path, snapshot)
        self.persist()

    def drop_topic(self, topic: str) -> None:
        with self._lock:
            for topics in self._offsets.values():
                if topics.pop(topic, None) is not None:
                    self._dirty = True

    def delete(self, group: str, topic: str | None = None, queues: set[int] | None = None) -> None:
        """Forget ``group``'s committed offsets: all, one topic's, or some queues of it."""
        with self._lock:
            if topic is None:
                self._offsets.pop(group, None)
            elif queues is None:
                self._offsets.get(group, {}).pop(topic, None)
            else:
                for q in queues:
                    self._offsets.get(group, {}).get(topic, {}).pop(q, None)
            self._dirty = True

    def config(self, group: str) -> dict[str, Any]:
        with self._lock:
            return {"consume_enabled": True, "disabled_reason": None, **self._groups.get(group, {})}

    def set_consume_enabled(self, group: str, enabled: bool, reason: str | None = None) -> None:
        self._update(group, consume_enabled=enabled, disabled_reason=None if enabled else reason)

    def set_max_reconsume_times(self, group: str, times: int) -> None:
        """Deliveries after the first before a POP or retried message goes to ``%DLQ%{group}``."""
        self._update(group, max_reconsume_times=times)

    def _update(self, group: str, **values: Any) -> None:
        with self._lock:
            self._groups[group] = {**self._groups.get(group, {}), **values}
            snapshot = dict(self._groups)
        write_json_atomic(self._groups_path, snapshot)

    def check_enabled(self, group: str) -> None:
        """Raise GroupDisabledError when protection switched ``group`` off."""
        cfg = self._groups.get(group)
        if cfg is not None and not cfg.get("consume_enabled", True):
            raise GroupDisabledError(
                f"consumer group {group!r} is disabled ({cfg.get('disabled_reason') or 'by an operator'}); "
                f"catch up or re-enable it with PUT /v1/groups/{group} {{\"consume_enabled\": true}}"
            )
