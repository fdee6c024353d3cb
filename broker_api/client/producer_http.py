"""How a :class:`~broker_api.client.producer.Producer` sender thread posts a batch.

Each sender thread keeps its own HTTP/1.1 connection per broker over
``http.client``: a request costs it about a third of the CPU the client's
shared httpx connection pool takes, and in a process whose sending thread,
sender threads and callbacks share one interpreter lock, that CPU is
latency.  It is used for ``http://`` brokers unless requests are signed
(``user=``/``secret=``; a ``token`` is one header); ``https://`` and signed
requests go through the client's httpx connection (``SparkMQClient._call``).

Both paths answer alike: the broker's JSON answer, or the client's errors
(an error answer as its class, a busy answer waited out ``busy_retries``
times as ``SparkMQClient`` does, :class:`BrokerUnreachableError` when
nothing answered, ``stored_unknown`` once the request may have gone out).
"""

from __future__ import annotations

import http.client
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


class Connections:
    """One sender thread's kept-alive connections, by broker URL (a thread's own: not shared)."""

    def __init__(self, client: SparkMQClient) -> None:
        self._client = client
        self._conns: dict[str, http.client.HTTPConnection] = {}

    def post(self, url: str, path: str, broker: str, content: bytes, headers: Mapping[str, str],
             params: Mapping[str, str]) -> Any:
        """POST ``content`` to ``url + path``; the broker's JSON answer, or the client's error."""
        client = self._client
        if client.plain_headers is None or not url.startswith("http://"):
            return client._call("POST", url + path, broker, content=content, headers=headers, params=params)
        target = f"{urlsplit(url).path.rstrip('/')}{quote(path)}?{urlencode(params)}"  # a topic name quoted
        sent = {**client.plain_headers, **headers}
        for attempt in range(client._busy_retries + 1):
            status, body, retry_after = self._once(url, target, broker, content, sent)
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

    def _once(self, url: str, target: str, broker: str, content: bytes,
              headers: dict[str, str]) -> tuple[int, bytes, str]:
        conn = self._conns.get(url)
        if conn is not None and conn.sock is not None and _closed_by_peer(conn.sock):
            conn.close()  # the broker closed the idle connection (its keep-alive ran out): a new one
        if conn is None:
            parts = urlsplit(url)
            conn = self._conns[url] = http.client.HTTPConnection(parts.hostname or "", parts.port or 80,
                                                                 timeout=self._client.timeout_s)
        routed = self._client.routed
        if conn.sock is None:
            try:
                conn.connect()  # (TCP_NODELAY set)
            except OSError as exc:
                conn.close()
                raise no_answer_error(url, broker, f"{type(exc).__name__}: {exc}", sent=False,
                                      timed_out=isinstance(exc, TimeoutError), routed=routed) from exc
        try:
            conn.request("POST", target, body=content, headers=headers)  # headers and body: one send
            resp = conn.getresponse()
            body = resp.read()
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            raise no_answer_error(url, broker, f"{type(exc).__name__}: {exc}", sent=True,
                                  timed_out=isinstance(exc, TimeoutError), routed=routed) from exc
        if resp.will_close:
            conn.close()
        return resp.status, body, resp.getheader("Retry-After", "")

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()


def _closed_by_peer(sock: socket.socket) -> bool:
    """An idle kept-alive socket that is readable was closed (or broken) by the broker."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)
