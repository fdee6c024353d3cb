"""Run the broker under uvicorn: one ready line, clean SIGTERM / Ctrl-C shutdown.

uvicorn handles SIGINT and SIGTERM by closing the listening socket, draining
connections and running the lifespan shutdown (which flushes the store,
persists offsets and removes the abort marker).

Once the main socket listens, the control listener (``[server] admin_port``,
see :mod:`broker_api.http.control`) starts; the ready line names both and
the anonymous-memory figure the in-flight bounds allow.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import socket
import sys
from collections.abc import Generator
from typing import Any

import uvicorn

from store import StoreError

from .http.app import create_app
from .http.control import ControlServer
from .broker import Broker
from .protection.memory import memory_bound_bytes, tune_allocator
from .protection.slow_clients import deadline_protocol
from .settings.broker import BrokerSettings

__all__ = ["main_socket", "serve"]

# The GIL is handed between threads every 1 ms instead of 5 ms, so the event loop gets it back
# soon after the reput thread (or a write-pool put) took it: a woken long poll waits less.
_SWITCH_INTERVAL_S = 0.001
# The manual the ready line names: the documentation site built from the clone's docs/.
DOCS_SITE = "docs/ in the clone (pip install -e '.[docs]' && mkdocs serve)"


def tune_runtime(settings: BrokerSettings) -> None:
    """``[runtime]``: the GIL switch interval, and the start-up heap frozen out of the collector."""
    sys.setswitchinterval(_SWITCH_INTERVAL_S)
    r = settings.runtime
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(r.gc_threshold, gen1, gen2)
    if r.gc_freeze:
        gc.collect()
        gc.freeze()


class _Server(uvicorn.Server):
    """uvicorn's server that prints one line once the socket is listening."""

    def __init__(self, config: uvicorn.Config, settings: BrokerSettings, broker: Broker) -> None:
        super().__init__(config)
        self._settings = settings
        self._broker = broker
        self._control: ControlServer | None = None

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        # uvicorn re-raises SIGTERM/SIGINT after a graceful shutdown (exit -15 or a
        # KeyboardInterrupt traceback); a broker that shut down cleanly exits 0.
        with super().capture_signals():
            try:
                yield
            finally:
                self._captured_signals.clear()

    async def serve(self, sockets: Any = None) -> None:
        # The main socket is bound first, so the listeners the broker opens on a free port
        # (HA, control) can never take the port it was told to serve on. Then the broker
        # starts before uvicorn, so a start-up failure (store locked, unreadable data dir,
        # a listener's port taken) is one clear line instead of a lifespan traceback.
        broker = self._broker
        loop = asyncio.get_running_loop()
        if sockets is None:
            try:
                sockets = [main_socket(self.config.host, self.config.port, self.config.backlog)]
            except OSError as exc:
                print(f"error: cannot listen on {self.config.host}:{self.config.port}: {exc.strerror or exc}; "
                      "is another broker running there? pick another --port", file=sys.stderr, flush=True)
                return
        try:
            try:
                await loop.run_in_executor(None, broker.start, loop)
            except (StoreError, OSError) as exc:
                print(f"error: the broker cannot start: {exc}", file=sys.stderr, flush=True)
                return
            await super().serve(sockets)
        finally:
            for sock in sockets:
                sock.close()

    async def shutdown(self, sockets: Any = None) -> None:
        # Release parked long polls first so draining connections is quick.
        broker = self._broker
        if broker is not None:
            broker.ready = False
            if broker.waiters is not None:
                broker.waiters.wake_all()
        await super().shutdown(sockets)
        if self._control is not None:
            await asyncio.get_running_loop().run_in_executor(None, self._control.stop)
            self._control = None

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets)
        if self.started:
            b = self._settings.broker
            host, port = b.host, b.port
            for server in getattr(self, "servers", []):
                for sock in server.sockets:
                    host, port = sock.getsockname()[:2]
                    break
            scheme = self._settings.scheme
            self._broker.start_registration(f"{scheme}://{self._settings.advertised_host()}:{port}")
            control = self._start_control(host)
            tune_runtime(self._settings)
            bound = memory_bound_bytes(self._settings) >> 20
            kafka = self._broker.kafka
            control += f"; kafka listener on {kafka.address}" if kafka is not None else ""
            url = f"{scheme}://{host}:{port}"
            print(
                f"sparkmq broker {b.name} ready on {url} (data in {self._settings.data_path.resolve()})"
                f"{control}; anonymous memory bound ~{bound} MiB with 1000 connections ([server] *_inflight_bytes)"
                f"; console: {url}/console, API: {url}/docs, manual: {DOCS_SITE}",
                flush=True,
            )

    def _start_control(self, host: str) -> str:
        """Start the control listener (unless admin_port = -1); the ready line's mention of it."""
        port = self._settings.server.admin_port
        if port < 0:
            return ""
        self._control = ControlServer(self._broker, host, port, self._settings.broker.log_level)
        try:
            address = self._control.start()
        except OSError as exc:
            self._control = None
            logging.getLogger(__name__).error("control listener not started: %s", exc)
            return ""
        self._broker.admin_address = address
        return f"; control listener (/healthz /readyz /metrics /v1/broker) on {self._settings.scheme}://{address}"


def main_socket(host: str, port: int, backlog: int) -> socket.socket:
    """The broker's main listening socket on ``host:port`` (IPv6 when the host has a colon).

    Made with ``IPPROTO_TCP`` as its protocol, as asyncio's own ``create_server`` makes it:
    asyncio turns Nagle off (``TCP_NODELAY``) only on accepted sockets that say so, and
    with Nagle on a long poll's answer waits for the client's delayed ACK (~40 ms).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind((host, port))
        sock.listen(backlog)
    except OSError:
        sock.close()
        raise
    return sock


def serve(settings: BrokerSettings) -> None:
    """Serve until SIGINT/SIGTERM; exits non-zero if start-up fails."""
    level = settings.broker.log_level
    logging.basicConfig(level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    tune_allocator()
    app = create_app(settings)
    config = uvicorn.Config(
        app,
        host=settings.broker.host,
        port=settings.broker.port,
        log_level=level,
        access_log=False,
        lifespan="on",
        loop=settings.server.event_loop,
        timeout_graceful_shutdown=5,
        ssl_certfile=settings.tls.certfile or None,
        ssl_keyfile=settings.tls.keyfile or None,
        http=_http_protocol(settings, app.state.broker),
    )
    server = _Server(config, settings, app.state.broker)
    server.run()
    if not server.started:
        sys.exit(1)


def _http_protocol(settings: BrokerSettings, broker: Broker) -> type:
    """uvicorn's HTTP protocol (httptools when installed, as its "auto") with the header read deadline."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as base
    except ImportError:  # no httptools: uvicorn's pure-Python h11 protocol
        from uvicorn.protocols.http.h11_impl import H11Protocol as base  # type: ignore[assignment]

    def late() -> None:
        broker.metrics.requests_rejected.inc(route="connection", reason="header_timeout")

    return deadline_protocol(base, settings.server.header_read_timeout_s, late)
