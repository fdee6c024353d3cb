"""What brokers and NameServers exchange: data versions and the body CRC.

A registration body is JSON.  Its ``crc32`` field is ``zlib.crc32`` of the
canonical JSON of every other field::

    canonical = orjson.dumps(body_without_crc32, option=orjson.OPT_SORT_KEYS)
    crc32     = zlib.crc32(canonical)            # unsigned, 0 .. 2**32-1
"""

from __future__ import annotations

import threading
import time
import zlib
from collections.abc import Iterable, Mapping
from typing import Any

import orjson

__all__ = ["DataVersion", "body_crc32"]


class DataVersion:
    """A broker's metadata version (RocketMQ's DataVersion): timestamp + counter.

    ``next_version()`` bumps it after every topic change; the NameServer
    compares versions to tell whether a broker's topics changed.  Thread-safe.
    """

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __init__(self, timestamp: int | None = None, counter: int = 0) -> None:
        self._lock = threading.Lock()
        self._timestamp = int(time.time() * 1000) if timestamp is None else int(timestamp)
        self._counter = int(counter)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DataVersion:
        return cls(int(data["timestamp"]), int(data["counter"]))

    def next_version(self) -> DataVersion:
        """Bump the counter and the timestamp; returns ``self``."""
        with self._lock:
            self._timestamp = max(int(time.time() * 1000), self._timestamp)
            self._counter += 1
        return self

    def to_dict(self) -> dict[str, int]:
        """An atomic snapshot ``{"timestamp": ms, "counter": n}``."""
        with self._lock:
            return {"timestamp": self._timestamp, "counter": self._counter}

    @property
    def timestamp(self) -> int:
        return self.to_dict()["timestamp"]

    @property
    def counter(self) -> int:
        return self.to_dict()["counter"]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DataVersion):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    def __repr__(self) -> str:
        v = self.to_dict()
        return f"DataVersion(timestamp={v['timestamp']}, counter={v['counter']})"


def body_crc32(body: Mapping[str, Any]) -> int:
    """CRC32 of the canonical JSON of ``body`` without its ``crc32`` field."""
    rest = {k: v for k, v in body.items() if k != "crc32"}
    return zlib.crc32(orjson.dumps(rest, option=orjson.OPT_SORT_KEYS))
