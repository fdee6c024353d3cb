"""OpenAPI descriptions of the hot routes, whose bodies FastAPI never parses."""

from __future__ import annotations

import re
from typing import Any

from store.codec import _FORBIDDEN  # the characters the store's properties encoding reserves

__all__ = ["PRODUCE_DOC", "PULL_DOC", "RESERVED_CHARS"]

RESERVED_CHARS = re.compile("[" + "".join(_FORBIDDEN) + "]")  # not allowed in keys, tags, properties
_NOT_RESERVED = "[^" + "".join(f"\\u{ord(c):04x}" for c in _FORBIDDEN) + "]"
_KEY: dict[str, Any] = {"type": "string", "pattern": f"^{_NOT_RESERVED}+$"}  # non-empty, no \x00-\x03
_TAGS: dict[str, Any] = {"type": "string", "pattern": f"^{_NOT_RESERVED}*$"}
_MESSAGE_FIELDS: dict[str, Any] = {
    "keys": {"anyOf": [{"type": "array", "items": _KEY}, _KEY],
             "description": "keys (or one key); the first picks the queue"},
    "tags": _TAGS,
    "properties": {"type": "object", "additionalProperties": _TAGS,
                   "propertyNames": {**_KEY, "not": {"enum": ["TAGS", "KEYS"]}}},
    "queue_id": {"type": "integer", "minimum": 0, "description": "explicit queue (else key hash / round robin)"},
    "delay_level": {"type": "integer", "minimum": 1,
                    "description": "deliver after [delay] levels[delay_level - 1] (higher levels are clamped)"},
}
_LATER = "also deliver_at_ms (epoch ms, at most [delay] max_delay_s ahead) instead of delay_level"


# null means "not given" for every optional field of a JSON message (wire.py reads them with .get)
_NULLABLE_FIELDS = {name: {"anyOf": [schema, {"type": "null"}]} for name, schema in _MESSAGE_FIELDS.items()}


def _message(title: str, body_field: str, body_schema: dict[str, Any]) -> dict[str, Any]:
    other = "body_base64" if body_field == "body" else "body"
    return {"title": title, "type": "object", "required": [body_field], "not": {"required": [other]},
            "properties": {body_field: body_schema, **_NULLABLE_FIELDS}, "description": _LATER,
            "additionalProperties": False}  # an unknown field is a 400 naming it (wire.py)


# A message has a text body or a binary one, never both (broker_api/http/wire.py).
_MESSAGE_SCHEMA: dict[str, Any] = {"oneOf": [
    _message("TextMessage", "body", {"type": "string", "description": "UTF-8 text body"}),
    _message("BinaryMessage", "body_base64", {
        "type": "string", "description": "binary body, base64",
        "pattern": "^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"}),
]}

_ARROW_PRODUCE = (
    "Arrow IPC stream: column `body` (binary or string) and optional `keys` (list<string> or string), "
    "`tags` (string), `properties` (map<string,string>), `queue_id` (int)."
)

_TOPIC = {"name": "topic", "in": "path", "required": True, "schema": {"type": "string"}}
_QUEUE = {"name": "queue_id", "in": "path", "required": True, "schema": {"type": "integer", "minimum": 0}}

PRODUCE_DOC: dict[str, Any] = {
    "parameters": [
        _TOPIC,
        {"name": "transactional", "in": "query", "schema": {"type": "boolean"},
         "description": "store half messages (non-JSON bodies; JSON uses the body field)"},
        {"name": "transaction_id", "in": "query", "schema": {"type": "string"},
         "description": "add half messages to this open transaction"},
        {"name": "key", "in": "query", "schema": {"type": "array", "items": _TAGS},
         "description": "keys of a raw octet-stream message"},
        {"name": "tags", "in": "query", "schema": _TAGS, "description": "tags of a raw message"},
        {"name": "queue_id", "in": "query", "schema": {"type": "integer", "minimum": 0},
         "description": "queue of a raw message"},
        {"name": "delay_level", "in": "query", "schema": {"type": "integer", "minimum": 1},
         "description": "delay level of a raw message"},
        {"name": "check_url", "in": "query", "schema": {"type": "string", "pattern": "^https?://[^/?#\\s]+"},
         "description": "transaction check-back URL (transactional produce)"},
        {"name": "answer", "in": "query", "schema": {"title": "AnswerForm", "type": "string", "enum": ["full", "summary"],
                                                     "default": "full"},
         "description": "full: one result per message; summary: count and first/last offset per queue "
                        "(no msg ids; a transactional produce always answers in full)"},
    ],
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "required": ["messages"],
                    "additionalProperties": False,
                    "properties": {
                        "messages": {"type": "array", "items": _MESSAGE_SCHEMA, "minItems": 1},
                        "transactional": {"type": "boolean", "default": False},
                        "check_url": {"anyOf": [{"type": "string", "pattern": "^https?://[^/?#\\s]+"}, {"type": "null"}],
                                      "description": "transaction check-back URL"},
                    },
                },
                "example": {"messages": [{"body": "hello", "keys": ["order-1"], "tags": "TagA"}]},
            },
            "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
            "application/vnd.apache.arrow.stream": {
                "schema": {"type": "string", "format": "binary", "description": _ARROW_PRODUCE}
            },
        },
    },
    "responses": {
        "200": {
            "description": "where each message landed, in request order",
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ProduceAnswer"}, "example": {
                "results": [{"msg_id": "7F00000100002A9F0000000000000000", "queue_id": 1, "queue_offset": 0}]
            }}},
        },
        "413": {"description": "message_too_large / batch_too_large"},
        "503": {"description": "broker_busy (fast failure), with Retry-After"},
    },
}

PULL_DOC: dict[str, Any] = {
    "parameters": [
        _TOPIC,
        _QUEUE,
        {"name": "offset", "in": "query", "required": True, "schema": {"type": "integer", "minimum": 0}},
        {"name": "max_messages", "in": "query", "schema": {"type": "integer", "minimum": 1, "default": 32},
         "description": "1 to [limits] max_pull_messages_json (an Arrow pull: max_pull_messages_arrow); "
                        "outside is 400"},
        {"name": "wait_ms", "in": "query", "schema": {"type": "integer", "minimum": 0, "default": 0},
         "description": "long poll: hold the request up to this long when nothing is new; at most [limits] "
                        "max_wait_ms, more is 400"},
        {"name": "tags", "in": "query", "schema": {"type": "string"}, "description": "tag filter, e.g. A||B"},
        {"name": "filter", "in": "query", "schema": {"type": "string"},
         "description": "SQL92 property filter, e.g. a > 5 AND region IN ('eu','us'); 400 bad_filter names "
                        "the position of an error"},
        {"name": "group", "in": "query", "schema": {"type": "string"},
         "description": "consumer group (checked against slow-consumer protection)"},
        {"name": "fields", "in": "query", "schema": {"type": "string"},
         "description": "Arrow pages only: a comma-separated subset of the page's columns, sent in schema "
                        "order (e.g. offset,keys,body,born_timestamp); a name that is not a column is 400"},
    ],
    "responses": {
        "200": {
            "description": "a page of messages; Arrow IPC with Accept: application/vnd.apache.arrow.stream "
            "(page metadata then in X-Sparkmq-Status / -Next-Offset / -Min-Offset / -Max-Offset headers)",
            "content": {
                "application/json": {"schema": {"$ref": "#/components/schemas/PullPage"}, "example": {
                    "status": "FOUND", "next_offset": 1, "min_offset": 0, "max_offset": 1,
                    "messages": [{"msg_id": "7F00000100002A9F0000000000000000", "topic": "t", "queue_id": 0,
                                  "offset": 0, "keys": [], "tags": None, "properties": {},
                                  "born_timestamp": 0, "store_timestamp": 0, "body": "hello"}],
                }},
                "application/vnd.apache.arrow.stream": {"schema": {"type": "string", "format": "binary"}},
            },
        },
        "403": {"description": "group_disabled / permission_denied"},
        "404": {"description": "topic_not_found / queue_not_found"},
    },
}
