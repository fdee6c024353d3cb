"""Slow clients: read deadlines for headers and bodies, so a trickle cannot hold a slot or a connection.

Two deadlines (``[server]``)::

    header_read_timeout_s   a request's headers must be complete within this long of the
                            connection opening or of the previous answer; else the
                            connection is closed (one byte a second is not enough)
    body_read_timeout_s     a body that makes no progress for this long: 408 and the
                            connection is closed

The front door (:mod:`broker_api.http.hotpath`) reads a request's whole body
*before* it asks admission for a slot (:func:`read_body`), so a client that
sends its body slowly holds a connection, never a produce or admin slot; a
declared ``Content-Length`` above ``[limits] max_request_bytes`` is answered
413 before any of it is read.  The header deadline lives in the HTTP protocol
uvicorn runs (:func:`deadline_protocol`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from starlette.types import Message, Receive

from ..errors import BatchTooLargeError

__all__ = ["SlowBodyError", "deadline_protocol", "read_body", "replay"]

log = logging.getLogger(__name__)


class SlowBodyError(Exception):
    """Raised when a request body made no progress within ``body_read_timeout_s``."""


def declared_length(headers: Any) -> int | None:
    """The request's Content-Length, or None when it has none (chunked, or no body)."""
    for name, value in headers:
        if name == b"content-length":
            return int(value) if value.isdigit() else None
    return None


def has_body(headers: Any) -> bool:
    """Whether a body follows the headers: a Content-Length above 0, or chunked transfer coding."""
    for name, value in headers:
        if name == b"content-length":
            return value not in (b"0", b"")
        if name == b"transfer-encoding":
            return True
    return False


async def read_body(receive: Receive, timeout_s: float, limit: int) -> list[Message]:
    """Every ``http.request`` message of the body, read with a progress deadline.

    Raises SlowBodyError when no byte came for ``timeout_s``, BatchTooLargeError past ``limit``
    bytes, and returns early (with the ``http.disconnect``) when the client went away."""
    got: list[Message] = []
    size = 0
    while True:
        try:
            message = await asyncio.wait_for(receive(), timeout_s)
        except TimeoutError:
            raise SlowBodyError(f"no request body byte for {timeout_s:g} s ([server] body_read_timeout_s); "
                                f"{size} bytes came") from None
        got.append(message)
        if message["type"] != "http.request":
            return got
        size += len(message.get("body", b""))
        if size > limit:
            raise BatchTooLargeError(f"the request body passed {limit} bytes ([limits] max_request_bytes)")
        if not message.get("more_body", False):
            return got


def replay(messages: list[Message], receive: Receive) -> Receive:
    """A ``receive`` that hands out the body read already as one message, then the client's."""
    body = b"".join(m.get("body", b"") for m in messages if m["type"] == "http.request")
    pending: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]
    pending += [m for m in messages if m["type"] != "http.request"]

    async def _receive() -> Message:
        return pending.pop(0) if pending else await receive()

    return _receive


def deadline_protocol(base: type, header_timeout_s: float, on_late: Callable[[], None]) -> type:
    """uvicorn's HTTP protocol class ``base`` with the header deadline (see the module docstring)."""

    class _Deadline(base):  # type: ignore[misc,valid-type]
        _timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def on_headers_complete(self) -> None:  # httptools
            self._disarm()
            super().on_headers_complete()

        def handle_events(self) -> None:  # h11: headers are in once the client is past IDLE
            super().handle_events()
            if self._timer is not None and getattr(self.conn.their_state, "__name__", "") != "IDLE":
                self._disarm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()  # the next request's headers have the same deadline

        def _arm(self) -> None:
            self._disarm()
            self._timer = self.loop.call_later(header_timeout_s, self._late)

        def _disarm(self) -> None:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

        def _late(self) -> None:
            self._timer = None
            if self.transport.is_closing() or (self.cycle is not None and not self.cycle.response_complete):
                return
            log.info("closing a connection from %s: no complete request headers within %g s "
                     "([server] header_read_timeout_s)", self.client, header_timeout_s)
            on_late()
            self.transport.close()

    _Deadline.__name__ = f"Deadline{base.__name__}"
    return _Deadline
