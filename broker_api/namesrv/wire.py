"""What brokers and NameServers exchange: data versions, the body CRC, addresses.

A registration body is JSON.  Its ``crc32`` field is ``zlib.crc32`` of the
canonical JSON of every other field::

    canonical = orjson.dumps(body_without_crc32, option=orjson.OPT_SORT_KEYS)
    crc32     = zlib.crc32(canonical)            # unsigned, 0 .. 2**32-1

NameServer addresses are written RocketMQ-style, ``;``-separated, with or
without a scheme: ``"127.0.0.1:9876;http://10.0.0.2:9876"``.
"""

from __future__ import annotations

import threading
import time
import zlib
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

import orjson

from .errors import NamesrvAddressError

__all__ = ["ADDRESS_PATTERN", "DataVersion", "body_crc32", "parse_namesrv_addrs", "normalize_url"]


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


_PORT = r"(?:[0-9]{1,4}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])"
# The URLs normalize_url takes from a broker (a documented subset: plain host names and IPv4).
ADDRESS_PATTERN = rf"^https?://[A-Za-z0-9][A-Za-z0-9.\-]*:{_PORT}/?$"


def normalize_url(addr: str) -> str:
    """``host:port`` or ``http(s)://host:port[/]`` -> ``http(s)://host:port``."""
    text = addr.strip().rstrip("/")
    if "://" not in text:
        text = "http://" + text
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise NamesrvAddressError(f"address {addr!r} is not host:port or an http(s) URL")
    try:
        port = parts.port
    except ValueError as exc:
        raise NamesrvAddressError(f"address {addr!r} has a bad port") from exc
    if port is None or parts.path or parts.query:
        raise NamesrvAddressError(f"address {addr!r} must be host:port, e.g. 127.0.0.1:9876")
    return f"{parts.scheme}://{parts.netloc}"


def parse_namesrv_addrs(spec: str | Iterable[str]) -> list[str]:
    """Parse ``"a:9876;b:9876"`` (or a list of such strings) into base URLs.

    Order is kept, duplicates dropped.  Raises NamesrvAddressError when an
    address is malformed or none is given.
    """
    items = [spec] if isinstance(spec, str) else list(spec)
    urls: list[str] = []
    for item in items:
        for part in item.split(";"):
            if part.strip():
                url = normalize_url(part)
                if url not in urls:
                    urls.append(url)
    if not urls:
        raise NamesrvAddressError("no NameServer address given; use host:port[;host:port...]")
    return urls
