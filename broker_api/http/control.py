"""The control listener: health, readiness, metrics and broker info that never starve.

RocketMQ opens a second ("VIP") server so admin calls do not share sockets
and threads with the data path.  Here the data path is one event loop, and a
loop saturated by a thousand producers answers everything late, health
probes included.  So the control routes (:data:`ops.control_router`) are also
served by a second uvicorn server on ``[server] admin_port``, running on a
thread with its own event loop: its requests wait at most for the GIL
(handed over every few milliseconds), never behind the data path's queue.

A thread waiting for the GIL gets it when the holder's switch interval
ends (5 ms by default); a request takes a few such hand-overs, so
:meth:`ControlServer.start` lowers the interval to 1 ms, which costs the data
path a few percent under load.

The routes only read the broker (counters, store statistics), so sharing it
across the two loops needs no locking beyond what those reads already have.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from typing import Any

import uvicorn
from fastapi import FastAPI

from ..broker import Broker
from . import ops
from .auth import install_auth
from .errors import install_handlers
from .hotpath import ControlCountingMiddleware

__all__ = ["ControlServer"]

_SWITCH_INTERVAL_S = 0.001


def _control_app(broker: Broker) -> FastAPI:
    app = FastAPI(title="sparkmq broker control", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.broker = broker
    app.state.settings = broker.settings
    install_handlers(app)
    app.add_middleware(ControlCountingMiddleware)
    install_auth(app, broker.settings)  # [auth] control_open = false: the control routes need a user too
    app.include_router(ops.control_router)
    return app


class ControlServer:
    """The control listener's thread and uvicorn server; ``start()`` returns once it listens."""

    def __init__(self, broker: Broker, host: str, port: int, log_level: str = "warning") -> None:
        tls = broker.settings.tls  # the same certificate as the main listener
        config = uvicorn.Config(_control_app(broker), host=host, port=port, log_level=log_level,
                                access_log=False, lifespan="off", loop="asyncio",
                                timeout_graceful_shutdown=1, ssl_certfile=tls.certfile or None,
                                ssl_keyfile=tls.keyfile or None)
        self._server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None
        self.address: str | None = None

    def start(self, timeout_s: float = 10.0) -> str:
        """Start serving; the ``host:port`` it listens on (raises OSError if it cannot)."""
        sys.setswitchinterval(_SWITCH_INTERVAL_S)
        self._thread = threading.Thread(target=self._run, name="sparkmq-control", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started and time.monotonic() < deadline and self._thread.is_alive():
            time.sleep(0.01)
        if not self._server.started:
            self.stop()
            raise OSError(f"the control listener did not start on {self._server.config.host}:"
                          f"{self._server.config.port}")
        servers: list[Any] = getattr(self._server, "servers", [])
        host, port = servers[0].sockets[0].getsockname()[:2]
        self.address = f"{host}:{port}"
        return self.address

    def _run(self) -> None:
        asyncio.run(self._server.serve())

    def stop(self) -> None:
        """Stop serving and join the thread (twice is safe)."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._server.should_exit = True
        thread.join(10)
