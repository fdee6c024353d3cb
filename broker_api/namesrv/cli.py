"""``sparkmq namesrv``: the typer command (registered by ``broker_api.cli``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from .server import run_namesrv

__all__ = ["namesrv_command"]


def namesrv_command(
    host: Annotated[Optional[str], typer.Option(help="Listen address (default 127.0.0.1).")] = None,
    port: Annotated[Optional[int], typer.Option(help="Listen port (default 9876; 0 = any free port).")] = None,
    config: Annotated[
        Optional[Path], typer.Option(help="TOML settings file (default ./conf/namesrv.toml if present).")
    ] = None,
) -> None:
    """Run a NameServer (settings: flags > SPARKMQ_NAMESRV_* env > TOML file > defaults)."""
    run_namesrv(host, port, str(config) if config is not None else None)
