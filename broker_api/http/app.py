"""The FastAPI application: routers, error handlers and the broker lifespan."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from ..broker import Broker
from ..settings.broker import BrokerSettings
from . import admin, groups, ha, messages, ops, pop, sql, transactions
from .auth import install_auth
from .console import console_router
from .contract import install_contract, operation_id
from .errors import install_handlers
from .hotpath import HotPathMiddleware

__all__ = ["create_app"]

log = logging.getLogger(__name__)


def create_app(settings: BrokerSettings) -> FastAPI:
    """Build the app; the broker starts in the lifespan and is ``app.state.broker``."""
    broker = Broker(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        loop = asyncio.get_running_loop()
        if not broker.ready:  # `sparkmq serve` starts it before uvicorn; embedders rely on this
            await loop.run_in_executor(None, broker.start, loop)
        app.state.mirror = broker.mirror
        try:
            yield
        finally:
            await loop.run_in_executor(None, broker.stop)

    app = FastAPI(
        title="sparkmq broker",
        version="0.1.0",
        description="RocketMQ-style broker: produce, long-poll pull (JSON or Arrow), consumer groups, "
        "transactions, exactly-once sink commits. Errors are {\"error\": code, \"message\": text}.",
        lifespan=lifespan,
        generate_unique_id_function=operation_id,
    )
    install_contract(app, settings)
    app.state.broker = broker
    app.state.settings = settings
    app.state.mirror = None
    install_handlers(app)
    app.add_middleware(HotPathMiddleware)
    app.add_middleware(ha.SlaveGuardMiddleware)  # a slave refuses writes before admission
    install_auth(app, settings)  # outermost when [auth] enabled: no credentials, no admission slot
    app.include_router(ops.control_router)
    for module in (messages, admin, groups, pop, transactions, ops, sql, ha):
        app.include_router(module.router)
    app.include_router(console_router("broker"))
    return app
