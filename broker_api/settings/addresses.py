"""NameServer and broker addresses, written RocketMQ-style.

A list is ``;``-separated, each with or without a scheme:
``"127.0.0.1:9876;http://10.0.0.2:9876"``.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

from ..errors import NamesrvAddressError

__all__ = ["ADDRESS_PATTERN", "normalize_url", "parse_namesrv_addrs"]

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
