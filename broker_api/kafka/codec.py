"""Kafka request and response framing over Aiven's ``kio`` codecs (no socket I/O here).

A frame on the wire::

    +0  int32  size          bytes that follow
    +4  ...    header        request header v1 (int16 api_key, int16 api_version, int32 correlation_id,
                             nullable string client_id) or v2 (v1 + tagged fields) when the API version
                             is flexible; ApiVersions answers with response header v0 whatever it is
    ...        payload       the API's request or response body, encoded by ``kio``

``kio`` carries one frozen dataclass per API version, generated from Kafka's JSON message specs.
:func:`build` makes such a dataclass from plain dicts for whichever version the client asked,
leaving out fields the version lacks, so handlers are written once for every version.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import functools
import io
import struct
import types
import typing
from dataclasses import dataclass, field
from typing import Any

from kio.index import KioIndexError, load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_reader, entity_writer

from ..errors import BadRequestError

__all__ = ["KafkaProtocolError", "Request", "ErrorCode", "API_VERSIONS", "API_VERSIONS_KEY", "build",
           "decode_request", "peek_header", "encode_request", "encode_response", "response_class", "millis", "SIZE"]

SIZE = struct.Struct(">i")
_PEEK = struct.Struct(">hhi")
API_VERSIONS_KEY = 18

# api key -> (advertised min, lowest version served, max). librdkafka turns features off unless an API
# advertises version 0, so each starts at 0 as Kafka 4.x does; versions below "served" are answered
# UNSUPPORTED_VERSION. Fetch stops at 12 and Produce at 9: later versions name topics by id.
API_VERSIONS: dict[int, tuple[int, int, int]] = {
    0: (0, 3, 9),      # Produce
    1: (0, 4, 12),     # Fetch
    2: (0, 1, 7),      # ListOffsets
    3: (0, 0, 12),     # Metadata
    8: (0, 2, 8),      # OffsetCommit
    9: (0, 1, 8),      # OffsetFetch
    10: (0, 0, 4),     # FindCoordinator
    11: (0, 0, 7),     # JoinGroup
    12: (0, 0, 4),     # Heartbeat
    13: (0, 0, 4),     # LeaveGroup
    14: (0, 0, 5),     # SyncGroup
    15: (0, 0, 5),     # DescribeGroups
    16: (0, 0, 4),     # ListGroups
    17: (0, 1, 1),     # SaslHandshake (v0's unframed tokens are not served)
    18: (0, 0, 3),     # ApiVersions
    19: (0, 2, 7),     # CreateTopics
    20: (0, 1, 6),     # DeleteTopics
    22: (0, 0, 4),     # InitProducerId
    23: (0, 2, 4),     # OffsetForLeaderEpoch
    32: (0, 1, 4),     # DescribeConfigs
    36: (0, 0, 2),     # SaslAuthenticate
    37: (0, 0, 3),     # CreatePartitions
    42: (0, 0, 2),     # DeleteGroups
    47: (0, 0, 0),     # OffsetDelete
    60: (0, 0, 1),     # DescribeCluster
    75: (0, 0, 0),     # DescribeTopicPartitions
}


class KafkaProtocolError(BadRequestError):
    """Raised when a Kafka frame cannot be decoded (malformed, truncated or of an unknown API)."""


@dataclass(frozen=True, slots=True)
class Request:
    """One decoded request: its header fields and the ``kio`` payload."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any
    session: dict[str, Any] = field(default_factory=dict)  # the connection's state (its SASL principal)


def peek_header(frame: bytes | memoryview) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id): the first 8 bytes, the same in every header version."""
    if len(frame) < _PEEK.size:
        raise KafkaProtocolError(f"a request of {len(frame)} bytes is shorter than a request header")
    key, version, correlation = _PEEK.unpack_from(frame, 0)
    return int(key), int(version), int(correlation)


def decode_request(frame: bytes | memoryview, session: dict[str, Any] | None = None) -> Request:
    """The request in ``frame`` (the bytes after the size prefix); KafkaProtocolError if it cannot be read."""
    key, version, _ = peek_header(frame)
    try:
        cls = _request_class(key, version)
    except KioIndexError as exc:
        raise KafkaProtocolError(f"no schema for api key {key} version {version}") from exc
    try:
        header, used = entity_reader(cls.__header_schema__)(frame, 0)
        body, _ = entity_reader(cls)(frame, used)
    except Exception as exc:  # kio raises plain errors on short or garbled input
        raise KafkaProtocolError(f"malformed request (api key {key} v{version}): {exc}") from exc
    return Request(key, version, header.correlation_id, header.client_id, body, {} if session is None else session)


@functools.lru_cache(maxsize=None)
def _request_class(api_key: int, version: int) -> type:
    return load_request_schema(api_key, version)


@functools.lru_cache(maxsize=None)
def response_class(api_key: int, version: int) -> type:
    return load_response_schema(api_key, version)


def encode_response(api_key: int, version: int, correlation_id: int, body: Any) -> bytes:
    """The whole response frame: size, header (v0 for ApiVersions and non-flexible versions), body."""
    out = io.BytesIO()
    out.write(b"\0\0\0\0")
    flexible = type(body).__flexible__ and api_key != API_VERSIONS_KEY
    header_cls = ResponseHeaderV1 if flexible else ResponseHeaderV0
    entity_writer(header_cls)(out, header_cls(correlation_id=correlation_id))
    entity_writer(type(body))(out, body)
    data = out.getbuffer()
    SIZE.pack_into(data, 0, len(data) - 4)
    return bytes(data)


def encode_request(api_key: int, version: int, correlation_id: int, body: Any, client_id: str = "t") -> bytes:
    """A request frame (tests and tools speak to the listener with it)."""
    cls = load_request_schema(api_key, version)
    out = io.BytesIO()
    header_cls = cls.__header_schema__
    header = header_cls(request_api_key=api_key, request_api_version=version, correlation_id=correlation_id,
                        client_id=client_id)
    entity_writer(header_cls)(out, header)
    entity_writer(cls)(out, body)
    return SIZE.pack(len(out.getvalue())) + out.getvalue()


# -- building kio dataclasses from dicts ------------------------------------------------------------


def build(cls: type, values: dict[str, Any]) -> Any:
    """An instance of the ``kio`` dataclass ``cls`` from ``values``: nested dicts become nested
    entities, ints become error codes and timedeltas where the field wants them; a field this
    version does not have is dropped, a missing one takes its default (or zero, empty, None)."""
    kwargs: dict[str, Any] = {}
    for name, convert, zero in _plan(cls):
        if name in values:
            kwargs[name] = convert(values[name])
        elif zero is not None:
            kwargs[name] = _zero(zero)
    return cls(**kwargs)


_Convert = typing.Callable[[Any], Any]


@functools.lru_cache(maxsize=None)
def _plan(cls: type) -> tuple[tuple[str, _Convert, Any], ...]:
    """Per field of ``cls``: its name, its value converter, and its type hint when it has no default."""
    hints = typing.get_type_hints(cls)
    return tuple((f.name, _converter(hints[f.name]), hints[f.name] if f.default is dataclasses.MISSING
                  and f.default_factory is dataclasses.MISSING else None) for f in dataclasses.fields(cls))


@functools.lru_cache(maxsize=None)
def _converter(hint: Any) -> _Convert:
    """A function turning a plain value into what a field of type ``hint`` holds (made once per type)."""
    nullable = type(None) in typing.get_args(hint)
    convert = _non_null(_strip_optional(hint))

    def run(value: Any) -> Any:
        if value is None:  # a version where the field is not nullable gets its zero
            return None if nullable else _zero(hint)
        return convert(value)
    return run


def _non_null(target: Any) -> _Convert:
    if typing.get_origin(target) is tuple:
        item = _converter(typing.get_args(target)[0])
        return lambda value: tuple(map(item, value))
    if isinstance(target, type):
        if dataclasses.is_dataclass(target):
            return lambda value: value if isinstance(value, target) else build(target, value)
        if issubclass(target, datetime.timedelta):
            return lambda value: value if isinstance(value, datetime.timedelta) else \
                datetime.timedelta(milliseconds=value)
        if issubclass(target, datetime.datetime):  # epoch milliseconds
            return lambda value: value if isinstance(value, datetime.datetime) else \
                datetime.datetime.fromtimestamp(value / 1000, datetime.timezone.utc)
        if issubclass(target, enum.Enum):
            return target
    return _same


def _same(value: Any) -> Any:
    return value


def _zero(hint: Any) -> Any:
    if type(None) in typing.get_args(hint):
        return None
    target = hint
    if typing.get_origin(target) is tuple:
        return ()
    if isinstance(target, type):
        if dataclasses.is_dataclass(target):
            return build(target, {})
        if issubclass(target, datetime.timedelta):
            return datetime.timedelta(0)
        if issubclass(target, enum.Enum):
            return target(0)
        if issubclass(target, bool):
            return False
        if issubclass(target, (int, float)):
            return 0
        if issubclass(target, str):
            return ""
        if issubclass(target, bytes):
            return b""
    return None


def _strip_optional(hint: Any) -> Any:
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        return rest[0]
    return hint


def millis(value: Any) -> int:
    """A ``kio`` timedelta field as milliseconds."""
    if isinstance(value, datetime.timedelta):
        return int(value.total_seconds() * 1000)
    return int(value)
