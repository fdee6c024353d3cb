"""``POST /v1/sql``: read-only SQL over the Delta mirror and the table topics with the embedded engine.

Tables: ``messages`` (the mirror), each table topic by its name and its
dead-letter table as ``<topic>__dlq``.
Body ``{"sql": "...", "max_rows": optional}``; answer
``{"columns": [...], "rows": [[...]], "truncated": bool}``.  Binary values
(``body``) come back base64-encoded, maps as objects, timestamps as ISO 8601.
Errors: 400 ``bad_sql`` (engine's message), 503 ``mirror_disabled`` (no
mirror and no table topic), 504 ``sql_timeout``.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import Field
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from connectors import SqlError, SqlTimeoutError, is_truncated, run_sql
from connectors.jsonrows import table_rows

from ..auth.needs import Cluster
from .errors import error_response
from .guard import GuardedRoute, requires
from .schemas import JsonInt, RequestBody

__all__ = ["SqlRequest", "router"]

router = APIRouter(tags=["sql"], route_class=GuardedRoute)


class SqlRequest(RequestBody):
    """Body of POST /v1/sql."""

    sql: str = Field(description="One read-only statement over `messages`, each table topic by its name and "
                                 "`<topic>__dlq`.")
    max_rows: JsonInt | None = Field(default=None, ge=0, description="Row limit, capped by [mirror] sql_max_rows.")


@router.post("/v1/sql", summary="Read-only SQL over the Delta mirror (`messages`) and the table topics",
             response_model=None)
@requires(Cluster("Sub"))
async def post_sql(body: SqlRequest, request: Request) -> dict[str, Any] | Response:
    mirror = getattr(request.app.state, "mirror", None)
    broker = request.app.state.broker
    tables = broker.tables.sql_tables()
    if mirror is None and not tables:
        return error_response(503, "mirror_disabled",
                              "the Delta mirror is disabled and no topic has a table; set [mirror] enabled = true "
                              "and restart the broker, or give a topic a table (PUT /v1/topics/{topic})")
    config = broker.settings.mirror
    limit = config.sql_max_rows if body.max_rows is None else min(body.max_rows, config.sql_max_rows)
    try:
        table = await run_in_threadpool(run_sql, mirror.table_uri if mirror is not None else None, body.sql,
                                        max_rows=limit, timeout_s=config.sql_timeout_s, tables=tables)
    except SqlTimeoutError as exc:
        return error_response(504, "sql_timeout", str(exc))
    except SqlError as exc:
        return error_response(400, "bad_sql", str(exc))
    columns, rows = table_rows(table)
    return {"columns": columns, "rows": rows, "truncated": is_truncated(table)}
