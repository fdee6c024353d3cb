"""Transaction and exactly-once sink routes (see transactions.py for durability)."""

from __future__ import annotations

import re
from typing import Any, Literal

from fastapi import APIRouter, Path, Request
from pydantic import Field

from store import Message

from ..auth.needs import LOGIN, Owner
from ..broker import Broker
from ..errors import BadRequestError
from ..transactions.columns import ColumnFrame, ColumnParser
from ..transactions.sinks import Parser
from .arrow_produce import column_frame
from .guard import GuardedRoute, requires
from .messages import _to_messages
from .schemas import RequestBody
from .wire import parse_arrow_produce

__all__ = ["router"]

router = APIRouter(tags=["transactions"], route_class=GuardedRoute)
SINK_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:\-]{0,254}$"  # also the OpenAPI pattern of {sink_id}
_SINK = re.compile(SINK_ID_PATTERN)
BATCH_ID_MAX = 2**63 - 1  # batch ids are journaled as 64-bit integers


class TransactionAction(RequestBody):
    """Body of POST /v1/transactions/{id}."""

    action: Literal["commit", "rollback"]


class SinkBatch(RequestBody):
    """Body of the sink batch commit/abort routes."""

    transaction_ids: list[str] = Field(default_factory=list)


def _broker(request: Request) -> Broker:
    return request.app.state.broker  # type: ignore[no-any-return]


def _parser(broker: Broker) -> Parser:
    """How a commit parses Arrow bodies staged raw: as a produce would (queues chosen alike)."""
    limit = broker.settings.limits.max_batch_messages

    def parse(topic: str, raw: bytes) -> list[Message]:
        return _to_messages(broker, broker.topics.for_produce(topic), parse_arrow_produce(raw, limit))

    return parse


def _columns(broker: Broker) -> ColumnParser:
    """How a commit turns a staged body into columns when it can (queues chosen as a produce would)."""

    def columns(topic: str, raw: bytes) -> ColumnFrame | None:
        return column_frame(broker, broker.topics.for_produce(topic), raw)

    return columns


def _check_sink(sink_id: str) -> None:
    if not _SINK.fullmatch(sink_id):
        raise BadRequestError(f"sink id {sink_id!r} is invalid; use 1-255 characters from A-Z a-z 0-9 _ . : -")


@router.post("/v1/transactions/{tx_id}", summary="Commit or roll back a transaction")
@requires(Owner("path:tx_id"))
async def end_transaction(tx_id: str, body: TransactionAction, request: Request) -> dict[str, Any]:
    """Commit of an already committed id is a no-op answered 200."""
    broker = _broker(request)
    tx = broker.transactions
    if body.action == "commit":
        return await broker.gate.run(tx.commit, tx_id, _parser(broker), _columns(broker), offload=True)
    return await broker.gate.run(tx.rollback, tx_id, offload=True)


@router.get("/v1/transactions/{tx_id}", summary="State of a transaction")
@requires(Owner("path:tx_id"))
def get_transaction(tx_id: str, request: Request) -> dict[str, Any]:
    return _broker(request).transactions.describe(tx_id)


@router.post("/v1/sinks/{sink_id}/batches/{batch_id}/commit", summary="Commit a sink batch exactly once")
@requires(Owner("body:transaction_ids"))
async def sink_commit(sink_id: str, body: SinkBatch, request: Request,
                      batch_id: int = Path(ge=0, le=BATCH_ID_MAX)) -> dict[str, Any]:
    """First time: commits all listed transactions and records (sink, batch) atomically.
    Replay: answers already_committed and rolls the listed transactions back."""
    _check_sink(sink_id)
    broker = _broker(request)
    return await broker.gate.run(broker.transactions.sink_commit, sink_id, batch_id, body.transaction_ids,
                                 _parser(broker), _columns(broker), offload=True)


@router.post("/v1/sinks/{sink_id}/batches/{batch_id}/abort", summary="Abort a sink batch")
@requires(Owner("body:transaction_ids"))
async def sink_abort(sink_id: str, body: SinkBatch, request: Request,
                     batch_id: int = Path(ge=0, le=BATCH_ID_MAX)) -> dict[str, Any]:
    _check_sink(sink_id)
    broker = _broker(request)
    return await broker.gate.run(broker.transactions.sink_abort, sink_id, batch_id, body.transaction_ids,
                                 offload=True)


@router.get("/v1/sinks/{sink_id}", summary="Last committed batches of a sink")
@requires(LOGIN)
def sink_info(sink_id: str, request: Request) -> dict[str, Any]:
    _check_sink(sink_id)
    return _broker(request).transactions.sink_info(sink_id)
