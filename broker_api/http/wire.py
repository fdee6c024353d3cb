"""Wire formats of the hot paths: produce bodies in, pull pages out.

Produce (``POST /v1/topics/{topic}/messages``) takes one of

* JSON ``{"messages": [{"body": "text" | "body_base64": "...", "keys": [..],
  "tags": "t", "properties": {..}, "queue_id": 0, "delay_level": 3 | "deliver_at_ms": MS}],
  "transactional": false, "check_url": "http://..."}``
* ``application/octet-stream``: the raw body is one message (keys/tags/delay_level/deliver_at_ms
  in the query)
* ``application/vnd.apache.arrow.stream``: an Arrow IPC stream with a ``body``
  column (binary or string) and optional ``keys`` (list<string> or string),
  ``tags`` (string), ``properties`` (map<string,string>), ``queue_id`` (int),
  ``delay_level`` (int), ``deliver_at_ms`` (int).

A pull page is JSON, or with ``Accept: application/vnd.apache.arrow.stream``
one Arrow IPC stream with :data:`PULL_SCHEMA` (schema always present).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson
import pyarrow as pa

from store import DamagedRecord, DispatchBatch, StoredMessage, decode_properties

from ..errors import (
    BadJsonError,
    BadMessageError,
    BadRequestError,
    BatchTooLargeError,
    UnsupportedMediaTypeError,
)

__all__ = [
    "ARROW_STREAM",
    "JSON_TYPES",
    "PULL_SCHEMA",
    "Draft",
    "batch_to_arrow",
    "batch_to_json",
    "check_count",
    "damaged_header",
    "damaged_to_json",
    "load_json_produce",
    "media_type",
    "message_to_json",
    "parse_arrow_produce",
    "parse_json_object",
    "parse_json_produce",
    "plain_json_bodies",
    "pull_schema",
    "read_arrow",
]

ARROW_STREAM = "application/vnd.apache.arrow.stream"
# Content types whose body is read as JSON (produce and POST /v1/topics alike): application/json, and
# no type at all; a form or text body is 415 (curl -d needs -H 'Content-Type: application/json').
JSON_TYPES = ("application/json", "")

_TS = pa.timestamp("ms", tz="UTC")
_PROPS = pa.map_(pa.string(), pa.string())
PULL_SCHEMA = pa.schema(
    [
        pa.field("topic", pa.string(), nullable=False),
        pa.field("queue_id", pa.int32(), nullable=False),
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("msg_id", pa.string(), nullable=False),
        pa.field("keys", pa.list_(pa.string())),
        pa.field("tags", pa.string()),
        pa.field("properties", _PROPS),
        pa.field("body", pa.binary()),
        pa.field("born_timestamp", _TS),
        pa.field("store_timestamp", _TS),
    ]
)


@dataclass(slots=True)
class Draft:
    """One message of a produce request, before a queue is chosen."""

    body: bytes
    keys: tuple[str, ...] = ()
    tags: str | None = None
    properties: Mapping[str, str] | None = None
    queue_id: int | None = None
    delay_level: int | None = None  # see broker_api/delay.py
    deliver_at_ms: int | None = None


def media_type(content_type: str | None) -> str:
    """``Content-Type`` without parameters, lower case ("" when absent)."""
    return (content_type or "").split(";")[0].strip().lower()


def parse_json_object(raw: bytes, content_type: str | None, example: str) -> dict[str, Any]:
    """A JSON object request body; ``example`` shows the expected shape in error messages."""
    ctype = media_type(content_type)
    if ctype not in JSON_TYPES:
        raise UnsupportedMediaTypeError(f"content type {ctype!r} is not accepted; send Content-Type: "
                                        f"application/json with a body like {example}")
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise BadJsonError(f"request body is not valid JSON ({exc}); send {example}") from exc
    if not isinstance(doc, dict):
        raise BadRequestError(f"request body must be a JSON object like {example}")
    return doc


_MESSAGE_FIELDS = ("body", "body_base64", "keys", "tags", "properties", "queue_id", "delay_level", "deliver_at_ms")
_PRODUCE_FIELDS = ("messages", "transactional", "check_url")


def _unknown_fields(given: Any, valid: tuple[str, ...], where: str) -> str | None:
    """A message naming the fields of ``given`` that are not in ``valid`` (a typo must not be ignored)."""
    unknown = sorted(k for k in given if k not in valid)
    if not unknown:
        return None
    return f"{where} has unknown field{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; " \
           f"valid: {', '.join(valid)}"


def _json_body(item: dict[str, Any], i: int) -> bytes:
    if "body" in item and "body_base64" in item:
        raise BadMessageError(f"messages[{i}] has both 'body' and 'body_base64'; give one")
    if "body" in item:
        body = item["body"]
        if not isinstance(body, str):
            raise BadMessageError(f"messages[{i}].body must be a string; use body_base64 for bytes")
        return body.encode("utf-8")
    if "body_base64" in item:
        try:
            return base64.b64decode(item["body_base64"], validate=True)
        except (binascii.Error, TypeError, ValueError) as exc:
            raise BadMessageError(f"messages[{i}].body_base64 is not valid base64") from exc
    raise BadMessageError(f"messages[{i}] needs a 'body' (text) or 'body_base64' field")


def _json_draft(item: Any, i: int) -> Draft:
    if not isinstance(item, dict):
        raise BadMessageError(f"messages[{i}] must be an object like {{\"body\": \"hello\"}}")
    if (unknown := _unknown_fields(item, _MESSAGE_FIELDS, f"messages[{i}]")) is not None:
        raise BadMessageError(unknown)
    keys = item.get("keys")
    if keys is None:
        keys = ()
    elif isinstance(keys, str):
        keys = (keys,)
    elif not (isinstance(keys, list) and all(isinstance(k, str) for k in keys)):
        raise BadMessageError(f"messages[{i}].keys must be a string or a list of strings")
    tags = item.get("tags")
    if tags is not None and not isinstance(tags, str):
        raise BadMessageError(f"messages[{i}].tags must be a string")
    props = item.get("properties")
    if props is not None and not (
        isinstance(props, dict) and all(isinstance(v, str) for v in props.values())
    ):
        raise BadMessageError(f"messages[{i}].properties must be an object of string values")
    qid = _integral(item.get("queue_id"))
    if qid is not None and (not isinstance(qid, int) or isinstance(qid, bool) or qid < 0):
        raise BadMessageError(f"messages[{i}].queue_id must be a non-negative integer")
    delay, at = _int_field(item, "delay_level", i), _int_field(item, "deliver_at_ms", i)
    return Draft(_json_body(item, i), tuple(keys), tags, props, qid, delay, at)


def _integral(value: Any) -> Any:
    """JSON's integer 184.0 (a float to the parser) as 184; anything else unchanged."""
    return int(value) if type(value) is float and value.is_integer() else value


def _int_field(item: dict[str, Any], name: str, i: int) -> int | None:
    value = _integral(item.get(name))
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
        raise BadMessageError(f"messages[{i}].{name} must be a non-negative integer")
    return value


def parse_json_produce(raw: bytes, max_messages: int,
                       extras: dict[str, Any] | None = None) -> tuple[list[Draft], bool]:
    """Drafts and the ``transactional`` flag of a JSON produce body; ``extras`` receives ``check_url``
    (and may hold the body already parsed, under ``json_doc``)."""
    doc = extras.pop("json_doc", None) if extras is not None else None
    if doc is None:
        doc = load_json_produce(raw)
    if not isinstance(doc, dict) or not isinstance(doc.get("messages"), list):
        raise BadRequestError('request body must be an object {"messages": [{"body": "..."}]}')
    if (unknown := _unknown_fields(doc, _PRODUCE_FIELDS, "the request body")) is not None:
        raise BadRequestError(unknown)
    items = doc["messages"]
    check_count(len(items), max_messages)
    transactional = doc.get("transactional", False)
    if not isinstance(transactional, bool):
        raise BadRequestError("'transactional' must be true or false")
    check_url = doc.get("check_url")
    if check_url is not None and not (isinstance(check_url, str) and check_url.startswith(("http://", "https://"))):
        raise BadRequestError("'check_url' must be an http:// or https:// URL")
    if extras is not None and check_url:
        extras["check_url"] = check_url
    drafts = []
    for i, item in enumerate(items):
        # Fast path: {"body": "text"} alone, the common high-rate shape.
        if type(item) is dict and len(item) == 1 and type(body := item.get("body")) is str:
            drafts.append(Draft(body.encode("utf-8")))
        else:
            drafts.append(_json_draft(item, i))
    return drafts, transactional


def load_json_produce(raw: bytes) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise BadJsonError(f"request body is not valid JSON ({exc}); send {{\"messages\": [...]}}") from exc


def plain_json_bodies(doc: Any, max_messages: int) -> list[str] | None:
    """The bodies of ``{"messages": [{"body": "text"}, ...]}`` with nothing else (no keys, tags,
    options): such a batch can be written by columns.  None for any other shape."""
    if type(doc) is not dict or len(doc) != 1 or type(items := doc.get("messages")) is not list:
        return None
    check_count(len(items), max_messages)
    bodies = []
    for item in items:
        if type(item) is not dict or len(item) != 1 or type(body := item.get("body")) is not str:
            return None
        bodies.append(body)
    return bodies


def check_count(n: int, max_messages: int) -> None:
    if n == 0:
        raise BadRequestError("a produce request needs at least one message")
    if n > max_messages:
        raise BatchTooLargeError(
            f"{n} messages in one request; the limit is {max_messages} ([limits] max_batch_messages), split the batch"
        )


def _column(table: pa.Table, name: str) -> list[Any] | None:
    if name not in table.column_names:
        return None
    return table.column(name).to_pylist()


def read_arrow(raw: bytes) -> pa.Table:
    """An Arrow IPC stream body, its non-binary columns checked whole (a ``keys`` or ``tags`` string
    that is not UTF-8 is 400, not an error deep in the parse)."""
    try:
        table = pa.ipc.open_stream(pa.py_buffer(raw)).read_all()
        for name, column in zip(table.column_names, table.columns):
            if not (pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type)):
                try:
                    column.validate(full=True)
                except pa.ArrowInvalid as exc:
                    raise BadRequestError(f"Arrow column {name!r} is invalid ({exc}); send valid UTF-8 "
                                          "strings (or a binary column)") from exc
    except (pa.ArrowInvalid, OSError) as exc:
        raise BadRequestError(f"request body is not an Arrow IPC stream ({exc})") from exc
    return table


def parse_arrow_produce(raw: bytes, max_messages: int) -> list[Draft]:
    """Drafts from an Arrow IPC stream (see module docstring)."""
    table = read_arrow(raw)
    if "body" not in table.column_names:
        raise BadRequestError("the Arrow stream needs a 'body' column (binary or string)")
    check_count(table.num_rows, max_messages)
    bodies = table.column("body").to_pylist()
    keys = _column(table, "keys")
    tags = _column(table, "tags")
    props = _column(table, "properties")
    qids = _column(table, "queue_id")
    delays, ats = _column(table, "delay_level"), _column(table, "deliver_at_ms")
    drafts = []
    for i, body in enumerate(bodies):
        if body is None:
            raise BadMessageError(f"row {i} has a null body")
        k = keys[i] if keys is not None else None
        drafts.append(
            Draft(
                body.encode("utf-8") if isinstance(body, str) else body,
                (k,) if isinstance(k, str) else tuple(k or ()),
                tags[i] if tags is not None else None,
                dict(props[i]) if props is not None and props[i] is not None else None,
                qids[i] if qids is not None else None,
                delays[i] if delays is not None else None,
                ats[i] if ats is not None else None,
            )
        )
    return drafts


def _body_json(out: dict[str, Any], body: bytes) -> dict[str, Any]:
    try:
        out["body"] = body.decode("utf-8")
    except UnicodeDecodeError:
        out["body_base64"] = base64.b64encode(body).decode("ascii")
    return out


def batch_to_json(b: DispatchBatch) -> list[dict[str, Any]]:
    """The JSON form of a columnar page (same fields as :func:`message_to_json`)."""
    rows = zip(b.msg_ids, b.topics, b.queue_ids.tolist(), b.queue_offsets.tolist(), b.keys, b.tags,
               b.properties_raw, b.born_timestamps.tolist(), b.store_timestamps.tolist(), b.bodies)
    return [
        _body_json({"msg_id": mid, "topic": topic, "queue_id": qid, "offset": off, "keys": list(keys), "tags": tags,
                    "properties": decode_properties(raw) if raw else {}, "born_timestamp": born,
                    "store_timestamp": stored}, body)
        for mid, topic, qid, off, keys, tags, raw, born, stored, body in rows
    ]


def message_to_json(m: StoredMessage) -> dict[str, Any]:
    out: dict[str, Any] = {
        "msg_id": m.msg_id,
        "topic": m.topic,
        "queue_id": m.queue_id,
        "offset": m.queue_offset,
        "keys": list(m.keys),
        "tags": m.tags,
        "properties": m.properties,
        "born_timestamp": m.born_timestamp,
        "store_timestamp": m.store_timestamp,
    }
    return _body_json(out, m.body)


def _raw_properties_array(raws: list[bytes]) -> pa.Array:
    """map<string,string> from the codec's ``name\\x01value\\x02`` blobs (most are empty)."""
    offsets: list[int] = [0]
    names: list[str] = []
    values: list[str] = []
    for raw in raws:
        if raw:
            props = decode_properties(raw)
            names.extend(props.keys())
            values.extend(props.values())
        offsets.append(len(names))
    return pa.MapArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(names, pa.string()),
                                   pa.array(values, pa.string()), type=_PROPS)


def batch_to_arrow(batch: DispatchBatch, fields: frozenset[str] | None = None) -> bytes:
    """One Arrow IPC stream with :data:`PULL_SCHEMA` from a columnar page (no per-row objects)."""
    arrays = [
        pa.array(batch.topics, pa.string()),
        pa.array(batch.queue_ids, pa.int32()),
        pa.array(batch.queue_offsets, pa.int64()),
        pa.array(batch.msg_ids, pa.string()),
        pa.array(batch.keys, pa.list_(pa.string())),
        pa.array(batch.tags, pa.string()),
        _raw_properties_array(batch.properties_raw),
        pa.array(batch.bodies, pa.binary()),
        pa.array(batch.born_timestamps, pa.int64()).cast(_TS),
        pa.array(batch.store_timestamps, pa.int64()).cast(_TS),
    ]
    schema = pull_schema(fields)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema) as writer:
        if len(batch):
            writer.write_batch(pa.RecordBatch.from_arrays(arrays, schema=PULL_SCHEMA).select(schema.names))
    return sink.getvalue().to_pybytes()


def pull_schema(fields: frozenset[str] | None = None) -> pa.Schema:
    """:data:`PULL_SCHEMA`, or its ``fields`` in schema order (a pull's ``fields`` parameter)."""
    if fields is None:
        return PULL_SCHEMA
    return pa.schema([f for f in PULL_SCHEMA if f.name in fields])


def damaged_to_json(d: DamagedRecord) -> dict[str, Any]:
    """The ``damaged`` object of a CORRUPT_MESSAGE page."""
    return {"topic": d.topic, "queue_id": d.queue_id, "offset": d.queue_offset, "commitlog_offset": d.phy_offset,
            "reason": d.reason, "message": d.describe()}


def damaged_header(d: DamagedRecord) -> str:
    """:func:`damaged_to_json` as an ASCII header value (Arrow pages)."""
    return json.dumps(damaged_to_json(d), separators=(",", ":"))
