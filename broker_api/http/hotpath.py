"""A pure-ASGI fast lane for the two hot routes (produce and pull).

FastAPI's per-request machinery (route scan, dependency solving, exception
middleware) costs more than a small produce itself.  This middleware matches
``POST /v1/topics/{topic}/messages`` and
``GET /v1/topics/{topic}/queues/{queue_id}/messages`` first and calls the
same handlers the FastAPI routes use (which stay registered, so ``/docs``
still documents them); errors are answered from the same table.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from store import StoreError

from ..errors import BrokerError
from .errors import response_for
from .messages import produce, pull

__all__ = ["HotPathMiddleware"]

log = logging.getLogger(__name__)

_PRODUCE = re.compile(r"^/v1/topics/(?P<topic>[^/]+)/messages$")
_PULL = re.compile(r"^/v1/topics/(?P<topic>[^/]+)/queues/(?P<queue_id>[^/]+)/messages$")
Handler = Callable[[Request], Awaitable[Response]]


class HotPathMiddleware:
    """Serves produce and pull without FastAPI's routing; passes everything else on."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    def _route(self, scope: Scope) -> tuple[Handler, dict[str, Any]] | None:
        method, path = scope["method"], scope["path"]
        if method == "POST":
            m = _PRODUCE.match(path)
            return (produce, m.groupdict()) if m else None
        if method == "GET":
            m = _PULL.match(path)
            return (pull, m.groupdict()) if m else None
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        hit = self._route(scope) if scope["type"] == "http" else None
        if hit is None:
            await self.app(scope, receive, send)
            return
        handler, params = hit
        scope["path_params"] = params
        try:
            response = await handler(Request(scope, receive))
        except Exception as exc:
            if not isinstance(exc, (BrokerError, StoreError)):  # a bug: log it like the server would
                log.exception("%s %s failed", scope["method"], scope["path"])
            response = response_for(exc)
        await response(scope, receive, send)
