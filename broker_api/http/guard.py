"""Permissions by construction: every handler says what it needs, next to its definition.

    @router.get("/v1/groups/{group}/offsets", ...)
    @requires(Group("path:group", "Sub"), Topic("query:topic", "Sub"))
    def read_offsets(group: str, request: Request, topic: str = Query(...)) -> ...

:func:`requires` wraps the handler: before it runs, the needs
(:mod:`broker_api.auth.needs`) are resolved from the very arguments the
handler is called with (FastAPI's parsed path, query and body values; on the
fast lane the one query parser's answer, :mod:`.query`) and checked against
the caller's policy.  A missing permission is ``403 permission_denied``
before the handler reads anything.  Every router uses :class:`GuardedRoute`,
which refuses at start-up a handler that declares nothing, checks the query
string (unknown or repeated names are 400) and a JSON body's content type
(415) before FastAPI parses them.

The caller was authenticated by :class:`broker_api.http.auth.AuthMiddleware`
(401 before admission); with ``[auth]`` off there is no authenticator and
nothing is checked.  A long poll calls :func:`recheck` when it wakes: a user
removed (or a grant revoked) while it was parked gets 401 (403), not data.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import Response

from store import MessageNotFoundError

from ..auth import Authenticator, Permission, Principal
from ..auth.needs import Marker, Need, topic_permission
from ..errors import (
    NotTransactionOwnerError,
    UnauthenticatedError,
    UnsupportedMediaTypeError,
)
from ..model.pop_records import ORIGIN_TOPIC
from ..model.topics import SYSTEM_PREFIX
from .auth import PRINCIPAL_KEY
from .query import check_query, query_of

__all__ = [
    "NEEDS_ATTR",
    "Declared",
    "GuardedRoute",
    "all_routes",
    "check_topics",
    "declared",
    "local_message",
    "owner_of",
    "recheck",
    "requires",
]

NEEDS_ATTR = "__sparkmq_needs__"
_GRANTED_KEY = "sparkmq.granted"
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Declared:
    """What a handler declared: its needs, and (fast lane) the query names it reads."""

    needs: tuple[Need | Marker, ...]
    query: tuple[str, ...] | None = None
    repeatable: tuple[str, ...] = ()


def requires(*needs: Need | Marker, query: Iterable[str] | None = None, repeatable: Iterable[str] = ()
             ) -> Callable[[F], F]:
    """Declare what the decorated handler needs; the check runs before it, on both lanes."""
    if not needs:
        raise TypeError("requires() needs at least one Need or a marker (OPEN, CONTROL, LOGIN)")
    spec = Declared(tuple(needs), tuple(query) if query is not None else None, tuple(repeatable))

    def wrap(fn: F) -> F:
        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def guarded_async(*args: Any, **kwargs: Any) -> Any:
                _check(spec, args, kwargs)
                return await fn(*args, **kwargs)
            out: Any = guarded_async
        else:
            @functools.wraps(fn)
            def guarded(*args: Any, **kwargs: Any) -> Any:
                _check(spec, args, kwargs)
                return fn(*args, **kwargs)
            out = guarded
        setattr(out, NEEDS_ATTR, spec)
        return out  # type: ignore[no-any-return]

    return wrap


def declared(handler: Any) -> Declared | None:
    """What ``handler`` declared with :func:`requires`, or None."""
    return getattr(handler, NEEDS_ATTR, None)


def _request(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Request | None:
    for value in (*args, *kwargs.values()):
        if isinstance(value, Request):
            return value
    return None


def _authenticator(request: Request) -> Authenticator | None:
    return getattr(request.app.state, "authenticator", None)


def _check(spec: Declared, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    request = _request(args, kwargs)
    if request is None:
        if all(isinstance(n, Marker) for n in spec.needs):
            return
        raise TypeError("a handler with needs must take the Request")  # a bug, caught by the tests
    if spec.query is not None:
        check_query(request.scope, spec.query, spec.repeatable)
    auth = _authenticator(request)
    if auth is None or all(isinstance(n, Marker) for n in spec.needs):
        return
    principal = _principal(request)
    perms: list[Permission] = []
    for need in spec.needs:
        if isinstance(need, Need):
            perms += _resolve(need, request, kwargs, principal)
    request.scope[_GRANTED_KEY] = perms
    auth.authorize(principal, perms)


def _principal(request: Request) -> Principal:
    principal: Principal | None = request.scope.get(PRINCIPAL_KEY)
    if principal is None:
        raise UnauthenticatedError("this route needs credentials: send 'Authorization: Bearer <user>:<secret>'")
    return principal


def _values(source: str, request: Request, kwargs: dict[str, Any]) -> list[Any]:
    """The values ``source`` names, as the handler receives them ([] when absent)."""
    where, _, name = source.partition(":")
    if where in ("message", "receipt"):
        where, _, name = name.partition(".")
    if where == "path":
        value = kwargs[name] if name in kwargs else request.path_params.get(name)
    elif where == "query":
        value = kwargs[name] if name in kwargs else query_of(request.scope).get(name)
    elif where == "body":
        value = getattr(kwargs.get("body"), name, None)
    else:
        raise ValueError(f"unknown need source {source!r}")
    if value is None or value == "":
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _resolve(need: Need, request: Request, kwargs: dict[str, Any], principal: Principal) -> list[Permission]:
    broker: Any = request.app.state.broker
    if need.kind == "Cluster":
        return [(f"Cluster:{broker.settings.broker.cluster}", need.action)]
    values = _values(need.source, request, kwargs)
    if need.kind == "Owner":
        if not principal.super:
            _check_owner(broker, [str(v) for v in values], principal.user)
        return []
    if need.kind == "Group":
        return [(f"Group:{v}", need.action) for v in values]
    if need.source.startswith("message:"):
        values = [_origin(local_message(broker, str(v))) for v in values]
    elif need.source.startswith("receipt:"):
        values = broker.pop.receipt_topics(request.path_params.get("group", ""), [str(v) for v in values])
    return [p for v in values for p in _topic(broker, str(v), need.action, need.origins)]


def _topic(broker: Any, topic: str, action: str, origins: bool) -> list[Permission]:
    perm = topic_permission(topic, action)
    if perm[0].startswith("Group:") and action == "Sub" and not origins:  # its messages come from any topic
        return [perm, (f"Cluster:{broker.settings.broker.cluster}", "Sub")]
    return [perm]


def _origin(message: Any) -> str:
    return str(message.properties.get(ORIGIN_TOPIC, message.topic))


def _check_owner(broker: Any, tx_ids: list[str], user: str) -> None:
    for tx_id in tx_ids:
        owner = broker.transactions.owner(tx_id)
        if owner and owner != user:
            raise NotTransactionOwnerError(
                f"transaction {tx_id} belongs to another user; only its owner (or a super user) may read, "
                "stage into or end it", resource=f"Transaction:{tx_id}", action="Owner")


def local_message(broker: Any, msg_id: str) -> Any:
    """The message ``msg_id`` names, if this broker stored it under that id (not a system topic's);
    an id whose address part names another broker (or none) is 404, never another id's message."""
    found = broker.store.get_message(msg_id)
    if found.msg_id.upper() != msg_id.upper() or found.topic.startswith(SYSTEM_PREFIX):
        raise MessageNotFoundError(f"no message with id {msg_id!r} on this broker")
    return found


def check_topics(request: Request, messages: Iterable[Any], action: str = "Sub") -> None:
    """Before an answer carries ``messages``: the caller may ``action`` on each one's origin topic."""
    auth = _authenticator(request)
    if auth is None:
        return
    origins = {_origin(m) for m in messages}
    auth.authorize(_principal(request), [topic_permission(t, action) for t in sorted(origins)])


def recheck(request: Request) -> None:
    """A parked request wakes: its user must still exist and still hold what it was granted."""
    auth = _authenticator(request)
    if auth is not None and PRINCIPAL_KEY in request.scope:
        auth.recheck(request.scope[PRINCIPAL_KEY], request.scope.get(_GRANTED_KEY, ()))


def owner_of(request: Request) -> str:
    """The user a new transaction belongs to ("" with [auth] off)."""
    principal: Principal | None = request.scope.get(PRINCIPAL_KEY)
    return principal.user if principal is not None else ""


_JSON = "application/json"


class GuardedRoute(APIRoute):
    """An APIRoute whose handler must declare its needs, with the query and content type checked first."""

    def get_route_handler(self) -> Callable[[Request], Any]:
        spec = declared(self.endpoint)
        if spec is None:
            raise TypeError(f"{sorted(self.methods or ())} {self.path}: handler {self.endpoint.__name__!r} "
                            "declares no permissions; decorate it with @requires(...)")
        handler = super().get_route_handler()
        names = spec.query if spec.query is not None else _query_names(self.dependant)
        json_body = self.body_field is not None

        async def checked(request: Request) -> Response:
            check_query(request.scope, names, spec.repeatable)
            if json_body:
                _check_json(request)
            return await handler(request)  # type: ignore[no-any-return]

        return checked


def _query_names(dependant: Any) -> tuple[str, ...]:
    """The query parameters FastAPI reads for a route (its own and its dependencies')."""
    names = [p.alias for p in dependant.query_params]
    for sub in dependant.dependencies:
        names += _query_names(sub)
    return tuple(names)


def _check_json(request: Request) -> None:
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype and ctype != _JSON and not ctype.endswith("+json"):
        raise UnsupportedMediaTypeError(f"content type {ctype!r} is not accepted; send Content-Type: {_JSON}")


def all_routes(routes: Iterable[Any]) -> list[Any]:
    """Every route of an app, with included routers flattened (what the enumeration test walks)."""
    out: list[Any] = []
    for route in routes:
        inner = getattr(route, "original_router", None)
        out += all_routes(inner.routes) if inner is not None else [route]
    return out
