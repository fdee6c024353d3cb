"""Value types that cross the store's public face."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Mapping, NamedTuple

__all__ = [
    "Message",
    "PutResult",
    "StoredMessage",
    "GetStatus",
    "GetResult",
    "DamagedRecord",
    "SysFlag",
]


class SysFlag(enum.IntFlag):
    """Bits of a record's sys flag (RocketMQ's MessageSysFlag, subset)."""

    NONE = 0
    COMPRESSED = 0x1
    # Transaction state lives in bits 2-3, as in RocketMQ.
    TRANSACTION_PREPARED = 0x1 << 2
    TRANSACTION_COMMIT = 0x2 << 2
    TRANSACTION_ROLLBACK = 0x3 << 2
    # The record ends with the whole-record CRC pair (store.wcrc); set by the store, hidden from readers.
    WHOLE_CRC = 0x1 << 16

    @staticmethod
    def transaction_state(flag: int) -> int:
        return flag & (0x3 << 2)


@dataclass(slots=True)
class Message:
    """A message to append. ``born_timestamp`` (ms) defaults to now.

    Not frozen on purpose: a frozen dataclass costs ~2.5x more to build, and
    producers build one per message.  The store never mutates it.
    """

    topic: str
    body: bytes
    queue_id: int = 0
    keys: tuple[str, ...] = ()
    tags: str | None = None
    properties: Mapping[str, str] = field(default_factory=dict)
    flag: int = 0
    sys_flag: int = 0
    born_timestamp: int | None = None
    born_host: str | None = None
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0


class PutResult(NamedTuple):
    """Where an appended message landed (a named tuple: one is made per message put, so it must be cheap)."""

    msg_id: str
    topic: str
    queue_id: int
    queue_offset: int
    phy_offset: int
    size: int
    store_timestamp: int


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """A message read back from the CommitLog."""

    topic: str
    queue_id: int
    queue_offset: int
    phy_offset: int
    msg_id: str
    body: bytes
    keys: tuple[str, ...]
    tags: str | None
    properties: dict[str, str]
    born_timestamp: int
    store_timestamp: int
    size: int
    flag: int
    sys_flag: int
    reconsume_times: int
    prepared_transaction_offset: int
    born_host: str
    store_host: str


class GetStatus(str, enum.Enum):
    """Outcome of a pull, as RocketMQ's GetMessageStatus."""

    FOUND = "FOUND"
    NO_NEW_MESSAGE = "NO_NEW_MESSAGE"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    OFFSET_OVERFLOW = "OFFSET_OVERFLOW"
    NO_QUEUE = "NO_QUEUE"
    CORRUPT_MESSAGE = "CORRUPT_MESSAGE"  # the record at the requested offset failed its checks


@dataclass(frozen=True, slots=True)
class DamagedRecord:
    """A record that failed its checks on read (body CRC, magic, lengths, or it does not match its unit)."""

    topic: str
    queue_id: int
    queue_offset: int
    phy_offset: int
    reason: str

    def describe(self) -> str:
        return (f"damaged record in topic {self.topic!r} queue {self.queue_id} at queue offset {self.queue_offset} "
                f"(CommitLog offset {self.phy_offset}): {self.reason}")


@dataclass(frozen=True, slots=True)
class GetResult:
    """A page of messages from one queue.

    ``next_offset`` is where the next pull should start: past the last unit
    examined (tag-filtered units included), or a corrected offset when the
    requested one was out of range.  A page stops before a damaged record;
    a pull starting at one answers CORRUPT_MESSAGE, names it in ``damaged``
    and sets ``next_offset`` past it, so the consumer decides.
    """

    status: GetStatus
    messages: list[StoredMessage]
    next_offset: int
    min_offset: int
    max_offset: int
    damaged: DamagedRecord | None = None
