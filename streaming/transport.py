"""How the source's and sink's clients send one HTTP request: plain, or through httpx.

A Spark query imports this package in several Python processes (the driver's
source runner, the planner, every Python worker), and each of them used to
import httpx and httpcore (about 0.1 s, more when trio is installed) and
build a TLS context before its first request, even for a plain ``http://``
broker. :class:`PlainTransport` speaks HTTP/1.1 over ``http.client`` with one
kept-alive connection per address and needs neither; it is used whenever
every address is ``http://`` and requests are not HMAC-signed (a ``token``
is one header). Anything else (``https://``, signing, a CA file) goes
through :class:`HttpxTransport`, which imports httpx only when it is built.

Both raise the same two errors, so the clients' retry and back-off rules are
written once: :class:`ConnectFailed` when nothing was sent (safe to send
again, even a produce) and :class:`TransportFailed` when the request may
have reached the broker.
"""

from __future__ import annotations

import functools
import http.client
import select
import socket
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlencode, urlsplit

from .auth import Trust

__all__ = ["ConnectFailed", "Headers", "HttpxTransport", "PlainTransport", "Reply", "Transport", "TransportFailed",
           "open_transport"]


class ConnectFailed(Exception):
    """No connection could be made (refused, unreachable, connect timeout): nothing was sent."""


class TransportFailed(Exception):
    """The connection failed after the request started: the broker may have received it."""


class Headers(dict[str, str]):
    """Response headers; names are case-insensitive."""

    def __init__(self, items: Any = ()) -> None:
        super().__init__((str(k).lower(), str(v)) for k, v in items)

    def __getitem__(self, name: str) -> str:
        return super().__getitem__(name.lower())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and super().__contains__(name.lower())

    def get(self, name: str, default: Any = None) -> Any:  # type: ignore[override]
        return super().get(name.lower(), default)


@dataclass(frozen=True)
class Reply:
    """One HTTP answer, whichever transport carried it."""

    status_code: int
    headers: Headers
    content: bytes
    url: str  # what was asked, with its query

    @property
    def host(self) -> str:
        return urlsplit(self.url).hostname or ""

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")


class Transport(Protocol):
    def request(self, method: str, url: str, *, params: Mapping[str, Any] | None = None, content: bytes = b"",
                headers: Mapping[str, str] | None = None) -> Reply: ...

    def close(self) -> None: ...


def _full_url(url: str, params: Mapping[str, Any] | None) -> str:
    if not params:
        return url
    return f"{url}{'&' if '?' in url else '?'}{urlencode(params)}"


class _Connection(http.client.HTTPConnection):
    """A connection whose connect step has its own (shorter) time limit."""

    def __init__(self, host: str, port: int, connect_timeout_s: float, timeout_s: float) -> None:
        super().__init__(host, port, timeout=timeout_s)
        self._connect_timeout_s = connect_timeout_s

    def connect(self) -> None:
        sock = socket.create_connection((self.host, self.port), self._connect_timeout_s)
        sock.settimeout(self.timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = sock


class PlainTransport:
    """HTTP/1.1 over ``http.client``: one kept-alive connection per ``host:port``, not thread-safe
    (each client, and so each read task, has its own)."""

    def __init__(self, timeout_s: float, connect_timeout_s: float, headers: Mapping[str, str] | None = None) -> None:
        self._timeout_s = timeout_s
        self._connect_timeout_s = connect_timeout_s
        self._headers = dict(headers or {})
        self._conns: dict[tuple[str, int], _Connection] = {}

    def request(self, method: str, url: str, *, params: Mapping[str, Any] | None = None, content: bytes = b"",
                headers: Mapping[str, str] | None = None) -> Reply:
        full = _full_url(url, params)
        parts = urlsplit(full)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"{url!r}: the plain transport speaks http:// only")
        conn = self._connection(parts.hostname, parts.port or 80)
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        sent = {**self._headers, **(headers or {})}
        try:
            if conn.sock is None:
                conn.connect()
        except OSError as exc:
            self._drop(conn)
            raise ConnectFailed(f"cannot connect to {parts.netloc}: {exc}") from exc
        try:
            conn.request(method, target or "/", body=content or None, headers=sent)
            resp = conn.getresponse()
            body = resp.read()
        except (OSError, http.client.HTTPException) as exc:
            self._drop(conn)
            raise TransportFailed(f"{type(exc).__name__}: {exc}") from exc
        if resp.will_close:
            self._drop(conn)
        return Reply(resp.status, Headers(resp.getheaders()), body, full)

    def _connection(self, host: str, port: int) -> _Connection:
        conn = self._conns.get((host, port))
        if conn is not None and conn.sock is not None and _closed_by_peer(conn.sock):
            self._drop(conn)  # the broker closed the idle connection (keep-alive timeout): open a new one
            conn = None
        if conn is None:
            conn = _Connection(host, port, self._connect_timeout_s, self._timeout_s)
            self._conns[(host, port)] = conn
        return conn

    def _drop(self, conn: _Connection) -> None:
        conn.close()
        self._conns = {k: c for k, c in self._conns.items() if c is not conn}

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()


def _closed_by_peer(sock: socket.socket) -> bool:
    """An idle kept-alive socket that is readable has been closed (or broken) by the other side."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


class HttpxTransport:
    """Through httpx: TLS, a CA file, HMAC-signed requests."""

    def __init__(self, timeout_s: float, connect_timeout_s: float, options: dict[str, Any]) -> None:
        import httpx

        self._httpx = httpx
        self._http = httpx.Client(timeout=httpx.Timeout(timeout_s, connect=connect_timeout_s), **options)

    def request(self, method: str, url: str, *, params: Mapping[str, Any] | None = None, content: bytes = b"",
                headers: Mapping[str, str] | None = None) -> Reply:
        httpx = self._httpx
        try:
            resp = self._http.request(method, url, params=params, content=content or None, headers=headers)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise ConnectFailed(f"{type(exc).__name__}: {exc}") from exc
        except httpx.TransportError as exc:
            raise TransportFailed(f"{type(exc).__name__}: {exc!r}") from exc
        return Reply(resp.status_code, Headers(resp.headers.items()), resp.content, str(resp.request.url))

    def close(self) -> None:
        self._http.close()


@functools.lru_cache(maxsize=1)
def _default_tls() -> ssl.SSLContext:
    """One default TLS context per process, shared by every client (tasks open many)."""
    return ssl.create_default_context()


@functools.lru_cache(maxsize=1)
def _no_ca_tls() -> ssl.SSLContext:
    """For signing clients whose every address is plain http://: no CA store is loaded, yet
    certificates are still required, so an https:// answer fails closed."""
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


def open_transport(urls: tuple[str, ...], trust: Trust, timeout_s: float, connect_timeout_s: float) -> Transport:
    """The plain transport when every address is ``http://`` and nothing is signed, else httpx."""
    plain = all(u.startswith("http://") for u in urls)
    if plain and not trust.user:
        token = {"Authorization": f"Bearer {trust.token}"} if trust.token else None
        return PlainTransport(timeout_s, connect_timeout_s, token)
    options = trust.http_options()
    options.setdefault("verify", _no_ca_tls() if plain else _default_tls())
    return HttpxTransport(timeout_s, connect_timeout_s, options)
