"""The pure-ASGI front door: control routes first, admission, then the hot lane.

Every HTTP request passes here before FastAPI sees it:

1. ``GET /healthz`` is answered here at once, and ``/readyz``, ``/metrics``
   and ``/v1/broker`` go straight to their routes: the control path never
   waits for an admission slot (the control listener, ``[server]
   admin_port``, also serves them on a thread of their own).
2. Every other request is classed (produce, pull, transaction, admin) and
   admitted by :class:`~broker_api.admission.Admission`, before its body is
   read; a refusal is ``503 broker_busy`` with ``Retry-After``.
3. The two hot routes, ``POST /v1/topics/{topic}/messages`` and
   ``GET /v1/topics/{topic}/queues/{queue_id}/messages``, are served here
   without FastAPI's routing (route scan, dependency solving and exception
   middleware cost more than a small produce); their FastAPI routes stay
   registered so ``/docs`` documents them.  Errors come from the same table.

Every 503 and 429 answer, whoever gives it, is counted in
``sparkmq_requests_rejected_total{route,reason}``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from store import StoreError

from ..errors import BatchTooLargeError, BrokerError
from ..protection.admission import TICKET_KEY, OverloadedError, Ticket
from ..protection.slow_clients import SlowBodyError, declared_length, has_body, read_body, replay
from .errors import error_response, response_for
from .messages import produce, pull

__all__ = ["CONTROL_PATHS", "ControlCountingMiddleware", "HotPathMiddleware", "route_class"]

log = logging.getLogger(__name__)

_PRODUCE = re.compile(r"^/v1/topics/(?P<topic>[^/]+)/messages$")
_PULL = re.compile(r"^/v1/topics/(?P<topic>[^/]+)/queues/(?P<queue_id>[^/]+)/messages$")
CONTROL_PATHS = frozenset({"/healthz", "/readyz", "/metrics", "/v1/broker"})
_REASON_KEY = "sparkmq.reason"
_HEALTHY = Response(b'{"status":"ok"}', media_type="application/json")
Handler = Callable[[Request], Awaitable[Response]]


def route_class(method: str, path: str) -> str:
    """``control``, ``produce``, ``pull``, ``transaction`` or ``admin``."""
    if method == "GET" and path in CONTROL_PATHS:
        return "control"
    if method == "POST" and _PRODUCE.match(path):
        return "produce"
    if method == "GET" and _PULL.match(path):
        return "pull"
    if method == "POST" and path.startswith(("/v1/transactions/", "/v1/sinks/")):
        return "transaction"
    return "admin"


def _content_length(scope: Scope) -> int:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            return int(value) if value.isdigit() else 0
    return 0


class HotPathMiddleware:
    """Control routes, admission, and produce/pull without FastAPI's routing."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        route = route_class(scope["method"], scope["path"])
        if route == "control":
            if scope["path"] == "/healthz":
                await _HEALTHY(scope, receive, send)  # liveness: answered even while overloaded
            else:
                await self.app(scope, receive, _Counting(scope, send, route))
            return
        broker = scope["app"].state.broker
        counting = _Counting(scope, send, route)
        try:
            if has_body(scope["headers"]):  # the whole body first: a slow sender holds no slot (slow_clients.py)
                broker.admission.check(route, _content_length(scope))  # a storm is still refused unread
                receive = await _read_first(scope, receive, counting, broker)
                if receive is None:
                    return
            ticket: Ticket = await broker.admission.admit(route, _content_length(scope))
        except OverloadedError as exc:  # the storm path: as cheap as an answer can be
            broker.metrics.requests_rejected.inc(route=route, reason=exc.reason)
            await _refuse(send, exc)
            return
        scope[TICKET_KEY] = ticket
        try:
            if route in ("produce", "pull"):
                await self._hot(route, scope, receive, counting)
            else:
                await self.app(scope, receive, counting)
        finally:
            ticket.lane.release(ticket)

    async def _hot(self, route: str, scope: Scope, receive: Receive, send: Send) -> None:
        m = (_PRODUCE if route == "produce" else _PULL).match(scope["path"])
        assert m is not None
        scope["path_params"] = m.groupdict()
        handler: Handler = produce if route == "produce" else pull
        try:
            response = await handler(Request(scope, receive))
        except Exception as exc:
            if not isinstance(exc, (BrokerError, StoreError)):  # a bug: log it like the server would
                log.exception("%s %s failed", scope["method"], scope["path"])
            scope[_REASON_KEY] = getattr(exc, "reason", None)
            response = response_for(exc)
        if route == "produce":
            scope["app"].state.broker.disk.note(response.status_code)  # a 507 turns /readyz off at once
        await response(scope, receive, send)


async def _read_first(scope: Scope, receive: Receive, send: Send, broker: Any) -> Receive | None:
    """A ``receive`` replaying the body read in full, or None once the request was answered 408/413."""
    s = broker.settings
    try:
        declared = declared_length(scope["headers"])
        if declared is not None and declared > s.limits.max_request_bytes:
            raise BatchTooLargeError(f"Content-Length {declared} is above {s.limits.max_request_bytes} bytes "
                                     "([limits] max_request_bytes)")
        return replay(await read_body(receive, s.server.body_read_timeout_s, s.limits.max_request_bytes), receive)
    except (SlowBodyError, BatchTooLargeError) as exc:
        slow = isinstance(exc, SlowBodyError)
        if slow:
            broker.metrics.requests_rejected.inc(route="connection", reason="body_timeout")
            log.info("%s %s: %s; closing the connection", scope["method"], scope["path"], exc)
        response = error_response(408, "request_timeout", f"{exc}; send the body faster") if slow \
            else response_for(exc)
        response.headers["connection"] = "close"
        await response(scope, receive, send)
        return None


async def _refuse(send: Send, exc: OverloadedError) -> None:
    body = orjson.dumps({"error": "broker_busy", "message": exc.message})
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
               (b"retry-after", str(exc.retry_after_s).encode())]
    await send({"type": "http.response.start", "status": 503, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class ControlCountingMiddleware:
    """The control listener's only middleware: counts its 503 answers (a /readyz that reports overload)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            send = _Counting(scope, send, "control")
        await self.app(scope, receive, send)


class _Counting:
    """Wraps ``send``: counts a 503 or 429 answer by route class and reason (its error code if unset)."""

    def __init__(self, scope: Scope, send: Send, route: str) -> None:
        self._scope, self._send, self._route = scope, send, route
        self._held: Message | None = None

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start" and message["status"] in (503, 429):
            self._held = message  # wait for the body: it names the reason
            return
        if self._held is not None and message["type"] == "http.response.body":
            held, self._held = self._held, None
            self._count(message.get("body", b""))
            await self._send(held)
        await self._send(message)

    def _count(self, body: bytes) -> None:
        reason = self._scope.get(_REASON_KEY)
        if not reason:
            try:
                reason = str(orjson.loads(body).get("error", "unknown"))
            except (orjson.JSONDecodeError, AttributeError):
                reason = "unknown"
        broker: Any = self._scope["app"].state.broker
        broker.metrics.requests_rejected.inc(route=self._route, reason=reason)
