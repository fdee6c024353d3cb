"""``POST /v1/sql``: read-only SQL over the Delta mirror with the embedded engine.

Body ``{"sql": "...", "max_rows": optional}``; answer
``{"columns": [...], "rows": [[...]], "truncated": bool}``.  Binary values
(``body``) come back base64-encoded, maps as objects, timestamps as ISO 8601.
Errors: 400 ``bad_sql`` (engine's message), 503 ``mirror_disabled``,
504 ``sql_timeout``.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from connectors import SqlError, SqlTimeoutError, is_truncated, run_sql
from connectors.jsonrows import table_rows

from .errors import error_response
from .schemas import JsonInt

__all__ = ["router", "SqlRequest"]

router = APIRouter(tags=["sql"])


class SqlRequest(BaseModel):
    """Body of POST /v1/sql."""

    sql: str = Field(description="One read-only statement; the mirror table is `messages`.")
    max_rows: JsonInt | None = Field(default=None, ge=0, description="Row limit, capped by [mirror] sql_max_rows.")


@router.post("/v1/sql", summary="Read-only SQL over the Delta mirror (table `messages`)", response_model=None)
async def post_sql(body: SqlRequest, request: Request) -> dict[str, Any] | Response:
    mirror = getattr(request.app.state, "mirror", None)
    if mirror is None:
        return error_response(503, "mirror_disabled",
                              "the Delta mirror is disabled; set [mirror] enabled = true and restart the broker")
    config = mirror.config
    limit = config.sql_max_rows if body.max_rows is None else min(body.max_rows, config.sql_max_rows)
    try:
        table = await run_in_threadpool(run_sql, mirror.table_uri, body.sql, max_rows=limit,
                                        timeout_s=config.sql_timeout_s)
    except SqlTimeoutError as exc:
        return error_response(504, "sql_timeout", str(exc))
    except SqlError as exc:
        return error_response(400, "bad_sql", str(exc))
    columns, rows = table_rows(table)
    return {"columns": columns, "rows": rows, "truncated": is_truncated(table)}
