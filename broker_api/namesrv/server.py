"""Run the NameServer under uvicorn: one ready line, clean SIGTERM / Ctrl-C exit."""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Generator
from pathlib import Path
from typing import Any

import uvicorn

from .app import create_namesrv_app
from ..settings.namesrv import NamesrvSettings, load_namesrv_settings

__all__ = ["run_namesrv", "serve_namesrv"]


class _Server(uvicorn.Server):
    """uvicorn's server that prints one line once the socket listens, and exits 0 on SIGTERM."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        with super().capture_signals():
            try:
                yield
            finally:
                self._captured_signals.clear()  # a clean shutdown is not an error

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets)
        if self.started:
            host, port = self.config.host, self.config.port
            for server in getattr(self, "servers", []):
                for sock in server.sockets:
                    host, port = sock.getsockname()[:2]
                    break
            scheme = "https" if self.config.ssl_certfile else "http"
            print(f"sparkmq namesrv ready on {scheme}://{host}:{port}", flush=True)


def serve_namesrv(settings: NamesrvSettings) -> None:
    """Serve until SIGINT/SIGTERM; exits 1 when start-up fails (e.g. port in use)."""
    level = settings.log_level
    logging.basicConfig(level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    config = uvicorn.Config(
        create_namesrv_app(settings),
        host=settings.host,
        port=settings.port,
        log_level="warning" if level == "info" else level,
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=5,
        ssl_certfile=settings.tls_certfile or None,
        ssl_keyfile=settings.tls_keyfile or None,
    )
    server = _Server(config)
    server.run()
    if not server.started:
        sys.exit(1)


def run_namesrv(host: str | None = None, port: int | None = None, config: str | Path | None = None) -> None:
    """``sparkmq namesrv``: settings from flags > SPARKMQ_NAMESRV_* env > TOML > defaults.

    Exits 2 with a message when the config file is missing or a setting is invalid.
    """
    from pydantic import ValidationError

    try:
        settings = load_namesrv_settings(config, host=host, port=port)
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    except ValidationError as exc:
        print(f"error: invalid NameServer settings: {exc}", file=sys.stderr)
        sys.exit(2)
    serve_namesrv(settings)
