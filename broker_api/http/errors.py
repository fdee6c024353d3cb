"""HTTP error plumbing: the broker's error answers, and helpers the NameServer shares.

Both answer every error as ``{"error": "<code>", "message": "..."}``; each
keeps its own hierarchy and table (class → (status, code)), and uses these
helpers to look classes up along the MRO and to shape FastAPI's own
validation and routing errors the same way.
"""

from __future__ import annotations

import errno
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

import store
from connectors.errors import TableError

from ..errors import ERROR_TABLE, BrokerError, ErrorTable
from ..model.topics import validate_topic_name

if TYPE_CHECKING:  # FastAPI itself is imported only by the apps, so clients and the CLI start fast
    from fastapi import FastAPI
    from starlette.requests import Request

__all__ = ["error_response", "http_exception_response", "install_common_handlers", "install_handlers", "lookup",
           "response_for", "validation_response"]

_HTTP_CODES = {400: "bad_json", 404: "not_found", 405: "method_not_allowed", 413: "request_too_large"}


def error_response(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> Response:
    body = orjson.dumps({"error": code, "message": message})
    return Response(body, status_code=status, media_type="application/json", headers=headers)


def lookup(table: ErrorTable, exc: BaseException) -> tuple[int, str]:
    """The most specific (status, code) of ``exc``'s classes in ``table``."""
    for cls in type(exc).__mro__:
        if cls in table:
            return table[cls]
    return 500, "internal_error"


def validation_response(exc: Exception) -> Response:
    """FastAPI's request validation errors as a 400 in the documented shape."""
    from fastapi.exceptions import RequestValidationError

    assert isinstance(exc, RequestValidationError)
    details: list[Any] = list(exc.errors())
    if details and details[0].get("type") == "json_invalid":
        return error_response(400, "bad_json", "request body is not valid JSON; send a JSON object")
    bad_queue = [e for e in details if tuple(e.get("loc", ())) == ("path", "queue_id")]
    if bad_queue:
        return error_response(400, "bad_queue_id", f"queue id {bad_queue[0].get('input')!r} is not a queue id; "
                                                   "pass a non-negative integer")
    parts = [_problem(err) for err in details[:5]]
    return error_response(400, "bad_request", "invalid request: " + "; ".join(parts) + "; see /docs")


def _problem(err: dict[str, Any]) -> str:
    """One validation problem: where, and what was wrong (an unknown field says so by name)."""
    loc = tuple(err.get("loc", ()))
    if err.get("type") == "extra_forbidden" and loc:
        where = ".".join(str(p) for p in loc[:-1]) or "body"
        return f"{where} has an unknown field {loc[-1]!r} (a typo? nothing was done)"
    return f"{'.'.join(str(p) for p in loc)}: {err.get('msg', 'invalid')}"


def http_exception_response(request: Request, exc: Exception, api: str) -> Response:
    """Routing errors (unknown path, wrong method) naming ``api`` for where to look."""
    assert isinstance(exc, StarletteHTTPException)
    code = _HTTP_CODES.get(exc.status_code, f"http_{exc.status_code}")
    message = str(exc.detail)
    if exc.status_code == 404:
        message = f"no route for {request.method} {request.url.path}; see /docs for the {api}"
    headers = dict(exc.headers or {})
    if exc.status_code == 405:
        message = f"{request.method} is not allowed on {request.url.path}; see /docs"
        headers["Allow"] = _allowed_methods(request)
    return error_response(exc.status_code, code, message, headers or None)


def _allowed_methods(request: Request) -> str:
    """Every method served on this path, from the app's OpenAPI paths (starlette names one route's)."""
    state = request.app.state
    table: list[tuple[re.Pattern[str], str]] | None = getattr(state, "allow_table", None)
    if table is None:
        table = []
        for path, item in request.app.openapi().get("paths", {}).items():
            methods = {m.upper() for m in item} | ({"HEAD"} if "get" in item else set())
            table.append((re.compile("^" + re.sub(r"\\{[^/]+?\\}", "[^/]+", re.escape(path)) + "$"),
                          ", ".join(sorted(methods))))
        state.allow_table = table
    allowed = {m for pattern, methods in table if pattern.match(request.url.path) for m in methods.split(", ")}
    return ", ".join(sorted(allowed))


def install_common_handlers(app: FastAPI, api: str,
                            not_found: Callable[[str], Response | None] | None = None) -> None:
    """Answer FastAPI's own validation and routing errors in the documented shape (both apps).

    ``not_found(path)`` may give a more precise answer than "no route" for a path no route matches.
    """
    from fastapi.exceptions import RequestValidationError

    async def on_validation(request: Request, exc: Exception) -> Response:
        return validation_response(exc)

    async def on_http(request: Request, exc: Exception) -> Response:
        if not_found is not None and getattr(exc, "status_code", 0) == 404:
            answer = not_found(request.url.path)
            if answer is not None:
                return answer
        return http_exception_response(request, exc, api)

    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)


# -- the broker's own errors ---------------------------------------------

_STORE_ADVICE: dict[str, str] = {
    "message_too_large": "; send smaller messages or raise [store] max_message_bytes",
    "disk_full": "; free disk space or run POST /v1/admin/retention",
    "store_closed": "; the broker is shutting down, retry against a running broker",
}

def _lookup(exc: BaseException) -> tuple[int, str]:
    return lookup(ERROR_TABLE, exc)


def response_for(exc: Exception) -> Response:
    """The error answer for ``exc`` (the table's status and code; 500 for anything else)."""
    if isinstance(exc, (BrokerError, store.StoreError, TableError)):
        return _mapped(exc)
    return _unexpected(exc)


async def _handle_mapped(request: Request, exc: Exception) -> Response:
    return _mapped(exc)


def _mapped(exc: Exception) -> Response:
    status, code = _lookup(exc)
    message = str(exc) or type(exc).__name__
    if isinstance(exc, store.StoreError):
        message += _STORE_ADVICE.get(code, "")
    headers: dict[str, str] | None = None
    retry = getattr(exc, "retry_after_s", None)
    if retry is None and status == 503:
        retry = 1
    if retry is not None:
        headers = {"Retry-After": str(retry)}
    return error_response(status, code, message, headers)


async def _handle_unexpected(request: Request, exc: Exception) -> Response:
    return _unexpected(exc)


def _unexpected(exc: Exception) -> Response:
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):  # metadata files on a full disk
        return _mapped(store.DiskFullError(f"the broker could not write its files: {exc}"))
    # A bug, not a user error: still answer in the documented shape (the
    # exception is logged by the server as well).
    return error_response(500, "internal_error",
                          f"the broker failed unexpectedly ({type(exc).__name__}: {exc}); see the broker log")


# What may follow a topic name in a route: a path that matches none with a '/' in the name part
# names a topic with '/' in it (sent as is or as %2F), which no topic can have.
_TOPIC_TAIL = re.compile(r"/(?:messages|queues(?:/[^/]*/(?:messages|offset))?|table/replay-dlq)$")


def _slashed_topic(path: str) -> Response | None:
    """Answer bad_topic_name for ``/v1/topics/<name with '/'>[/route]``, else None."""
    if not path.startswith("/v1/topics/"):
        return None
    rest = path[len("/v1/topics/"):]
    tail = _TOPIC_TAIL.search(rest)
    name = rest[: tail.start()] if tail else rest
    if "/" not in name:
        return None
    try:
        validate_topic_name(name)
    except BrokerError as exc:
        return _mapped(exc)
    return None


def install_handlers(app: FastAPI) -> None:
    """Register the one mapped handler plus FastAPI's validation/HTTP errors."""
    app.add_exception_handler(BrokerError, _handle_mapped)
    app.add_exception_handler(store.StoreError, _handle_mapped)
    app.add_exception_handler(TableError, _handle_mapped)
    install_common_handlers(app, "API", _slashed_topic)
    app.add_exception_handler(Exception, _handle_unexpected)
