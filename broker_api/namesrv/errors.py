"""The NameServer's error hierarchy and its one HTTP error table.

Every error answer has the body ``{"error": "<code>", "message": "..."}``.
:data:`ERROR_TABLE` maps classes to (status, code); :func:`install_handlers`
registers one handler that walks an exception's MRO through the table.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.responses import Response

from ..http_errors import (
    ErrorTable,
    error_response,
    install_common_handlers,
    lookup,
)

if TYPE_CHECKING:  # FastAPI itself is imported only by the app, so clients start fast
    from fastapi import FastAPI, Request

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


ERROR_TABLE: ErrorTable = {
    BadCrcError: (400, "bad_crc"),
    BadRegistrationError: (400, "bad_request"),
    NamesrvAddressError: (400, "bad_address"),
    TopicRouteNotFoundError: (404, "topic_not_found"),
    BrokerNotRegisteredError: (404, "broker_not_found"),
    NamesrvRejectedError: (502, "namesrv_rejected"),
    NamesrvUnavailableError: (503, "namesrv_unavailable"),
    NamesrvError: (500, "namesrv_error"),
}

async def _handle_mapped(request: Request, exc: Exception) -> Response:
    status, code = lookup(ERROR_TABLE, exc)
    return error_response(status, code, str(exc) or type(exc).__name__)


def install_handlers(app: FastAPI) -> None:
    """Register the mapped handler plus FastAPI's validation and HTTP errors."""
    app.add_exception_handler(NamesrvError, _handle_mapped)
    install_common_handlers(app, "NameServer API")
