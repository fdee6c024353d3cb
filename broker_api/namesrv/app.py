"""The NameServer's FastAPI app: broker registration and route lookups.

    POST /v1/brokers/register            full registration (body CRC checked)
    POST /v1/brokers/query-data-version  needRegister; a heartbeat when unchanged
    POST /v1/brokers/unregister          clean shutdown
    GET  /v1/routes/{topic}              brokers and queues serving a topic
    GET  /v1/topics                      topic -> broker names
    GET  /v1/cluster                     clusters, brokers, roles, heartbeats
    GET  /v1/namesrv                     this NameServer's start time and uptime
    GET  /healthz
    GET  /console                        the web console's cluster view (broker_api/http/console.py)

With ``auth_enabled`` every route but ``/healthz`` needs an authenticated
user (:mod:`broker_api.http.auth`), and the three broker routes need
``Cluster:<cluster of the body>`` Admin: a broker registers with its
``[auth] token``.

Every answer carries ``X-Namesrv-Started-Ms`` and ``X-Namesrv-Uptime-S``: a
client that gets "not found" from a NameServer that just restarted (its
tables are empty until brokers re-register) keeps its cached route, and a
broker that sees a new start time registers again at once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import orjson
from fastapi import FastAPI, Request
from starlette.responses import Response

from ..auth import Authenticator, Permission, UserStore
from ..auth.routes import is_open
from ..http.auth import PRINCIPAL_KEY, AuthMiddleware
from ..http.console import console_router
from ..errors import BrokerError
from ..http.contract import install_namesrv_contract, operation_id
from ..http.errors import error_response, install_common_handlers, lookup, response_for
from ..errors import BadCrcError, NamesrvError
from .errors import ERROR_TABLE
from .models import QueryDataVersionBody, RegisterBody, UnregisterBody
from .controller import ControllerService
from .controller_routes import mount_controller
from .route_table import RouteTable
from .scan import ScanService
from ..settings.namesrv import NamesrvSettings
from ..cluster.wire import body_crc32

__all__ = ["create_namesrv_app"]


def create_namesrv_app(settings: NamesrvSettings, table: RouteTable | None = None) -> FastAPI:
    """Build the app; its lifespan starts and stops the inactive-broker scan."""
    routes = table if table is not None else RouteTable()
    scan = ScanService(routes, settings.scan_interval_s, settings.broker_timeout_s)
    controller = ControllerService(settings, routes.set_master) if settings.controller_enabled else None

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        scan.start()
        if controller is not None:
            controller.start()
        try:
            yield
        finally:
            scan.stop()
            if controller is not None:
                controller.stop()

    app = FastAPI(title="sparkmq NameServer", version="0.1.0", lifespan=lifespan,
                  description="Topic routes and broker registration. Errors are {\"error\": code, \"message\": text}.",
                  generate_unique_id_function=operation_id)
    install_namesrv_contract(app, sorted({code for _, code in ERROR_TABLE.values()}), settings.auth_enabled)
    app.state.routes = routes
    app.state.scan = scan
    install_handlers(app)
    app.state.auth = _install_auth(app, settings)
    _broker_routes(app, routes)
    _client_routes(app, routes)
    app.state.controller = controller
    mount_controller(app, controller)  # /v1/controller/... (namesrv/controller_routes.py)
    app.include_router(console_router("namesrv"))
    _start_time(app, routes)
    return app


def _start_time(app: FastAPI, routes: RouteTable) -> None:
    @app.middleware("http")
    async def started_headers(request: Request, call_next: Any) -> Response:
        response: Response = await call_next(request)
        response.headers["X-Namesrv-Started-Ms"] = str(routes.started_ms)
        response.headers["X-Namesrv-Uptime-S"] = f"{routes.uptime_s():.3f}"
        return response

    @app.get("/v1/namesrv")
    async def namesrv_info() -> dict[str, Any]:
        """This NameServer's start time (ms since the epoch) and uptime (young: its routes may be partial), and
        whether it runs the controller (``--controller``: /v1/controller/groups)."""
        return {"started_ms": routes.started_ms, "uptime_s": round(routes.uptime_s(), 3),
                "controller": getattr(app.state, "controller", None) is not None}


def _broker_routes(app: FastAPI, routes: RouteTable) -> None:
    @app.post("/v1/brokers/register")
    async def register(body: RegisterBody, request: Request) -> dict[str, Any]:
        """Register a broker with its topics; a slave learns its master's addresses."""
        _may_register(request, body.cluster)
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
    async def query_data_version(body: QueryDataVersionBody, request: Request) -> dict[str, bool]:
        """``changed: false`` means the topics are current (and counts as a heartbeat)."""
        _may_register(request, body.cluster)
        return {"changed": routes.needs_register(body, body.data_version)}

    @app.post("/v1/brokers/unregister")
    async def unregister(body: UnregisterBody, request: Request) -> dict[str, bool]:
        """Forget a broker address now, with its routes if it was the last of its name."""
        _may_register(request, body.cluster)
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


def _install_auth(app: FastAPI, settings: NamesrvSettings) -> Authenticator | None:
    if not settings.auth_enabled:
        return None
    authenticator = Authenticator(UserStore(settings.auth_dir), settings.auth_max_clock_skew_s)

    def permissions(method: str, path: str, query: str) -> list[Permission] | None:
        return None if is_open(path) else []

    app.add_middleware(AuthMiddleware, authenticator=authenticator, permissions=permissions)
    return authenticator


def _may_register(request: Request, cluster: str) -> None:
    """With auth on: raise AccessDeniedError (403) unless the user has ``Cluster:<cluster>`` Admin."""
    authenticator: Authenticator | None = request.app.state.auth
    if authenticator is not None:
        authenticator.authorize(request.scope[PRINCIPAL_KEY], [(f"Cluster:{cluster}", "Admin")])


async def _handle_mapped(request: Request, exc: Exception) -> Response:
    status, code = lookup(ERROR_TABLE, exc)
    return error_response(status, code, str(exc) or type(exc).__name__)


async def _handle_auth(request: Request, exc: Exception) -> Response:
    return response_for(exc)  # AccessDeniedError: the broker's 403 permission_denied


def install_handlers(app: FastAPI) -> None:
    """Register the mapped handler plus FastAPI's validation and HTTP errors."""
    app.add_exception_handler(NamesrvError, _handle_mapped)
    app.add_exception_handler(BrokerError, _handle_auth)
    install_common_handlers(app, "NameServer API")
