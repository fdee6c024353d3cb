"""Topic admin (with each topic's table settings), table status and DLQ replay, queue info, message lookup.

    POST   /v1/topics                             {"name", "queues"?, "perm"?, "table"?}
    PUT    /v1/topics/{topic}                     {"table": {...}}  (only the given keys change)
    GET    /v1/tables                             every table topic's status
    POST   /v1/topics/{topic}/table/replay-dlq    translate the dead-letter rows again
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse

from connectors.tables.spec import TableSpec

from ..auth.needs import LOGIN, Cluster, Topic
from ..broker import Broker
from ..errors import BadRequestError
from ..model.topics import TopicConfig
from .guard import GuardedRoute, local_message, requires
from .schemas import JsonInt
from .wire import message_to_json, parse_json_object

__all__ = ["router"]

router = APIRouter(tags=["topics"], route_class=GuardedRoute)


_TABLE_DOC = ("Table settings (keys mode, schema, write_mode, partition_by, target_lag_s; an unknown key is "
              "400 bad_table); absent: mode off")


class TopicCreate(BaseModel):
    """Body of POST /v1/topics; an unknown field is a 400 naming it."""

    model_config = ConfigDict(extra="forbid")

    name: str
    queues: JsonInt | None = Field(default=None, ge=1, le=1024, description="default: [broker] default_queues")
    perm: Literal["rw", "r", "w", ""] = "rw"
    table: dict[str, Any] | None = Field(default=None, description=_TABLE_DOC)


class TopicUpdate(BaseModel):
    """Body of PUT /v1/topics/{topic}: the table keys to change (the others keep their values)."""

    model_config = ConfigDict(extra="forbid")

    table: dict[str, Any] = Field(description="The table settings to change; a narrowing schema change is 409")


def _broker(request: Request) -> Broker:
    return request.app.state.broker  # type: ignore[no-any-return]


def _queues(broker: Broker, cfg: TopicConfig) -> list[dict[str, int]]:
    broker.settle()
    out = []
    for qid in range(cfg.queues):
        lo, hi = broker.queue_range(cfg.name, qid)
        out.append({"queue_id": qid, "min_offset": lo, "max_offset": hi})
    return out


def _topic_json(cfg: TopicConfig) -> dict[str, Any]:
    return {"name": cfg.name, "queues": cfg.queues, "perm": cfg.perm, "table": cfg.table.to_json()}


_TOPIC_EXAMPLE = '{"name": "orders", "queues": 4}'
_UPDATE_EXAMPLE = '{"table": {"mode": "typed", "schema": "order_id STRING, amount DOUBLE"}}'
_CREATE_DOC: dict[str, Any] = {"requestBody": {"required": True, "content": {
    t: {"schema": TopicCreate.model_json_schema()} for t in ("application/json",)}}}
_UPDATE_DOC: dict[str, Any] = {"requestBody": {"required": True, "content": {
    t: {"schema": TopicUpdate.model_json_schema()} for t in ("application/json",)}}}


def _read_body(model: type[BaseModel], raw: bytes, content_type: str | None, example: str) -> Any:
    """A topic body, read like a produce body (same content types, same errors)."""
    doc = parse_json_object(raw, content_type, example)
    try:
        return model.model_validate(doc)
    except ValidationError as exc:
        parts = [f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in exc.errors()[:5]]
        raise BadRequestError("invalid topic: " + "; ".join(parts) + f"; send {example}") from None


@router.post("/v1/topics", status_code=201, summary="Create a topic", openapi_extra=_CREATE_DOC)
@requires(Cluster("Admin"))
async def create_topic(request: Request) -> JSONResponse:
    """201 when created, 200 when an identical topic already exists, 409 when it differs."""
    body = _read_body(TopicCreate, await request.body(), request.headers.get("content-type"), _TOPIC_EXAMPLE)
    return await run_in_threadpool(_create, _broker(request), body)


def _create(broker: Broker, body: TopicCreate) -> JSONResponse:
    queues = body.queues or broker.settings.broker.default_queues
    table = TableSpec.from_json(body.table) if body.table is not None else TableSpec()
    cfg, existed = broker.tables.create(body.name, queues, body.perm, table)
    return JSONResponse(_topic_json(cfg), status_code=200 if existed else 201)


@router.put("/v1/topics/{topic}", summary="Change a topic's table settings", openapi_extra=_UPDATE_DOC)
@requires(Topic("path:topic", "Admin"))
async def alter_topic(topic: str, request: Request) -> dict[str, Any]:
    """Merge ``table`` into the topic's table settings; enabling a table backfills it."""
    body = _read_body(TopicUpdate, await request.body(), request.headers.get("content-type"), _UPDATE_EXAMPLE)
    return await run_in_threadpool(_alter, _broker(request), topic, body)


def _alter(broker: Broker, topic: str, body: TopicUpdate) -> dict[str, Any]:
    cfg = broker.tables.alter(topic, body.table)
    return {**_topic_json(cfg), "table_status": broker.tables.status(topic)}


@router.get("/v1/tables", summary="Status of every table topic")
@requires(LOGIN)
def list_tables(request: Request) -> dict[str, Any]:
    return {"tables": _broker(request).tables.statuses()}


@router.post("/v1/topics/{topic}/table/replay-dlq", summary="Translate a table's dead-letter rows again")
@requires(Topic("path:topic", "Admin"))
def replay_dlq(topic: str, request: Request) -> dict[str, Any]:
    """Rows of ``<topic>__dlq`` that fit the current schema move to the table; the rest stay."""
    return _broker(request).tables.replay_dlq(topic)


@router.get("/v1/topics", summary="List topics")
@requires(LOGIN)
def list_topics(request: Request) -> list[dict[str, Any]]:
    return [_topic_json(c) for c in _broker(request).topics.list()]


@router.get("/v1/topics/{topic}", summary="Describe a topic")
@requires(Topic("path:topic", "Sub"))
def get_topic(topic: str, request: Request) -> dict[str, Any]:
    broker = _broker(request)
    cfg = broker.topics.get(topic)
    queues = _queues(broker, cfg)
    return {**_topic_json(cfg), "queue_offsets": queues,
            "messages": sum(q["max_offset"] - q["min_offset"] for q in queues),
            "table_status": broker.tables.status(topic)}


@router.delete("/v1/topics/{topic}", summary="Delete a topic and its data")
@requires(Topic("path:topic", "Admin"))
def delete_topic(topic: str, request: Request) -> dict[str, Any]:
    broker = _broker(request)
    broker.tables.drop(topic)
    broker.topics.delete(topic, broker.store)
    broker.groups.drop_topic(topic)
    return {"deleted": topic}


@router.get("/v1/topics/{topic}/queues", summary="Queue offsets of a topic")
@requires(Topic("path:topic", "Sub"))
def list_queues(topic: str, request: Request) -> list[dict[str, int]]:
    broker = _broker(request)
    return _queues(broker, broker.topics.get(topic))


@router.get("/v1/topics/{topic}/queues/{queue_id}/offset", summary="Offset at a time")
@requires(Topic("path:topic", "Sub"))
def offset_at(topic: str, queue_id: int, request: Request,
              timestamp_ms: int = Query(..., ge=0, description="epoch ms")) -> dict[str, int]:
    """First offset stored at or after ``timestamp_ms`` (max offset when none)."""
    broker = _broker(request)
    cfg = broker.topics.get(topic)
    cfg.check_queue(queue_id)
    broker.settle()
    lo, hi = broker.queue_range(topic, queue_id)
    if hi <= lo:
        return {"offset": hi}
    return {"offset": broker.store.offset_for_timestamp(topic, queue_id, timestamp_ms)}


@router.get("/v1/topics/{topic}/messages", summary="Look messages up by key")
@requires(Topic("path:topic", "Sub"))
def query_by_key(topic: str, request: Request, key: str = Query(..., min_length=1),
                 begin_ms: int = Query(0, ge=0), end_ms: int | None = Query(None, ge=0),
                 max: int = Query(64, ge=1, le=1000)) -> dict[str, Any]:
    broker = _broker(request)
    broker.topics.get(topic)
    end = end_ms if end_ms is not None else 2**62
    found = broker.store.query_by_key(topic, key, begin_ms, end, max)
    return {"messages": [message_to_json(m) for m in found]}


@router.get("/v1/messages/{msg_id}", summary="Look a message up by id")
@requires(Cluster("Sub"))
def get_message(msg_id: str, request: Request) -> dict[str, Any]:
    return message_to_json(local_message(_broker(request), msg_id))
