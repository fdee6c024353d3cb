"""The ASGI middleware that authenticates and authorizes every request (``[auth] enabled``).

It is the outermost layer of the broker's app (before the slave guard,
admission and the hot lane) and of the NameServer's, so one check covers
the fast produce/pull lane and every FastAPI route, and a request without
valid credentials never takes an admission slot:

1. ``permissions(method, path, query)`` says whether the path is open
   (:func:`broker_api.auth.broker_access` on a broker: ``None`` = open);
   on a broker every other route declares its own needs next to its
   handler and checks them from its parsed values (:mod:`.guard`).
2. The credentials are checked (:class:`broker_api.auth.Authenticator`): a
   cached bearer token costs a dictionary look-up; an unseen one is hashed
   on a worker thread so the event loop never runs the slow KDF.
3. The permissions returned (the NameServer's) are checked against the
   user's policy.
4. A signed request's body is hashed as the app reads it; a body that does
   not match the signed SHA-256 makes the answer 401, whatever the app
   would have answered (the app fails on the read, before storing anything).

Refusals come from the one error table: 401 ``unauthenticated`` with
``WWW-Authenticate``, 403 ``permission_denied`` naming resource and action.
The user is left in ``scope["sparkmq.principal"]`` for routes that check
more (the NameServer's registrations).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..auth import Authenticator, Permission, Principal, UserStore, broker_access
from ..auth.signature import ALGORITHM, CONTENT_HEADER, DATE_HEADER
from ..errors import AccessDeniedError, UnauthenticatedError
from .errors import response_for

if TYPE_CHECKING:
    from ..settings.broker import BrokerSettings

__all__ = ["PRINCIPAL_KEY", "AuthMiddleware", "install_auth"]

log = logging.getLogger("sparkmq.auth")

PRINCIPAL_KEY = "sparkmq.principal"
_BAD_BODY_KEY = "sparkmq.auth.bad_body"
_STARTED_KEY = "sparkmq.auth.started"
_WANTED = {b"authorization": "authorization", DATE_HEADER.encode(): DATE_HEADER,
           CONTENT_HEADER.encode(): CONTENT_HEADER}
PermissionsOf = Callable[[str, str, str], "list[Permission] | None"]


class AuthMiddleware:
    """Refuses requests without the credentials and permissions their route needs."""

    def __init__(self, app: ASGIApp, authenticator: Authenticator, permissions: PermissionsOf) -> None:
        self.app = app
        self._auth = authenticator
        self._permissions = permissions

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        method, path = scope["method"], scope["path"]
        query = scope.get("query_string", b"").decode("latin-1")
        needs = self._permissions(method, path, query)
        if needs is None:
            await self.app(scope, receive, send)
            return
        headers = {_WANTED[k]: v.decode("latin-1") for k, v in scope.get("headers", ()) if k in _WANTED}
        try:
            principal = await self._principal(method, path, query, headers)
            self._auth.authorize(principal, needs)
        except (UnauthenticatedError, AccessDeniedError) as exc:
            await _refuse(exc, scope, receive, send)
            return
        scope[PRINCIPAL_KEY] = principal
        if not headers.get("authorization", "").startswith(ALGORITHM):
            await self.app(scope, receive, send)
            return
        receive = _verifying(receive, scope, headers.get(CONTENT_HEADER, ""))
        guarded = _overriding(send, scope, receive)
        try:
            await self.app(scope, receive, guarded)
        except UnauthenticatedError as exc:  # the body was read before any handler (slow_clients.py)
            if not scope.get(_BAD_BODY_KEY) or scope.get(_STARTED_KEY):
                raise
            await _refuse(exc, scope, receive, send)

    async def _principal(self, method: str, path: str, query: str, headers: dict[str, str]) -> Principal:
        authorization = headers.get("authorization", "")
        found = self._auth.cached(authorization)
        if found is not None:
            return found
        if authorization.startswith("Bearer "):  # a slow hash: off the event loop
            return await asyncio.to_thread(self._auth.authenticate, method, path, query, headers)
        return self._auth.authenticate(method, path, query, headers)


async def _refuse(exc: Exception, scope: Scope, receive: Receive, send: Send) -> None:
    response = response_for(exc)
    if isinstance(exc, UnauthenticatedError):
        response.headers["WWW-Authenticate"] = f'Bearer realm="sparkmq", {ALGORITHM} realm="sparkmq"'
    await response(scope, receive, send)


def _verifying(receive: Receive, scope: Scope, expected: str) -> Receive:
    """``receive`` that hashes the body and fails its last chunk if it differs from the signed hash."""
    digest = hashlib.sha256()

    async def checked() -> Message:
        message = await receive()
        if message["type"] == "http.request":
            digest.update(message.get("body", b""))
            if not message.get("more_body", False) and digest.hexdigest() != expected:
                scope[_BAD_BODY_KEY] = True
                raise UnauthenticatedError(f"the body does not match its signed {CONTENT_HEADER}")
        return message

    return checked


def _overriding(send: Send, scope: Scope, receive: Receive) -> Send:
    """``send`` that answers 401 instead of the app's answer when the body did not match."""
    refused = False

    async def guarded(message: Message) -> None:
        nonlocal refused
        scope[_STARTED_KEY] = True
        if refused:
            return
        if message["type"] == "http.response.start" and scope.get(_BAD_BODY_KEY):
            refused = True
            exc = UnauthenticatedError(f"the body does not match its signed {CONTENT_HEADER}")
            await _refuse(exc, scope, receive, send)
            return
        await send(message)

    return guarded


def install_auth(app: Any, settings: BrokerSettings) -> Authenticator | None:
    """Add the middleware (outermost) to a broker app, or its control app, when ``[auth] enabled``."""
    if not settings.auth.enabled:
        return None
    authenticator = Authenticator(UserStore(settings.auth_path), settings.auth.max_clock_skew_s)
    if not authenticator.store.snapshot().users:
        log.warning("[auth] is enabled and %s holds no user: every request will be refused; add one with "
                    "`sparkmq user add NAME --super --data-dir %s`", settings.auth_path, settings.data_path)
    control_open = settings.auth.control_open

    def permissions(method: str, path: str, query: str) -> list[Permission] | None:
        return broker_access(path, control_open)

    app.add_middleware(AuthMiddleware, authenticator=authenticator, permissions=permissions)
    app.state.authenticator = authenticator  # the routes' own checks (guard.py) use it
    return authenticator
