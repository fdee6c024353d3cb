"""The NameServer's FastAPI app: broker registration and route lookups.

    POST /v1/brokers/register            full registration (body CRC checked)
    POST /v1/brokers/query-data-version  needRegister; a heartbeat when unchanged
    POST /v1/brokers/unregister          clean shutdown
    GET  /v1/routes/{topic}              brokers and queues serving a topic
    GET  /v1/topics                      topic -> broker names
    GET  /v1/cluster                     clusters, brokers, roles, heartbeats
    GET  /healthz
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import orjson
from fastapi import FastAPI, Request
from starlette.responses import Response

from ..http.errors import error_response, install_common_handlers, lookup
from .errors import ERROR_TABLE, BadCrcError, NamesrvError
from .models import QueryDataVersionBody, RegisterBody, UnregisterBody
from .route_table import RouteTable
from .scan import ScanService
from .settings import NamesrvSettings
from .wire import body_crc32

__all__ = ["create_namesrv_app"]


def create_namesrv_app(settings: NamesrvSettings, table: RouteTable | None = None) -> FastAPI:
    """Build the app; its lifespan starts and stops the inactive-broker scan."""
    routes = table if table is not None else RouteTable()
    scan = ScanService(routes, settings.scan_interval_s, settings.broker_timeout_s)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        scan.start()
        try:
            yield
        finally:
            scan.stop()

    app = FastAPI(title="sparkmq NameServer", version="0.1.0", lifespan=lifespan)
    app.state.routes = routes
    app.state.scan = scan
    install_handlers(app)
    _broker_routes(app, routes)
    _client_routes(app, routes)
    return app


def _broker_routes(app: FastAPI, routes: RouteTable) -> None:
    @app.post("/v1/brokers/register")
    async def register(body: RegisterBody, request: Request) -> dict[str, Any]:
        """Register a broker with its topics; a slave learns its master's addresses."""
        raw = orjson.loads(await request.body())
        expected = body_crc32(raw)
        if expected != body.crc32:
            raise BadCrcError(
                f"crc32 {body.crc32} does not match the body (expected {expected}); the crc32 is "
                "zlib.crc32(orjson.dumps(body_without_crc32, option=orjson.OPT_SORT_KEYS))"
            )
        result = routes.register(body)
        return {"ok": True, "master_address": result.master_address,
                "ha_server_address": result.ha_server_address}

    @app.post("/v1/brokers/query-data-version")
    async def query_data_version(body: QueryDataVersionBody) -> dict[str, bool]:
        """``changed: false`` means the topics are current (and counts as a heartbeat)."""
        return {"changed": routes.needs_register(body, body.data_version)}

    @app.post("/v1/brokers/unregister")
    async def unregister(body: UnregisterBody) -> dict[str, bool]:
        """Forget a broker address now, with its routes if it was the last of its name."""
        routes.unregister(body)
        return {"ok": True}


def _client_routes(app: FastAPI, routes: RouteTable) -> None:
    @app.get("/v1/routes/{topic}")
    async def route(topic: str) -> dict[str, Any]:
        """Brokers (addresses by id, 0 = master) and queue counts serving ``topic``."""
        return routes.route(topic)

    @app.get("/v1/topics")
    async def topics() -> dict[str, Any]:
        """Every topic served by a live broker, with the broker names serving it."""
        return {"topics": routes.topics()}

    @app.get("/v1/cluster")
    async def cluster() -> dict[str, Any]:
        """Clusters, broker names, and each live broker's role, address and heartbeat."""
        return routes.cluster()

    @app.get("/healthz")
    async def healthz() -> dict[str, Any]:
        return {"status": "ok", "brokers": routes.broker_count()}


async def _handle_mapped(request: Request, exc: Exception) -> Response:
    status, code = lookup(ERROR_TABLE, exc)
    return error_response(status, code, str(exc) or type(exc).__name__)


def install_handlers(app: FastAPI) -> None:
    """Register the mapped handler plus FastAPI's validation and HTTP errors."""
    app.add_exception_handler(NamesrvError, _handle_mapped)
    install_common_handlers(app, "NameServer API")
