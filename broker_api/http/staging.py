"""Staging an Arrow produce body unparsed in a transaction (the Spark sink's fast path).

``POST /v1/topics/{t}/messages?transactional=true&staging=raw`` (or with
``transaction_id=ID``) and an Arrow IPC body: the body is checked (an Arrow
stream with a ``body`` column, at most ``[limits] max_batch_messages``
rows), written to the transaction's staged file as it came, and answered
``{"status": "SEND_OK", "transaction_id", "messages": rows}``. The commit
parses it (see ``tx_sinks.py``), so a row is parsed and appended once.
Same permissions as a produce (Topic Pub).
"""

from __future__ import annotations

from typing import Any

from fastapi import Request

from ..broker import Broker
from ..errors import BadRequestError, BatchTooLargeError, UnsupportedMediaTypeError
from .guard import owner_of
from .query import query_of
from .wire import ARROW_STREAM, read_arrow

__all__ = ["stage_raw", "wants_raw_staging"]


def wants_raw_staging(request: Request) -> bool:
    return query_of(request.scope).get("staging") == "raw"


def _rows(raw: bytes, max_messages: int) -> int:
    table = read_arrow(raw)
    if "body" not in table.column_names:
        raise BadRequestError("the Arrow stream needs a 'body' column (binary or string)")
    if table.column("body").null_count:
        raise BadRequestError("a row has a null body")
    if not 0 < table.num_rows <= max_messages:
        raise BatchTooLargeError(f"{table.num_rows} messages in one request; send 1 to {max_messages} "
                                 "([limits] max_batch_messages)")
    return table.num_rows


async def stage_raw(request: Request, broker: Broker, topic: str, raw: bytes, tx_id: str | None) -> dict[str, Any]:
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype != ARROW_STREAM:
        raise UnsupportedMediaTypeError(f"staging=raw takes {ARROW_STREAM} bodies, not {ctype!r}")
    rows = _rows(raw, broker.settings.limits.max_batch_messages)
    tx_id = await broker.gate.run(broker.transactions.stage_raw, topic, raw, rows, tx_id, owner_of(request),
                                  offload=True)
    return {"status": "SEND_OK", "transaction_id": tx_id, "messages": rows}
