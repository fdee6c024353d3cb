"""The Kafka listener: an asyncio server on the broker's own event loop.

Each connection reads one size-prefixed frame at a time and answers it before reading the next,
as Kafka does (a connection's requests are handled in order). The listener starts with the
broker (``[kafka] port`` >= 0) and stops before the store does; it owns no thread.

Bad input is answered and logged, never allowed to stop the listener: a request of an API or
version we do not serve is answered UNSUPPORTED_VERSION (ApiVersions answers v0 with the list,
as KIP-511 says), a malformed one INVALID_REQUEST; an unknown API key, a negative size or a frame
over ``max_frame_bytes`` cannot be answered in any schema and closes that connection only.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

from .admin import ADMIN_HANDLERS
from .codec import (API_VERSIONS, API_VERSIONS_KEY, SIZE, ErrorCode, KafkaProtocolError, Request, build,
                    decode_request, encode_response, peek_header, response_class)
from .context import BrokerParts, KafkaContext, Node
from .fast_responses import FAST_RESPONSES
from .fetch import NEXT_REQUEST, fetch
from .fetch_ahead import FetchAhead
from .group_api import GROUP_HANDLERS
from .groups import GroupCoordinator
from .handlers import api_versions, api_versions_answer, init_producer_id, list_offsets, metadata
from .produce import produce, refuse_legacy_produce
from .sasl import PRE_AUTH_KEYS, SASL_HANDLERS, SaslGate
from .tools_api import TOOLS_HANDLERS

__all__ = ["KafkaListener"]

log = logging.getLogger(__name__)

Handler = Callable[[KafkaContext, Request], Awaitable[dict[str, Any] | None]]
HANDLERS: dict[int, Handler] = {0: produce, 1: fetch, 2: list_offsets, 3: metadata, 18: api_versions,
                                22: init_producer_id, **GROUP_HANDLERS, **ADMIN_HANDLERS, **SASL_HANDLERS,
                                **TOOLS_HANDLERS}
_STOP_TIMEOUT_S = 5.0
PRODUCE_KEY = 0


class KafkaListener:
    """Serves Kafka clients from ``broker``'s store, topics and groups."""

    def __init__(self, broker: BrokerParts) -> None:
        self.broker = broker
        self.config = broker.settings.kafka
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.base_events.Server | None = None
        self._conns: set[asyncio.Task[None]] = set()
        self.ctx: KafkaContext | None = None
        self.address: str | None = None

    # -- lifecycle (called from the broker's start/stop threads) -----------------------------------

    def start(self, loop: asyncio.AbstractEventLoop) -> str:
        """Listen on ``[kafka] port`` (0 = a free one); returns host:port. Raises OSError if it cannot."""
        self._loop = loop
        return asyncio.run_coroutine_threadsafe(self._open(), loop).result(_STOP_TIMEOUT_S * 2)

    def stop(self) -> None:
        """Stop listening and close every connection; safe to call twice."""
        loop, self._loop = self._loop, None
        if loop is None or loop.is_closed() or not loop.is_running():
            return
        try:
            asyncio.run_coroutine_threadsafe(self._close(), loop).result(_STOP_TIMEOUT_S)
        except (TimeoutError, RuntimeError) as exc:
            log.warning("kafka listener did not stop cleanly: %s", exc)

    async def _open(self) -> str:
        s = self.broker.settings
        host = self.config.host or s.broker.host
        self._server = await asyncio.start_server(self._serve, host, self.config.port, ssl=_tls(s))
        port = self._server.sockets[0].getsockname()[1]
        advertised = self.config.advertised_host or s.advertised_host()
        node = Node(s.broker.broker_id, advertised, port, s.broker.cluster)
        self.ctx = KafkaContext(self.broker, self.config, node)
        self.ctx.coordinator = GroupCoordinator(self.ctx)
        self.ctx.sasl = SaslGate(s)
        self.ctx.ahead = FetchAhead(self.config.fetch_ahead_bytes) if self.config.fetch_ahead_bytes else None
        self.address = f"{host}:{port}"
        log.info("kafka listener on %s (advertised as %s:%d)", self.address, advertised, port)
        return self.address

    async def _close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._conns):
            task.cancel()
        if self._conns:
            await asyncio.wait(self._conns, timeout=_STOP_TIMEOUT_S)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None
        if self.ctx is not None and self.ctx.coordinator is not None:
            self.ctx.coordinator.close()
        if self.ctx is not None and self.ctx.ahead is not None:
            self.ctx.ahead.close()

    # -- one connection ----------------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._conns.add(task)
        peer = writer.get_extra_info("peername")
        conn = _Connection(reader)
        session: dict[str, Any] = {NEXT_REQUEST: conn.next_request}
        try:
            while True:
                frame = await self._frame(conn, peer)
                if frame is None:
                    break
                answer = await self._answer(frame, peer, session)
                if answer is None:
                    continue
                if isinstance(answer, list):  # a Fetch answer's pieces: its record buffers are not joined
                    for piece in answer:  # (a view: what the socket does not take is copied once, not twice)
                        writer.write(memoryview(piece))
                else:
                    writer.write(answer)
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except _CloseConnection as exc:
            log.warning("kafka: closing the connection from %s: %s", peer, exc)
        except asyncio.CancelledError:
            pass
        finally:
            self._conns.discard(task)
            conn.close()
            writer.close()

    async def _frame(self, conn: _Connection, peer: Any) -> bytes | None:
        reader = conn.reader
        try:
            head = await conn.head()
        except asyncio.IncompleteReadError:
            return None
        (size,) = SIZE.unpack(head)
        if size < 8 or size > self.config.max_frame_bytes:
            raise _CloseConnection(f"request size {size} is outside 8..{self.config.max_frame_bytes} "
                                   "([kafka] max_frame_bytes)")
        return await reader.readexactly(size)

    async def _answer(self, frame: bytes, peer: Any, session: dict[str, Any]) -> bytes | list[bytes] | None:
        key, version, correlation = peek_header(frame)
        assert self.ctx is not None
        if self.ctx.sasl.enabled and "principal" not in session and key not in PRE_AUTH_KEYS:
            raise _CloseConnection(f"api key {key} before SASL authentication ([auth] is on: use SASL/PLAIN)")
        served = API_VERSIONS.get(key)
        if served is None:
            raise _CloseConnection(f"api key {key} is not served")
        if not served[1] <= version <= served[2]:
            level = logging.DEBUG if key == API_VERSIONS_KEY else logging.WARNING  # KIP-511: clients probe
            log.log(level, "kafka: %s asked api key %d version %d; served %d..%d", peer, key, version,
                    served[1], served[2])
            if key == PRODUCE_KEY:
                try:
                    return refuse_legacy_produce(frame, version)
                except KafkaProtocolError:
                    raise _CloseConnection(f"a malformed Produce v{version} request") from None
            return _error(key, version, correlation, ErrorCode.unsupported_version)
        try:
            req = decode_request(frame, session)
        except KafkaProtocolError as exc:
            log.warning("kafka: malformed request from %s: %s", peer, exc)
            return _error(key, version, correlation, ErrorCode.invalid_request)
        try:
            body = await HANDLERS[key](self.ctx, req)
            if body is None:
                return None
            if key in FAST_RESPONSES:
                return FAST_RESPONSES[key](version, correlation, body)
            return encode_response(key, version, correlation, build(response_class(key, version), body))
        except Exception:
            log.exception("kafka: api key %d v%d from %s failed", key, version, peer)
            return _error(key, version, correlation, ErrorCode.unknown_server_error)


def _tls(settings: Any) -> ssl.SSLContext | None:
    """With ``[tls]`` certificates the Kafka port is TLS too (clients: security.protocol SSL or SASL_SSL)."""
    if not settings.tls.enabled:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(settings.tls.certfile, settings.tls.keyfile)
    return context


class _Connection:
    """One client connection's reader; the next request's size prefix may be awaited early (a parked
    Fetch ends when the client sends another request: answers go out in order, see fetch.py)."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self.reader = reader
        self._head: asyncio.Future[bytes] | None = None

    def next_request(self) -> asyncio.Future[bytes]:
        """Done once the next request's first 4 bytes arrived (or the connection closed)."""
        if self._head is None:
            self._head = asyncio.ensure_future(self.reader.readexactly(4))
        return self._head

    async def head(self) -> bytes:
        """The next request's size prefix."""
        pending, self._head = self._head, None
        return await (pending if pending is not None else self.reader.readexactly(4))

    def close(self) -> None:
        if self._head is not None:
            self._head.cancel()


class _CloseConnection(KafkaProtocolError):
    """Raised when a frame cannot be answered in any schema: its connection is closed."""


def _error(key: int, version: int, correlation: int, code: ErrorCode) -> bytes:
    """An answer carrying ``code`` at the top (ApiVersions: v0 with the supported versions)."""
    if key == API_VERSIONS_KEY:
        return encode_response(key, 0, correlation, build(response_class(key, 0), api_versions_answer(code)))
    try:
        cls = response_class(key, version)
    except Exception as exc:  # a version kio has no schema for
        raise _CloseConnection(f"api key {key} version {version} has no response schema") from exc
    fields = {"error_code": code} if "error_code" in getattr(cls, "__dataclass_fields__", {}) else {}
    return encode_response(key, version, correlation, build(cls, fields))
