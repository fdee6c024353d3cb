"""The message model: topics, groups, filters, POP with retry and DLQ, delay levels, long polling, table topics.

Names load on first use, so a client or the CLI that needs one module does not load the room."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_getattr

if TYPE_CHECKING:
    from .delay import DelayService
    from .filters import MAX_FILTER_CHARS, Predicate, apply_filter, compile_filter
    from .groups import GroupManager, SYSTEM_GROUP_PREFIX
    from .longpoll import PullWaiters
    from .pop import PopService, REVIVE_GROUP
    from .pop_records import Checkpoint, DLQ_PREFIX, ORIGIN_MSG_ID, ORIGIN_TOPIC, RECEIPT_PATTERN, RECONSUME_TIME, RETRY_PREFIX, REVIVE_TOPIC, ck_message, dlq_message, done_message, parse_receipt, reconsume_times, replay, retry_message
    from .tables import TableManager
    from .topics import GROUP_NAME_MAX, GROUP_NAME_PATTERN, GROUP_TOPIC, PERMS, SYSTEM_PREFIX, TOPIC_NAME_MAX, TOPIC_NAME_PATTERN, TopicConfig, TopicManager, validate_topic_name

__getattr__ = lazy_getattr(__name__, {
    "Checkpoint": "pop_records",
    "DLQ_PREFIX": "pop_records",
    "DelayService": "delay",
    "GROUP_NAME_MAX": "topics",
    "GROUP_NAME_PATTERN": "topics",
    "GROUP_TOPIC": "topics",
    "GroupManager": "groups",
    "MAX_FILTER_CHARS": "filters",
    "ORIGIN_MSG_ID": "pop_records",
    "ORIGIN_TOPIC": "pop_records",
    "PERMS": "topics",
    "PopService": "pop",
    "Predicate": "filters",
    "PullWaiters": "longpoll",
    "RECEIPT_PATTERN": "pop_records",
    "RECONSUME_TIME": "pop_records",
    "RETRY_PREFIX": "pop_records",
    "REVIVE_GROUP": "pop",
    "REVIVE_TOPIC": "pop_records",
    "SYSTEM_GROUP_PREFIX": "groups",
    "SYSTEM_PREFIX": "topics",
    "TOPIC_NAME_MAX": "topics",
    "TOPIC_NAME_PATTERN": "topics",
    "TableManager": "tables",
    "TopicConfig": "topics",
    "TopicManager": "topics",
    "apply_filter": "filters",
    "ck_message": "pop_records",
    "compile_filter": "filters",
    "dlq_message": "pop_records",
    "done_message": "pop_records",
    "parse_receipt": "pop_records",
    "reconsume_times": "pop_records",
    "replay": "pop_records",
    "retry_message": "pop_records",
    "validate_topic_name": "topics",
})

__all__ = [
    "Checkpoint",
    "DLQ_PREFIX",
    "DelayService",
    "GROUP_NAME_MAX",
    "GROUP_NAME_PATTERN",
    "GROUP_TOPIC",
    "GroupManager",
    "MAX_FILTER_CHARS",
    "ORIGIN_MSG_ID",
    "ORIGIN_TOPIC",
    "PERMS",
    "PopService",
    "Predicate",
    "PullWaiters",
    "RECEIPT_PATTERN",
    "RECONSUME_TIME",
    "RETRY_PREFIX",
    "REVIVE_GROUP",
    "REVIVE_TOPIC",
    "SYSTEM_GROUP_PREFIX",
    "SYSTEM_PREFIX",
    "TOPIC_NAME_MAX",
    "TOPIC_NAME_PATTERN",
    "TableManager",
    "TopicConfig",
    "TopicManager",
    "apply_filter",
    "ck_message",
    "compile_filter",
    "dlq_message",
    "done_message",
    "parse_receipt",
    "reconsume_times",
    "replay",
    "retry_message",
    "validate_topic_name",
]
