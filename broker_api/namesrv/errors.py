"""The NameServer's error hierarchy and its one HTTP error table.

Every error answer has the body ``{"error": "<code>", "message": "..."}``.
:data:`ERROR_TABLE` maps classes to (status, code); :func:`install_handlers`
registers one handler that walks an exception's MRO through the table.
"""

from __future__ import annotations

from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

__all__ = [
    "NamesrvError",
    "NamesrvAddressError",
    "BadRegistrationError",
    "BadCrcError",
    "TopicRouteNotFoundError",
    "BrokerNotRegisteredError",
    "NamesrvRejectedError",
    "NamesrvUnavailableError",
    "ERROR_TABLE",
    "install_handlers",
]


class NamesrvError(Exception):
    """Raised when the NameServer (or a client of it) cannot do what was asked."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class NamesrvAddressError(NamesrvError, ValueError):
    """Raised when a NameServer or broker address is not host:port or an http(s) URL."""


class BadRegistrationError(NamesrvError):
    """Raised when a broker request is malformed (missing fields, bad values)."""


class BadCrcError(BadRegistrationError):
    """Raised when a registration body's crc32 does not match its content."""


class TopicRouteNotFoundError(NamesrvError):
    """Raised when no live broker serves the asked topic."""


class BrokerNotRegisteredError(NamesrvError):
    """Raised when unregistering a broker address the NameServer does not know."""


class NamesrvRejectedError(NamesrvError):
    """Raised when a NameServer answers a broker request with an error status."""


class NamesrvUnavailableError(NamesrvError):
    """Raised when no NameServer of a list answered a client request."""


ERROR_TABLE: dict[type[BaseException], tuple[int, str]] = {
    BadCrcError: (400, "bad_crc"),
    BadRegistrationError: (400, "bad_request"),
    NamesrvAddressError: (400, "bad_address"),
    TopicRouteNotFoundError: (404, "topic_not_found"),
    BrokerNotRegisteredError: (404, "broker_not_found"),
    NamesrvRejectedError: (502, "namesrv_rejected"),
    NamesrvUnavailableError: (503, "namesrv_unavailable"),
    NamesrvError: (500, "namesrv_error"),
}

_HTTP_CODES = {404: "not_found", 405: "method_not_allowed"}


def error_response(status: int, code: str, message: str) -> Response:
    body = orjson.dumps({"error": code, "message": message})
    return Response(body, status_code=status, media_type="application/json")


def _lookup(exc: BaseException) -> tuple[int, str]:
    for cls in type(exc).__mro__:
        if cls in ERROR_TABLE:
            return ERROR_TABLE[cls]
    return 500, "internal_error"


async def _handle_mapped(request: Request, exc: Exception) -> Response:
    status, code = _lookup(exc)
    return error_response(status, code, str(exc) or type(exc).__name__)


async def _handle_validation(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    details: list[Any] = exc.errors()
    if details and details[0].get("type") == "json_invalid":
        return error_response(400, "bad_json", "request body is not valid JSON; send a JSON object")
    parts = []
    for err in details[:5]:
        where = ".".join(str(p) for p in err.get("loc", ()))
        parts.append(f"{where}: {err.get('msg', 'invalid')}")
    return error_response(400, "bad_request", "invalid request: " + "; ".join(parts) + "; see /docs")


async def _handle_http(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    code = _HTTP_CODES.get(exc.status_code, f"http_{exc.status_code}")
    message = str(exc.detail)
    if exc.status_code == 404:
        message = f"no route for {request.method} {request.url.path}; see /docs for the NameServer API"
    elif exc.status_code == 405:
        message = f"{request.method} is not allowed on {request.url.path}; see /docs"
    return error_response(exc.status_code, code, message)


def install_handlers(app: FastAPI) -> None:
    """Register the mapped handler plus FastAPI's validation and HTTP errors."""
    app.add_exception_handler(NamesrvError, _handle_mapped)
    app.add_exception_handler(RequestValidationError, _handle_validation)
    app.add_exception_handler(StarletteHTTPException, _handle_http)
