"""How a :class:`~broker_api.client.producer.Producer` sender thread posts a batch.

Each sender thread keeps its own HTTP/1.1 connection per broker: a plain
socket, one ``sendall`` of the request head and body, and the answer read
with a few lines of parsing (status, ``Content-Length`` or chunks,
``Connection``, ``Retry-After``).  A request costs it about a third of the
CPU ``http.client`` takes (whose header parsing goes through the ``email``
package), itself about a third of the client's shared httpx pool: in a
process whose sending thread, sender threads and callbacks share one
interpreter lock, that CPU is latency.  It is used for ``http://`` brokers unless requests are signed
(``user=``/``secret=``; a ``token`` is one header); ``https://`` and signed
requests go through the client's httpx connection (``SparkMQClient._call``).

Both paths answer alike: the broker's JSON answer, or the client's errors
(an error answer as its class, a busy answer waited out ``busy_retries``
times as ``SparkMQClient`` does, :class:`BrokerUnreachableError` when
nothing answered, ``stored_unknown`` once the request may have gone out).
"""

from __future__ import annotations

import select
import socket
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import orjson

from .core import SparkMQClient
from .results import answer_error, busy_delay, no_answer_error

__all__ = ["Connections"]

_READ = 65536


class _BadAnswer(Exception):
    """The broker's answer is not HTTP/1.1 this reader understands, or the connection closed mid-answer."""


class Connections:
    """One sender thread's kept-alive connections, by broker URL (a thread's own: not shared)."""

    def __init__(self, client: SparkMQClient) -> None:
        self._client = client
        self._socks: dict[str, socket.socket] = {}
        self._heads: dict[tuple[Any, ...], str] = {}  # (url, path, query, content type) -> request head
        plain = client.plain_headers
        # None: signed requests, or a header a plain socket could not send as given (httpx refuses it by name)
        self._fields = None if plain is None or not _sendable(plain) else "".join(f"{k}: {v}\r\n"
                                                                                   for k, v in plain.items())

    def post(self, url: str, path: str, broker: str, content: bytes, headers: Mapping[str, str],
             params: Mapping[str, str]) -> Any:
        """POST ``content`` to ``url + path``; the broker's JSON answer, or the client's error."""
        client = self._client
        if self._fields is None or not url.startswith("http://"):
            return client._call("POST", url + path, broker, content=content, headers=headers, params=params)
        head = self._head(url, path, params, headers)
        for attempt in range(client._busy_retries + 1):
            status, body, retry_after = self._once(url, broker, head, content)
            if status < 400:
                return orjson.loads(body)
            error = answer_error(status, body, retry_after, url + path)
            delay = busy_delay(error, attempt, client._busy_retries)
            if delay is None:
                try:
                    raise error
                finally:
                    del error  # a local naming the raised error would tie it to this frame: a reference cycle
            client.busy_retried += 1
            time.sleep(delay)
        raise AssertionError("unreachable")  # the loop returns or raises

    def _head(self, url: str, path: str, params: Mapping[str, str], headers: Mapping[str, str]) -> str:
        """The request line and headers up to ``Content-Length:`` (made once per URL, path and query)."""
        key = (url, path, *params.items(), headers.get("Content-Type"))
        head = self._heads.get(key)
        if head is None:
            parts, query = urlsplit(url), urlencode(params)
            target = quote(f"{parts.path.rstrip('/')}{path}", safe="/%") + (f"?{query}" if query else "")
            extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items() if k.lower() != "content-length")
            head = self._heads[key] = (f"POST {target} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
                                       f"Accept-Encoding: identity\r\n{self._fields}{extra}Content-Length: ")
        return head

    def _connect(self, url: str, broker: str) -> socket.socket:
        sock = self._socks.get(url)
        if sock is not None and _closed_by_peer(sock):
            self._drop(url)  # the broker closed the idle connection (its keep-alive ran out): a new one
            sock = None
        if sock is None:
            parts = urlsplit(url)
            try:
                sock = socket.create_connection((parts.hostname or "", parts.port or 80), self._client.timeout_s)
            except OSError as exc:
                raise no_answer_error(url, broker, f"{type(exc).__name__}: {exc}", sent=False,
                                      timed_out=isinstance(exc, TimeoutError), routed=self._client.routed) from exc
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._socks[url] = sock
        return sock

    def _once(self, url: str, broker: str, head: str, content: bytes) -> tuple[int, bytes, str]:
        sock = self._connect(url, broker)
        request = f"{head}{len(content)}\r\n\r\n".encode("latin-1")
        try:
            if len(content) <= _READ:
                sock.sendall(request + content)  # head and body: one segment
            else:
                sock.sendall(request)
                sock.sendall(content)
            status, body, retry_after, will_close = _answer(sock)
        except (OSError, _BadAnswer) as exc:
            self._drop(url)
            raise no_answer_error(url, broker, f"{type(exc).__name__}: {exc}", sent=True,
                                  timed_out=isinstance(exc, TimeoutError), routed=self._client.routed) from exc
        if will_close:
            self._drop(url)
        return status, body, retry_after

    def _drop(self, url: str) -> None:
        sock = self._socks.pop(url, None)
        if sock is not None:
            sock.close()

    def close(self) -> None:
        for url in list(self._socks):
            self._drop(url)


def _answer(sock: socket.socket) -> tuple[int, bytes, str, bool]:
    """(status, body, Retry-After, whether the broker closes the connection) of one answer."""
    buf = b""
    while True:
        end = buf.find(b"\r\n\r\n")
        while end < 0:
            buf += _recv(sock)
            end = buf.find(b"\r\n\r\n")
        lines = buf[:end].decode("latin-1").split("\r\n")
        version, _, rest = lines[0].partition(" ")
        try:
            status = int(rest[:3])
        except ValueError:
            raise _BadAnswer(f"not an HTTP status line: {lines[0][:80]!r}") from None
        buf = buf[end + 4:]
        if not 100 <= status < 200:
            break  # 1xx (100 Continue): a head alone, the answer follows
    fields: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            fields[name.strip().lower()] = value.strip()
    will_close = version != "HTTP/1.1" or fields.get("connection", "").lower() == "close"
    if "chunked" in fields.get("transfer-encoding", "").lower():
        body = _chunked(sock, buf)
    elif "content-length" in fields:
        try:
            n = int(fields["content-length"])
        except ValueError:
            raise _BadAnswer(f"Content-Length {fields['content-length']!r}") from None
        while len(buf) < n:
            buf += _recv(sock)
        body = buf[:n]
    elif status in (204, 304):
        body = b""
    else:  # the body runs to the end of the connection
        parts = [buf]
        while chunk := sock.recv(_READ):
            parts.append(chunk)
        body, will_close = b"".join(parts), True
    return status, body, fields.get("retry-after", ""), will_close


def _chunked(sock: socket.socket, buf: bytes) -> bytes:
    """A chunked body (``buf``: what was read past the head); trailers are read and dropped."""
    parts: list[bytes] = []
    while True:
        while (eol := buf.find(b"\r\n")) < 0:
            buf += _recv(sock)
        try:
            size = int(buf[:eol].split(b";", 1)[0], 16)
        except ValueError:
            raise _BadAnswer(f"chunk size {buf[:eol][:40]!r}") from None
        buf = buf[eol + 2:]
        if size == 0:
            while not (buf.startswith(b"\r\n") or b"\r\n\r\n" in buf):
                buf += _recv(sock)
            return b"".join(parts)
        while len(buf) < size + 2:
            buf += _recv(sock)
        parts.append(buf[:size])
        buf = buf[size + 2:]


def _recv(sock: socket.socket) -> bytes:
    chunk = sock.recv(_READ)
    if not chunk:
        raise _BadAnswer("the broker closed the connection before its answer was complete")
    return chunk


def _sendable(headers: Mapping[str, str]) -> bool:
    return not any(c in f"{k}{v}" for k, v in headers.items() for c in "\r\n\0")


def _closed_by_peer(sock: socket.socket) -> bool:
    """An idle kept-alive socket that is readable was closed (or broken) by the broker."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)
