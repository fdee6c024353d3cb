"""The NameServer's error hierarchy and its one HTTP error table.

Every error answer has the body ``{"error": "<code>", "message": "..."}``.
:data:`ERROR_TABLE` maps classes to (status, code); the app registers one
handler that walks an exception's MRO through the table.
"""

from __future__ import annotations

from ..errors import ErrorTable

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
