"""The OpenAPI document as a contract: every status, one error model, the name rules as constraints.

FastAPI's generated document lists ``200`` and a ``422`` the broker never
answers.  :func:`install_contract` replaces ``app.openapi`` with a builder
that runs once (at the first ``GET /openapi.json``) and post-processes the
generated schema; nothing here runs per request.

- Operation ids are the handler names (``produce``, ``pull``,
  ``commit_offsets``), so a generated client reads well.
- Every error status an operation can answer is listed with the one
  ``Error`` model, whose ``error`` enum is built from :data:`ERROR_TABLE`
  and the few codes answered outside it (:data:`EXTRA_CODES`).
- Success answers point at the models of :mod:`broker_api.http.schemas`.
- Name rules, lengths and ranges come from the constants the code validates
  with (``topics.CLIENT_TOPIC_PATTERN``: no reserved name, ``GROUP_NAME_PATTERN``,
  ``pop_records.RECEIPT_PATTERN``, ``transactions.SINK_ID_PATTERN``).
- With ``[auth] enabled`` (and only then) the document has a bearer scheme
  and 401 on every protected operation: a broker without auth never answers
  401, and a client generated from it needs no token.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic.json_schema import models_json_schema

from connectors.tables.spec import MODES, WRITE_MODES

from ..errors import ERROR_TABLE
from ..model.pop_records import RECEIPT_PATTERN
from ..model.topics import CLIENT_TOPIC_PATTERN, GROUP_NAME_MAX, GROUP_NAME_PATTERN, GROUP_TOPIC_RULE, TOPIC_NAME_MAX
from .schemas import ANSWER_MODELS
from .transactions import SINK_ID_PATTERN

if TYPE_CHECKING:
    from fastapi import FastAPI
    from fastapi.routing import APIRoute

    from ..settings.broker import BrokerSettings

__all__ = [
    "EXTRA_CODES",
    "FILTER_FORMAT",
    "GROUP_SCHEMA",
    "TABLE_SCHEMA",
    "TOPIC_SCHEMA",
    "error_codes",
    "install_contract",
    "install_namesrv_contract",
    "operation_id",
]

# Codes answered outside ERROR_TABLE: routing (http/errors.py), SQL (http/sql.py), the last resort.
EXTRA_CODES = ("bad_request", "not_found", "method_not_allowed", "request_too_large", "bad_sql",
               "mirror_disabled", "sql_timeout", "internal_error")
FILTER_FORMAT = "sparkmq-filter"  # SQL92 property filter (broker_api/filters.py): a grammar, not a regex

# A topic in a path or a body: a client topic, or a group's %RETRY%/%DLQ% topic (pull reads those).
TOPIC_SCHEMA: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": 7 + GROUP_NAME_MAX,
                                "pattern": f"^(?:{CLIENT_TOPIC_PATTERN[1:-1]}|{GROUP_TOPIC_RULE})$",
                                "description": "1-127 of A-Z a-z 0-9 _ . - (not RMQ_SYS_*), or %RETRY%/%DLQ% + group"}
GROUP_SCHEMA: dict[str, Any] = {"type": "string", "pattern": GROUP_NAME_PATTERN, "minLength": 1,
                                "maxLength": GROUP_NAME_MAX}
_PARTITION_PATTERN = r"^(?:(?:day|hour)\(\s*[A-Za-z_][A-Za-z0-9_]*\s*\)|[A-Za-z_][A-Za-z0-9_]*)$"
_MSG_ID = {"type": "string", "pattern": "^[0-9A-Fa-f]{32}$", "description": "32 hex characters"}
_RECEIPT = {"type": "string", "pattern": RECEIPT_PATTERN}
# In a path or query only client topics are documented: a %RETRY% name there must be percent-encoded
# (%25RETRY%25g), which generic clients get wrong ("%03..." reads as an escape).
_CLIENT_TOPIC: dict[str, Any] = {"type": "string", "pattern": CLIENT_TOPIC_PATTERN, "minLength": 1,
                                 "maxLength": TOPIC_NAME_MAX}
_PARAMS: dict[str, dict[str, Any]] = {
    "topic": _CLIENT_TOPIC, "group": GROUP_SCHEMA, "msg_id": _MSG_ID,
    "sink_id": {"type": "string", "pattern": SINK_ID_PATTERN},
    "filter": {"type": "string", "format": FILTER_FORMAT},
}
# A topic's ``table`` in a request: the keys and value rules of connectors.tables.spec (the schema's own
# content, and which fields partition_by may name, are checked by the broker: 400 bad_table).
TABLE_SCHEMA: dict[str, Any] = {"type": "object", "additionalProperties": False, "properties": {
    "mode": {"enum": list(MODES)},
    "schema": {"anyOf": [{"type": "object"}, {"type": "string", "minLength": 1}, {"type": "null"}],
               "description": "JSON Schema object or Spark DDL string; required for mode typed"},
    "write_mode": {"enum": list(WRITE_MODES)},
    "partition_by": {"anyOf": [{"type": "string", "pattern": _PARTITION_PATTERN}, {"type": "null"}]},
    "target_lag_s": {"type": "number", "exclusiveMinimum": 0, "maximum": 3600}},
    "description": "only the keys given change (PUT); an unknown key is 400 bad_table"}
# (component, property) -> schema, for request bodies
_FIELDS: dict[tuple[str, str], dict[str, Any]] = {
    ("TopicCreate", "name"): TOPIC_SCHEMA,
    ("TopicCreate", "table"): {"anyOf": [TABLE_SCHEMA, {"type": "null"}]},
    ("TopicUpdate", "table"): TABLE_SCHEMA,
    ("OffsetCommit", "topic"): TOPIC_SCHEMA,
    ("OffsetCommit", "offsets"): {"type": "object", "propertyNames": {"pattern": "^[0-9]{1,9}$"},
                                  "additionalProperties": {"type": "integer", "minimum": 0}},
    ("PopRequest", "topic"): TOPIC_SCHEMA,
    ("PopRequest", "filter"): {"anyOf": [{"type": "string", "format": FILTER_FORMAT}, {"type": "null"}]},
    ("AckRequest", "receipts"): {"type": "array", "items": _RECEIPT, "minItems": 1, "maxItems": 10_000},
    ("InvisibleRequest", "receipt"): _RECEIPT,
    ("RetryRequest", "msg_id"): _MSG_ID,
    ("SqlRequest", "sql"): {"type": "string", "pattern": r"\S", "description": "one read-only statement"},
}
# Inline request bodies given a name in components (a generated client's type names): opid -> name
_BODY_NAMES = {"create_topic": "TopicCreate", "alter_topic": "TopicUpdate", "produce": "ProduceRequest"}
# Success answers by operation id: status -> (description, schema)
_ARRAY_OF = "array:"
_SUCCESS: dict[str, dict[str, tuple[str, str]]] = {
    "create_topic": {"201": ("created", "Topic"), "200": ("an identical topic already existed", "Topic")},
    "list_topics": {"200": ("client topics", _ARRAY_OF + "Topic")},
    "get_topic": {"200": ("the topic and its queues", "TopicDetail")},
    "alter_topic": {"200": ("the topic with its new table settings", "TopicAltered")},
    "list_tables": {"200": ("every table topic's status", "TablesAnswer")},
    "replay_dlq": {"200": ("dead letters moved to the table and left", "ReplayAnswer")},
    "delete_topic": {"200": ("deleted", "Deleted")},
    "list_queues": {"200": ("queue offsets", _ARRAY_OF + "QueueOffsets")},
    "offset_at": {"200": ("first offset at or after the time", "OffsetAnswer")},
    "query_by_key": {"200": ("messages with the key", "MessagesAnswer")},
    "get_message": {"200": ("the message", "PulledMessage")},
    "commit_offsets": {"200": ("committed", "OffsetCommitted")},
    "read_offsets": {"200": ("committed offsets", "GroupOffsets")},
    "healthz": {"200": ("alive", "Status")},
    "readyz": {"200": ("ready", "Status")},
}
_ALWAYS_OPEN = frozenset({"/healthz"})  # served without credentials, never refused for load
_NO_SLAVE_GUARD = frozenset({"/healthz", "/readyz", "/metrics", "/v1/broker", "/v1/admin/metadata", "/v1/sql"})
_REMOTE_READS = frozenset({"pull", "get_message", "query_by_key", "offset_at", "pop"})  # may read tiered segments
_CONFLICTS = frozenset({"create_topic", "alter_topic", "produce", "end_transaction", "sink_commit", "sink_abort"})
_STATUS_TEXT = {
    "400": "bad request: a malformed parameter or body (the error code says which)",
    "401": "unauthenticated: no credentials, unknown ones or a bad signature",
    "502": "namesrv_rejected (a NameServer refused the request) or remote_read_failed (a tiered segment is "
           "missing or damaged in the object store)",
    "403": "permission_denied (topic perm or ACL), group_disabled, or slave_read_only on a slave",
    "404": "the topic, queue, group, message, transaction or route does not exist",
    "409": "topic_exists with other settings, schema_change_refused (names the field), or transaction_conflict",
    "413": "message_too_large / batch_too_large / request_too_large",
    "415": "unsupported_media_type",
    "500": "internal_error / corrupt_record / store_error / table_error: see the broker log",
    "503": "broker_busy (with Retry-After), not_ready, store_closed, mirror_disabled or tables_disabled",
    "504": "sql_timeout",
    "507": "disk_full: free disk space or run retention",
}


def operation_id(route: APIRoute) -> str:
    """The handler's name: ``produce``, ``pull``, ``commit_offsets``."""
    return route.name


def error_codes() -> list[str]:
    """Every ``error`` code the broker answers, sorted."""
    return sorted({code for _, code in ERROR_TABLE.values()} | set(EXTRA_CODES))


def install_contract(app: FastAPI, settings: BrokerSettings) -> None:
    """Make ``app.openapi()`` return the finished document (built once, then cached)."""
    from fastapi.openapi.utils import get_openapi

    def build() -> dict[str, Any]:
        if app.openapi_schema is None:
            doc = get_openapi(title=app.title, version=app.version, description=app.description,
                              routes=app.routes, tags=app.openapi_tags)
            doc = _param_limits(finish(doc, settings.auth.enabled, _limits(settings)), settings)
            app.openapi_schema = _settings_rules(doc, settings)
        return app.openapi_schema

    app.openapi = build  # type: ignore[method-assign]


def _limits(settings: BrokerSettings) -> dict[tuple[str, str], dict[str, Any]]:
    """Bounds this broker's settings put on body fields (the document describes the running broker)."""
    top = {"maximum": settings.pop.max_invisible_ms}
    return {("PopRequest", "invisible_ms"): top, ("InvisibleRequest", "invisible_ms"): top,
            ("PopRequest", "wait_ms"): {"maximum": settings.limits.max_wait_ms}}


def _param_limits(doc: dict[str, Any], settings: BrokerSettings) -> dict[str, Any]:
    """A pull's max_messages (JSON cap; an Arrow pull may ask up to its own cap) and wait_ms bounds."""
    limits = settings.limits
    bounds = {"max_messages": {"minimum": 1, "maximum": limits.max_pull_messages_json},
              "wait_ms": {"minimum": 0, "maximum": limits.max_wait_ms}}
    op = doc.get("paths", {}).get("/v1/topics/{topic}/queues/{queue_id}/messages", {}).get("get", {})
    for param in op.get("parameters", []):
        if param["name"] in bounds:
            param["schema"] = {**param["schema"], **bounds[param["name"]]}
            param["schema"]["default"] = min(param["schema"].get("default", 0), bounds[param["name"]]["maximum"])
    return doc


_CONTROL = ("/readyz", "/metrics", "/v1/broker")
# [transactions] check_url_allow = "loopback" (the default): the check_url hosts the broker accepts
_LOOPBACK_URL = r"^https?://(?:localhost|127\.0\.0\.1|\[::1\])(?::[1-9][0-9]{0,3})?(?:/[^\s]*)?$"


def _settings_rules(doc: dict[str, Any], settings: BrokerSettings) -> dict[str, Any]:
    """Open control routes (``[auth] control_open``) carry no security; the default check-back allowlist."""
    if settings.auth.enabled and settings.auth.control_open:
        for path in _CONTROL:
            for op in doc.get("paths", {}).get(path, {}).values():
                op.pop("security", None)
                op.get("responses", {}).pop("401", None)
    if settings.transactions.check_url_allow.strip().lower() == "loopback":
        produce = doc.get("paths", {}).get("/v1/topics/{topic}/messages", {}).get("post", {})
        for param in produce.get("parameters", []):
            if param["name"] == "check_url":
                param["schema"]["pattern"] = _LOOPBACK_URL
        body = doc.get("components", {}).get("schemas", {}).get("ProduceRequest", {}).get("properties", {})
        for choice in body.get("check_url", {}).get("anyOf", []):
            if "pattern" in choice:
                choice["pattern"] = _LOOPBACK_URL
    return doc


def install_namesrv_contract(app: FastAPI, codes: list[str], auth: bool) -> None:
    """The NameServer's document to the same rules: handler-named ids, its own error codes, every status."""
    from fastapi.openapi.utils import get_openapi

    def build() -> dict[str, Any]:
        if app.openapi_schema is None:
            doc = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
            schemas = doc.setdefault("components", {}).setdefault("schemas", {})
            for name in ("HTTPValidationError", "ValidationError"):
                schemas.pop(name, None)
            schemas["Error"] = error_schema(sorted(set(codes) | {"bad_request", "bad_json", "not_found",
                                                                  "method_not_allowed", "internal_error"}))
            if auth:
                doc["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
            for path, item in doc.get("paths", {}).items():
                for op in item.values():
                    _constrain_params(op)
                    statuses = {"500"} | ({"400"} if op.get("parameters") or "requestBody" in op else set())
                    controller = path.startswith("/v1/controller")  # 404 controller_disabled, 409 fenced
                    if "{" in path or "register" in path or controller:
                        statuses.add("404")
                    if controller:  # 503 controller_unavailable: a standby, or etcd without quorum
                        statuses |= {"409", "503"} if "requestBody" in op else {"503"}
                    if auth and path not in _ALWAYS_OPEN:
                        statuses |= {"401", "403"}
                        op["security"] = [{"bearer": []}]
                    _add_errors(op, statuses)
            app.openapi_schema = doc
        return app.openapi_schema

    app.openapi = build  # type: ignore[method-assign]


def finish(doc: dict[str, Any], auth: bool,
           limits: dict[tuple[str, str], dict[str, Any]] | None = None) -> dict[str, Any]:
    """The generated ``doc`` with the contract applied (also used for the NameServer's codes)."""
    schemas = doc.setdefault("components", {}).setdefault("schemas", {})
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)
    _, defs = models_json_schema([(m, "serialization") for m in ANSWER_MODELS],
                                 ref_template="#/components/schemas/{model}")
    schemas.update(defs.get("$defs", {}))
    schemas["Error"] = error_schema(error_codes())
    for item in doc.get("paths", {}).values():
        for op in item.values():
            _name_body(op, schemas)
    _constrain_fields(schemas)
    _json_schema_words(schemas)
    for (component, prop), bound in (limits or {}).items():
        schemas.get(component, {}).get("properties", {}).get(prop, {}).update(bound)
    if auth:
        doc["components"]["securitySchemes"] = {"bearer": {
            "type": "http", "scheme": "bearer",
            "description": "`<user>:<secret>` of a `sparkmq user`; HMAC-signed requests are also accepted"}}
    seen: set[str] = set()
    for path, item in doc.get("paths", {}).items():
        for method, op in item.items():
            opid = op.get("operationId", "")
            if opid in seen:
                raise ValueError(f"operation id {opid!r} is used twice; rename a handler")
            seen.add(opid)
            _constrain_params(op)
            _responses(path, method, op, auth)
    return doc


def error_schema(codes: list[str]) -> dict[str, Any]:
    """The one error model: ``{"error": code, "message": text}``."""
    return {"title": "Error", "type": "object", "required": ["error", "message"], "properties": {
        "error": {"type": "string", "enum": codes, "description": "machine-readable code"},
        "message": {"type": "string", "description": "what was wrong and what to do"}}}


def _constrain_params(op: dict[str, Any]) -> None:
    for param in op.get("parameters", []):
        rule = _PARAMS.get(param["name"])
        if rule is not None and param.get("schema", {}).get("type") in ("string", None):
            param["schema"] = {**param.get("schema", {}), **rule}
            param["schema"].pop("anyOf", None)


def _name_body(op: dict[str, Any], schemas: dict[str, Any]) -> None:
    """Move an operation's inline JSON body schema to components (and a produce message's item)."""
    name = _BODY_NAMES.get(op.get("operationId", ""))
    content = op.get("requestBody", {}).get("content", {}).get("application/json")
    if name is None or content is None or "$ref" in content.get("schema", {}):
        return
    schema = dict(content["schema"])
    items = schema.get("properties", {}).get("messages", {}).get("items")
    if items is not None:  # one component per kind of message (TextMessage, BinaryMessage)
        for kind in items.get("oneOf", []):
            schemas[kind["title"]] = kind
        schemas["ProducedMessage"] = {"oneOf": [_ref(kind["title"]) for kind in items.get("oneOf", [])]}
        schema["properties"] = {**schema["properties"],
                                "messages": {**schema["properties"]["messages"], "items": _ref("ProducedMessage")}}
    schemas[name] = {**schema, "title": name}
    content["schema"] = _ref(name)


_WORDS = {"ge": "minimum", "le": "maximum", "gt": "exclusiveMinimum", "lt": "exclusiveMaximum"}


def _json_schema_words(node: Any) -> None:
    """pydantic leaves a Field's ge/le as is on a nullable custom int (``JsonInt | None``): rename them."""
    if isinstance(node, dict):
        if "type" in node:
            for word, json_word in _WORDS.items():
                if word in node and not isinstance(node[word], dict):
                    node[json_word] = node.pop(word)
        for value in node.values():
            _json_schema_words(value)
    elif isinstance(node, list):
        for value in node:
            _json_schema_words(value)


def _constrain_fields(schemas: dict[str, Any]) -> None:
    for (component, prop), rule in _FIELDS.items():
        props = schemas.get(component, {}).get("properties")
        if props is not None and prop in props:
            keep = {k: v for k, v in props[prop].items() if k in ("title", "description", "default")}
            if "default" in keep and keep["default"] is None:
                del keep["default"]
            props[prop] = {**keep, **rule}
    update = schemas.get("GroupUpdate")
    if update is not None:  # null means "leave as is" in code: the document asks for at least one switch
        update["properties"]["consume_enabled"] = {"type": "boolean"}
        update["properties"]["max_reconsume_times"] = {"type": "integer", "minimum": 0, "maximum": 10_000}
        update["anyOf"] = [{"required": ["consume_enabled"]}, {"required": ["max_reconsume_times"]}]


def _ref(name: str) -> dict[str, Any]:
    if name.startswith(_ARRAY_OF):
        return {"type": "array", "items": {"$ref": f"#/components/schemas/{name[len(_ARRAY_OF):]}"}}
    return {"$ref": f"#/components/schemas/{name}"}


def _error_statuses(path: str, method: str, op: dict[str, Any], auth: bool) -> set[str]:
    statuses = {"500"}
    has_input = bool(op.get("parameters")) or "requestBody" in op
    if path in _ALWAYS_OPEN:
        return statuses
    statuses.add("503")
    if has_input:
        statuses.add("400")
    if "{" in path or op.get("operationId") in ("read_offsets", "pop"):
        statuses.add("404")
    if path not in _NO_SLAVE_GUARD or auth:
        statuses.add("403")
    if auth:
        statuses.add("401")
    if "requestBody" in op:
        statuses |= {"413", "415"}
    if method != "get":
        statuses.add("507")
    if op.get("operationId") in _CONFLICTS:
        statuses.add("409")
    if op.get("operationId") in _REMOTE_READS | {"post_sql"}:
        statuses.add("504" if op.get("operationId") == "post_sql" else "502")
    return statuses


def _responses(path: str, method: str, op: dict[str, Any], auth: bool) -> None:
    responses: dict[str, Any] = op.setdefault("responses", {})
    responses.pop("422", None)
    for status, (text, model) in _SUCCESS.get(op.get("operationId", ""), {}).items():
        responses[status] = {"description": text, "content": {"application/json": {"schema": _ref(model)}}}
    if "201" in responses and "200" in responses and op.get("operationId") != "create_topic":
        responses.pop("201")
    _add_errors(op, _error_statuses(path, method, op, auth))
    if auth and path not in _ALWAYS_OPEN:
        op["security"] = [{"bearer": []}]


def _add_errors(op: dict[str, Any], statuses: set[str]) -> None:
    responses: dict[str, Any] = op.setdefault("responses", {})
    responses.pop("422", None)
    for status in sorted(statuses):
        headers = {"Retry-After": {"schema": {"type": "integer"}, "description": "seconds"}} if status == "503" else None
        answer: dict[str, Any] = {"description": _STATUS_TEXT[status],
                                  "content": {"application/json": {"schema": _ref("Error")}}}
        if headers:
            answer["headers"] = headers
        responses.setdefault(status, answer)
        if "content" not in responses[status] or "application/json" not in responses[status]["content"]:
            responses[status] = {**responses[status], **answer}
