"""The broker's error hierarchy and the one table that maps errors to HTTP.

Every error answer has the body ``{"error": "<code>", "message": "<what was
wrong and what to do>"}``.  :data:`ERROR_TABLE` maps exception classes (the
broker's own, the store's and the table topics') to a status and a code;
:func:`broker_api.http.errors.install_handlers` registers one handler that
walks an exception's MRO through the table.  This module imports no web
framework, so the Python client shares it.
"""

from __future__ import annotations

import store
from connectors.errors import SchemaChangeError, TableError, TableSpecError

__all__ = [
    "BrokerError",
    "BadRequestError",
    "BadJsonError",
    "BadTopicNameError",
    "BadOffsetError",
    "BadQueueIdError",
    "BadMessageError",
    "UnsupportedMediaTypeError",
    "TopicNotFoundError",
    "QueueNotFoundError",
    "TopicExistsError",
    "GroupNotFoundError",
    "PermissionDeniedError",
    "AccessDeniedError",
    "UnauthenticatedError",
    "GroupDisabledError",
    "SlaveReadOnlyError",
    "BatchTooLargeError",
    "BadFilterError",
    "BadReceiptError",
    "BadQueryError",
    "NotTransactionOwnerError",
    "TransactionNotFoundError",
    "TransactionStateError",
    "BrokerBusyError",
    "NotReadyError",
    "TablesDisabledError",
    "TableNotFoundError",
    "ERROR_TABLE",
    "ErrorTable",
    "NamesrvError",
    "NamesrvAddressError",
    "BadRegistrationError",
    "BadCrcError",
    "TopicRouteNotFoundError",
    "BrokerNotRegisteredError",
    "BrokerNameOwnedError",
    "NamesrvRejectedError",
    "NamesrvUnavailableError",
    "ControllerFencedError",
    "ControllerGroupNotFoundError",
    "ControllerDisabledError",
    "ControllerUnavailableError",
    "MasterFencedError",
]

ErrorTable = dict[type[BaseException], tuple[int, str]]


class BrokerError(Exception):
    """Raised when the broker cannot serve a request as asked."""

    def __init__(self, message: str, *, retry_after_s: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after_s = retry_after_s


class BadRequestError(BrokerError):
    """Raised when a request is malformed in a way no narrower class covers."""


class BadJsonError(BadRequestError):
    """Raised when a request body is not valid JSON."""


class BadTopicNameError(BadRequestError):
    """Raised when a topic name is empty, too long, reserved or has bad characters."""


class BadOffsetError(BadRequestError):
    """Raised when an offset or queue id parameter is not a non-negative integer."""


class BadQueueIdError(BadRequestError):
    """Raised when a queue id parameter is not a non-negative integer."""


class BadMessageError(BadRequestError):
    """Raised when one message of a produce request is malformed."""


class BadFilterError(BadRequestError):
    """Raised when a filter expression does not parse; ``position`` is where (0-based)."""

    def __init__(self, message: str, *, position: int = 0) -> None:
        super().__init__(message)
        self.position = position


class BadReceiptError(BadRequestError):
    """Raised when a POP receipt is malformed or belongs to another group."""


class UnsupportedMediaTypeError(BrokerError):
    """Raised when a request body has a content type the route does not take."""


class TopicNotFoundError(BrokerError):
    """Raised when a topic does not exist (and may not be auto-created)."""


class QueueNotFoundError(BrokerError):
    """Raised when a queue id is outside the topic's queue range."""


class GroupNotFoundError(BrokerError):
    """Raised when a consumer group has never committed an offset."""


class TopicExistsError(BrokerError):
    """Raised when creating a topic that already exists with other settings."""


class PermissionDeniedError(BrokerError):
    """Raised when a topic's permission forbids the operation (perm r/w)."""


class AccessDeniedError(PermissionDeniedError):
    """Raised when the authenticated user's policy does not allow an action on a resource."""

    def __init__(self, message: str, *, resource: str = "", action: str = "") -> None:
        super().__init__(message)
        self.resource = resource
        self.action = action


class UnauthenticatedError(BrokerError):
    """Raised when a request carries no credentials, unknown ones or a bad signature."""


class GroupDisabledError(BrokerError):
    """Raised when a consumer group was disabled by slow-consumer protection."""


class SlaveReadOnlyError(BrokerError):
    """Raised when a slave is asked to write (produce, topics, offsets) or to serve reads it may not."""


class BatchTooLargeError(BrokerError):
    """Raised when a request carries more messages or bytes than allowed."""


class TransactionNotFoundError(BrokerError):
    """Raised when a transaction id is unknown (never opened or long forgotten)."""


class TransactionStateError(BrokerError):
    """Raised when a transaction cannot move to the asked state (e.g. commit after rollback)."""


class BrokerBusyError(BrokerError):
    """Raised when a request waited too long for the store or the store is busy."""


class NotReadyError(BrokerError):
    """Raised when the broker is starting or stopping and cannot serve yet."""


class MasterFencedError(BrokerError):
    """Raised when a controller-mode broker may not take writes: it is not (or no longer surely) the master."""


class TableNotFoundError(BrokerError):
    """Raised when a table action names a topic whose table mode is off."""


class TablesDisabledError(BrokerError):
    """Raised when a table is enabled or replayed on a broker that writes none ([tables] enabled = false)."""


# class -> (HTTP status, error code).  Looked up along the exception's MRO,
# so the most specific entry wins.
# The NameServer's errors: raised by the NameServer, its clients and the broker's registrar.


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


class BrokerNameOwnedError(NamesrvError):
    """Raised when a broker name or address that another cluster registered first is (un)registered."""


class NamesrvRejectedError(NamesrvError):
    """Raised when a NameServer answers a broker request with an error status."""


class ControllerFencedError(NamesrvError):
    """Raised when a controller request comes from a stale master or carries a stale in-sync set epoch."""


class ControllerGroupNotFoundError(NamesrvError):
    """Raised when a controller request names a broker name no replica registered."""


class ControllerDisabledError(NamesrvError):
    """Raised when a controller route is called on a NameServer started without --controller."""


class ControllerUnavailableError(NamesrvError):
    """Raised when the controller cannot act: its etcd has no quorum, or it stands by for another one."""


class NamesrvUnavailableError(NamesrvError):
    """Raised when no NameServer of a list answered a client request."""


ERROR_TABLE: ErrorTable = {
    BadJsonError: (400, "bad_json"),
    BadTopicNameError: (400, "bad_topic_name"),
    BadOffsetError: (400, "bad_offset"),
    BadQueueIdError: (400, "bad_queue_id"),
    BadMessageError: (400, "bad_message"),
    BadFilterError: (400, "bad_filter"),
    BadReceiptError: (400, "bad_receipt"),
    BadRequestError: (400, "bad_request"),
    UnsupportedMediaTypeError: (415, "unsupported_media_type"),
    TopicNotFoundError: (404, "topic_not_found"),
    QueueNotFoundError: (404, "queue_not_found"),
    GroupNotFoundError: (404, "group_not_found"),
    TopicExistsError: (409, "topic_exists"),
    PermissionDeniedError: (403, "permission_denied"),
    UnauthenticatedError: (401, "unauthenticated"),
    GroupDisabledError: (403, "group_disabled"),
    SlaveReadOnlyError: (403, "slave_read_only"),
    BatchTooLargeError: (413, "batch_too_large"),
    TransactionNotFoundError: (404, "transaction_not_found"),
    TransactionStateError: (409, "transaction_conflict"),
    BrokerBusyError: (503, "broker_busy"),
    NotReadyError: (503, "not_ready"),
    TablesDisabledError: (503, "tables_disabled"),
    MasterFencedError: (503, "master_fenced"),
    TableNotFoundError: (404, "table_not_found"),
    BrokerError: (500, "broker_error"),
    # table topics (connectors.tables): bad settings, a refused schema change, a failing table
    TableSpecError: (400, "bad_table"),
    SchemaChangeError: (409, "schema_change_refused"),
    TableError: (500, "table_error"),
    store.MessageTooLargeError: (413, "message_too_large"),
    store.InvalidMessageError: (400, "bad_message"),
    store.InvalidOffsetError: (400, "bad_offset"),
    store.MessageNotFoundError: (404, "message_not_found"),
    store.DiskFullError: (507, "disk_full"),
    store.RemoteReadError: (502, "remote_read_failed"),
    store.StoreClosedError: (503, "store_closed"),
    store.CorruptRecordError: (500, "corrupt_record"),
    store.StoreError: (500, "store_error"),
}


class BadQueryError(BadRequestError):
    """Raised when a query string repeats a parameter or names one the route does not take."""


class NotTransactionOwnerError(AccessDeniedError):
    """Raised when a user reads, stages into or ends a transaction another user opened."""
