"""HTTP error plumbing shared by the broker and the NameServer apps.

Both answer every error as ``{"error": "<code>", "message": "..."}``; each
keeps its own hierarchy and table (class → (status, code)), and uses these
helpers to look classes up along the MRO and to shape FastAPI's own
validation and routing errors the same way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

if TYPE_CHECKING:  # FastAPI itself is imported only by the apps, so clients and the CLI start fast
    from fastapi import FastAPI
    from starlette.requests import Request

__all__ = ["ErrorTable", "error_response", "http_exception_response", "install_common_handlers", "lookup",
           "validation_response"]

ErrorTable = dict[type[BaseException], tuple[int, str]]

_HTTP_CODES = {404: "not_found", 405: "method_not_allowed", 413: "request_too_large"}


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
    parts = [f"{'.'.join(str(p) for p in err.get('loc', ()))}: {err.get('msg', 'invalid')}" for err in details[:5]]
    return error_response(400, "bad_request", "invalid request: " + "; ".join(parts) + "; see /docs")


def http_exception_response(request: Request, exc: Exception, api: str) -> Response:
    """Routing errors (unknown path, wrong method) naming ``api`` for where to look."""
    assert isinstance(exc, StarletteHTTPException)
    code = _HTTP_CODES.get(exc.status_code, f"http_{exc.status_code}")
    message = str(exc.detail)
    if exc.status_code == 404:
        message = f"no route for {request.method} {request.url.path}; see /docs for the {api}"
    elif exc.status_code == 405:
        message = f"{request.method} is not allowed on {request.url.path}; see /docs"
    return error_response(exc.status_code, code, message, dict(exc.headers or {}) or None)


def install_common_handlers(app: FastAPI, api: str) -> None:
    """Answer FastAPI's own validation and routing errors in the documented shape (both apps)."""
    from fastapi.exceptions import RequestValidationError

    async def on_validation(request: Request, exc: Exception) -> Response:
        return validation_response(exc)

    async def on_http(request: Request, exc: Exception) -> Response:
        return http_exception_response(request, exc, api)

    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)
