"""sparkmq's message store: CommitLog, ConsumeQueue, IndexFile, reput, flush, recovery."""

from __future__ import annotations

from .columns import ColumnPutResult
from .config import FlushMode, HAConfig, StoreConfig
from .dispatch import DispatchBatch, Dispatcher, decode_properties
from .errors import (
    CorruptRecordError,
    DamagedMessageError,
    DiskFullError,
    InvalidMessageError,
    InvalidOffsetError,
    MessageNotFoundError,
    MessageTooLargeError,
    RemoteReadError,
    StoreClosedError,
    StoreError,
    StoreLockedError,
)
from .message import DamagedRecord, GetResult, GetStatus, Message, PutResult, StoredMessage, SysFlag
from .message_store import ArrivalListener, MessageStore
from .pull import PullBatch, PullColumns

__all__ = [
    "ArrivalListener",
    "ColumnPutResult",
    "CorruptRecordError",
    "DamagedMessageError",
    "DamagedRecord",
    "DiskFullError",
    "DispatchBatch",
    "Dispatcher",
    "FlushMode",
    "GetResult",
    "GetStatus",
    "HAConfig",
    "InvalidMessageError",
    "InvalidOffsetError",
    "Message",
    "MessageNotFoundError",
    "MessageStore",
    "MessageTooLargeError",
    "RemoteReadError",
    "PullBatch",
    "PullColumns",
    "PutResult",
    "StoreClosedError",
    "StoreConfig",
    "StoreError",
    "StoreLockedError",
    "StoredMessage",
    "SysFlag",
    "decode_properties",
]
