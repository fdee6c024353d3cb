"""The NameServer's one HTTP error table.

Every error answer has the body ``{"error": "<code>", "message": "..."}``.
:data:`ERROR_TABLE` maps classes to (status, code); the app registers one
handler that walks an exception's MRO through the table.
"""

from __future__ import annotations

from ..errors import (
    BadCrcError,
    BadRegistrationError,
    BrokerNameOwnedError,
    BrokerNotRegisteredError,
    ControllerDisabledError,
    ControllerFencedError,
    ControllerGroupNotFoundError,
    ControllerUnavailableError,
    ErrorTable,
    NamesrvAddressError,
    NamesrvError,
    NamesrvRejectedError,
    NamesrvUnavailableError,
    TopicRouteNotFoundError,
)

__all__ = ["ERROR_TABLE"]


ERROR_TABLE: ErrorTable = {
    BadCrcError: (400, "bad_crc"),
    BadRegistrationError: (400, "bad_request"),
    NamesrvAddressError: (400, "bad_address"),
    TopicRouteNotFoundError: (404, "topic_not_found"),
    BrokerNotRegisteredError: (404, "broker_not_found"),
    BrokerNameOwnedError: (409, "broker_name_owned"),
    ControllerFencedError: (409, "controller_fenced"),
    ControllerGroupNotFoundError: (404, "broker_not_found"),
    ControllerDisabledError: (404, "controller_disabled"),
    ControllerUnavailableError: (503, "controller_unavailable"),
    NamesrvRejectedError: (502, "namesrv_rejected"),
    NamesrvUnavailableError: (503, "namesrv_unavailable"),
    NamesrvError: (500, "namesrv_error"),
}
