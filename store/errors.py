"""One error hierarchy for the message store.

Every failure the store reports is a :class:`StoreError`; callers (the HTTP
layer above all) map the subclasses to answers.  The store never returns a
sentinel value to mean "failed".
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "StoreError",
    "StoreLockedError",
    "StoreClosedError",
    "InvalidMessageError",
    "MessageTooLargeError",
    "DiskFullError",
    "MessageNotFoundError",
    "CorruptRecordError",
    "InvalidOffsetError",
    "FlushTimeoutError",
    "DamagedMessageError",
    "RemoteReadError",
]


class StoreError(Exception):
    """Raised when the message store cannot do what was asked."""


class StoreLockedError(StoreError):
    """Raised when another process already holds the store's lock file."""


class StoreClosedError(StoreError):
    """Raised when the store is used before start() or after shutdown()."""


class InvalidMessageError(StoreError):
    """Raised when a message is malformed (bad topic, key, tag or property)."""


class MessageTooLargeError(InvalidMessageError):
    """Raised when a message is larger than the configured maximum size."""


class DiskFullError(StoreError):
    """Raised when a write would push disk use past the hard limit."""


class MessageNotFoundError(StoreError):
    """Raised when a message id or physical offset holds no readable message."""


class CorruptRecordError(StoreError):
    """Raised when a record on disk fails its magic code or CRC check."""


class DamagedMessageError(CorruptRecordError, MessageNotFoundError):
    """Raised when the record a lookup (by id or key) names is on disk but fails its checks: never served.

    A MessageNotFoundError too, so callers that skip missing messages still stop; its
    CorruptRecordError base comes first, so an error table maps it as a damaged record.
    """


class InvalidOffsetError(StoreError):
    """Raised when an offset argument is negative or otherwise unusable."""


class FlushTimeoutError(StoreError):
    """Raised when a SYNC put is written but its fdatasync did not finish in time.

    ``results`` holds the put's results: the messages are stored (and will be
    flushed), only not confirmed on disk in time (RocketMQ's FLUSH_DISK_TIMEOUT).
    """

    def __init__(self, message: str, results: list[Any] | None = None) -> None:
        super().__init__(message)
        self.results: list[Any] = list(results or [])


class RemoteReadError(StoreError):
    """Raised when a CommitLog segment tiered to object storage cannot be read back intact
    (its object is missing, fails its CRC, or the object store does not answer): never wrong bytes."""
