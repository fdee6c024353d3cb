"""Consumer group routes: list, describe with lag, commit and read offsets."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request
from pydantic import Field, field_validator

from ..auth.needs import LOGIN, Group, Topic
from ..broker import Broker
from ..errors import BadOffsetError, BadRequestError, GroupNotFoundError
from ..model.topics import validate_group_name
from .guard import GuardedRoute, requires
from .schemas import JsonBool, JsonInt, RequestBody

__all__ = ["router"]

router = APIRouter(tags=["groups"], route_class=GuardedRoute)


class OffsetCommit(RequestBody):
    """Body of PUT /v1/groups/{group}/offsets: next offset to consume per queue."""

    topic: str
    offsets: dict[str, JsonInt]


class GroupUpdate(RequestBody):
    """Body of PUT /v1/groups/{group}: either switch or both."""

    consume_enabled: JsonBool | None = None
    max_reconsume_times: JsonInt | None = Field(default=None, ge=0, le=10_000)

    @field_validator("consume_enabled", "max_reconsume_times", mode="before")
    @classmethod
    def _not_null(cls, value: object) -> object:
        if value is None:  # left out means "leave as is"; an explicit null is a mistake
            raise ValueError("must not be null; leave the field out instead")
        return value


def _broker(request: Request) -> Broker:
    return request.app.state.broker  # type: ignore[no-any-return]


@router.get("/v1/groups", summary="List consumer groups")
@requires(LOGIN)
def list_groups(request: Request) -> list[dict[str, Any]]:
    broker = _broker(request)
    broker.settle()
    out = []
    for group in broker.groups.names():
        rows = broker.group_lag(group)
        out.append({"group": group, "topics": sorted({r["topic"] for r in rows}),
                    "total_lag": sum(r["lag"] for r in rows),
                    "consume_enabled": broker.groups.config(group)["consume_enabled"]})
    return out


@router.get("/v1/groups/{group}", summary="Describe a group: offsets and lag per queue")
@requires(Group("path:group", "Sub"))
def get_group(group: str, request: Request) -> dict[str, Any]:
    broker = _broker(request)
    validate_group_name(group)
    if not broker.groups.exists(group):
        raise GroupNotFoundError(
            f"consumer group {group!r} has no committed offsets; commit with PUT /v1/groups/{group}/offsets"
        )
    broker.settle()
    rows = broker.group_lag(group)
    return {"group": group, **broker.groups.config(group), "queues": rows, "total_lag": sum(r["lag"] for r in rows)}


@router.put("/v1/groups/{group}", summary="Enable or disable consumption; set max_reconsume_times")
@requires(Group("path:group", "Admin"))
def update_group(group: str, body: GroupUpdate, request: Request) -> dict[str, Any]:
    broker = _broker(request)
    validate_group_name(group)
    if body.consume_enabled is None and body.max_reconsume_times is None:
        raise BadRequestError('give "consume_enabled" (true/false) and/or "max_reconsume_times" (0 or more)')
    if body.consume_enabled is not None:
        broker.groups.set_consume_enabled(group, body.consume_enabled,
                                          None if body.consume_enabled else "by an operator")
    if body.max_reconsume_times is not None:
        broker.groups.set_max_reconsume_times(group, body.max_reconsume_times)
    return {"group": group, **broker.groups.config(group)}


@router.put("/v1/groups/{group}/offsets", summary="Commit offsets (next offset to consume)")
@requires(Group("path:group", "Sub"), Topic("body:topic", "Sub"))
def commit_offsets(group: str, body: OffsetCommit, request: Request) -> dict[str, bool]:
    broker = _broker(request)
    validate_group_name(group)
    cfg = broker.topics.get(body.topic)
    parsed: dict[int, int] = {}
    for raw_qid, offset in body.offsets.items():
        try:
            qid = int(raw_qid)
        except ValueError:
            raise BadOffsetError(f"queue id {raw_qid!r} is not an integer") from None
        cfg.check_queue(qid)
        if offset < 0:
            raise BadOffsetError(f"offset {offset} for queue {qid} is negative")
        parsed[qid] = offset
    broker.groups.commit(group, body.topic, parsed)
    return {"ok": True}


@router.get("/v1/groups/{group}/offsets", summary="Committed offsets of a group on a topic")
@requires(Group("path:group", "Sub"), Topic("query:topic", "Sub"))
def read_offsets(group: str, request: Request, topic: str = Query(...)) -> dict[str, Any]:
    """Queues never committed are absent."""
    broker = _broker(request)
    validate_group_name(group)
    broker.topics.get(topic)
    offsets = broker.groups.offsets(group, topic)
    return {"topic": topic, "offsets": {str(q): o for q, o in sorted(offsets.items())}}
