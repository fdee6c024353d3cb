"""POP routes: pop, ack, change the invisible time, send back (RocketMQ 5 POP and consumerSendMsgBack).

    POST /v1/groups/{group}/pop        {"topic", "max_messages": 32, "invisible_ms": 60000, "wait_ms": 0,
                                        "filter": null}
    POST /v1/groups/{group}/ack        {"receipts": [...]}
    POST /v1/groups/{group}/invisible  {"receipt", "invisible_ms"}
    POST /v1/groups/{group}/retry      {"msg_id", "delay_level": null}

All four are writes (a slave refuses them, see ``ha.py``).  A pop that finds
nothing waits up to ``wait_ms`` for any queue of the topic or the group's retry
topic to grow (woken by the reput thread, as a long-polling pull).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from fastapi import APIRouter, Request
from pydantic import Field

from store import StoredMessage

from ..auth.needs import Group, Topic
from ..broker import Broker
from ..errors import BadRequestError
from ..model.filters import Predicate, compile_filter
from ..model.pop_records import ORIGIN_TOPIC, RETRY_PREFIX, Checkpoint, reconsume_times
from ..model.topics import validate_group_name
from ..protection.admission import TICKET_KEY, Ticket
from .guard import GuardedRoute, check_topics, local_message, recheck, requires
from .schemas import JsonInt, RequestBody
from .wire import message_to_json

__all__ = ["router"]

router = APIRouter(tags=["pop"], route_class=GuardedRoute)


class PopRequest(RequestBody):
    """Body of POST /v1/groups/{group}/pop."""

    topic: str
    max_messages: JsonInt = Field(default=32, ge=1, le=1000)
    invisible_ms: JsonInt = Field(default=60_000, ge=100)
    wait_ms: JsonInt = Field(default=0, ge=0, description="at most [limits] max_wait_ms; more is 400")
    filter: str | None = None


class AckRequest(RequestBody):
    """Body of POST /v1/groups/{group}/ack."""

    receipts: list[str] = Field(min_length=1, max_length=10_000)


class InvisibleRequest(RequestBody):
    """Body of POST /v1/groups/{group}/invisible."""

    receipt: str
    invisible_ms: JsonInt = Field(ge=0)


class RetryRequest(RequestBody):
    """Body of POST /v1/groups/{group}/retry: -1 sends the message straight to the DLQ."""

    msg_id: str
    delay_level: JsonInt | None = None


def _broker(request: Request) -> Broker:
    return request.app.state.broker  # type: ignore[no-any-return]


def _check_invisible(broker: Broker, invisible_ms: int) -> None:
    top = broker.settings.pop.max_invisible_ms
    if invisible_ms > top:
        raise BadRequestError(f"invisible_ms={invisible_ms} is over the limit of {top} ms ([pop] max_invisible_ms)")


def _popped(ck: Checkpoint, i: int, m: StoredMessage) -> dict[str, Any]:
    out = message_to_json(m)
    out["topic"] = m.properties.get(ORIGIN_TOPIC, m.topic)
    if m.topic != out["topic"]:
        out["store_topic"] = m.topic  # the group's %RETRY% topic
    out["receipt"] = ck.receipt(i)
    out["reconsume_times"] = reconsume_times(m)
    out["invisible_until"] = ck.pop_time + ck.invisible_ms
    return out


async def _wait_for_arrival(broker: Broker, keys: list[tuple[str, int]], seconds: float) -> None:
    """Return when any of ``keys`` grows, or after ``seconds``."""
    assert broker.waiters is not None
    events = [(k, broker.waiters.register(*k)) for k in keys]
    try:
        tasks = [asyncio.ensure_future(e.wait()) for _, e in events]
        try:
            await asyncio.wait(tasks, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in tasks:
                t.cancel()
    finally:
        for k, e in events:
            broker.waiters.unregister(*k, e)


@router.post("/v1/groups/{group}/pop", summary="Pop messages of any queue of a topic, each with a receipt")
@requires(Group("path:group", "Sub"), Topic("body:topic", "Sub", origins=True))
async def pop(group: str, body: PopRequest, request: Request) -> dict[str, Any]:
    """Messages of a %RETRY% / %DLQ% topic are answered only when the caller may Sub their origin topic."""
    broker = _broker(request)
    validate_group_name(group)
    _check_invisible(broker, body.invisible_ms)
    top = broker.settings.limits.max_wait_ms
    if body.wait_ms > top:
        raise BadRequestError(f"wait_ms={body.wait_ms} is over the limit of {top} ms ([limits] max_wait_ms)")
    cfg = broker.topics.for_pull(body.topic)
    predicate: Predicate | None = compile_filter(body.filter) if body.filter else None
    loop = asyncio.get_running_loop()
    deadline = loop.time() + body.wait_ms / 1000
    keys = [(body.topic, q) for q in range(cfg.queues)] + [(RETRY_PREFIX + group, 0)]
    while True:
        items = await loop.run_in_executor(None, broker.pop.pop, group, body.topic, body.max_messages,
                                           body.invisible_ms, predicate)
        remaining = deadline - loop.time()
        if items or remaining <= 0 or not broker.ready:
            break
        ticket: Ticket | None = request.scope.get(TICKET_KEY)
        with ticket.parked() if ticket is not None else contextlib.nullcontext():  # parked: no slot held
            await _wait_for_arrival(broker, keys, min(remaining, 0.5))  # also catches a filter's skips
        recheck(request)  # a user removed while parked gets 401, not the data
    check_topics(request, (m for _, _, m in items))  # a retried or dead message: its origin topic
    return {"messages": [_popped(ck, i, m) for ck, i, m in items]}


@router.post("/v1/groups/{group}/ack", summary="Ack popped messages by receipt")
@requires(Group("path:group", "Sub"), Topic("receipt:body.receipts", "Sub", origins=True))
def ack(group: str, body: AckRequest, request: Request) -> dict[str, Any]:
    """Per receipt: OK, ALREADY_ACKED, or EXPIRED (its invisible time passed and it was redelivered)."""
    validate_group_name(group)
    statuses = _broker(request).pop.ack(group, body.receipts)
    return {"acked": statuses.count("OK"),
            "results": [{"receipt": r, "status": s} for r, s in zip(body.receipts, statuses)]}


@router.post("/v1/groups/{group}/invisible", summary="Keep a popped message invisible for longer")
@requires(Group("path:group", "Sub"), Topic("receipt:body.receipt", "Sub", origins=True))
def change_invisible(group: str, body: InvisibleRequest, request: Request) -> dict[str, Any]:
    """The answer carries a new receipt; the old one no longer acks."""
    broker = _broker(request)
    validate_group_name(group)
    _check_invisible(broker, body.invisible_ms)
    status, receipt = broker.pop.change_invisible(group, body.receipt, body.invisible_ms)
    return {"status": status, "receipt": receipt}


@router.post("/v1/groups/{group}/retry", summary="Send a pulled message back for a later retry (or the DLQ)")
@requires(Group("path:group", "Sub"), Topic("message:body.msg_id", "Sub"))
def retry(group: str, body: RetryRequest, request: Request) -> dict[str, Any]:
    broker = _broker(request)
    validate_group_name(group)
    local_message(broker, body.msg_id)  # an id of another broker (or none) is 404, not another message
    status = broker.pop.retry(group, body.msg_id, body.delay_level)
    return {"status": status, "msg_id": body.msg_id}
