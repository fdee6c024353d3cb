"""sparkmq's message store: CommitLog, ConsumeQueue, IndexFile, reput, flush, recovery.

The face is lazy (PEP 562): ``from store import MessageStore`` loads the store and numpy on first use,
while ``store.config``, ``store.errors`` and ``store.schedule_names`` stay light for settings and clients.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .lazy import lazy_getattr

if TYPE_CHECKING:
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

_WHERE: dict[str, str] = {
    "ColumnPutResult": "columns",
    **dict.fromkeys(("FlushMode", "HAConfig", "StoreConfig"), "config"),
    **dict.fromkeys(("DispatchBatch", "Dispatcher", "decode_properties"), "dispatch"),
    **dict.fromkeys((
        "CorruptRecordError", "DamagedMessageError", "DiskFullError", "InvalidMessageError", "InvalidOffsetError",
        "MessageNotFoundError", "MessageTooLargeError", "RemoteReadError", "StoreClosedError", "StoreError",
        "StoreLockedError"), "errors"),
    **dict.fromkeys(("DamagedRecord", "GetResult", "GetStatus", "Message", "PutResult", "StoredMessage", "SysFlag"),
                    "message"),
    **dict.fromkeys(("ArrivalListener", "MessageStore"), "message_store"),
    **dict.fromkeys(("PullBatch", "PullColumns"), "pull"),
}

__getattr__ = lazy_getattr(__name__, _WHERE)

__all__ = sorted(_WHERE)  # the face: every lazily loaded name above
