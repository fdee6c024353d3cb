"""``sparkmq namesrv``: the typer command (registered by ``broker_api.cli``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .common import check_listen_address, fail, note, validation_summary

__all__ = ["namesrv_command"]


def namesrv_command(
    host: Annotated[str | None, typer.Option(help="Listen address (default: 127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option(help="Listen port (default: 9876; 0 = any free port).")] = None,
    config: Annotated[
        Path | None, typer.Option(help="TOML settings file (default: ./conf/namesrv.toml if present).")
    ] = None,
    ssl_certfile: Annotated[Path | None, typer.Option(
        "--ssl-certfile", help="PEM certificate chain: serve HTTPS (tls_certfile).")] = None,
    ssl_keyfile: Annotated[Path | None, typer.Option(
        "--ssl-keyfile", help="PEM private key of --ssl-certfile (tls_keyfile).")] = None,
    controller: Annotated[bool | None, typer.Option(
        "--controller/--no-controller", help="Embed the failover controller (controller_enabled): brokers "
        "started with --controller heartbeat here and a silent master is replaced.")] = None,
) -> None:
    """Run a NameServer (brokers register, clients look up routes).

    Settings: flags > SPARKMQ_NAMESRV_<FIELD> environment > TOML file >
    defaults. Prints one line when ready; Ctrl-C or SIGTERM stops it.

    Examples:

      sparkmq namesrv

      sparkmq namesrv --port 9877 --config conf/namesrv.toml

      sparkmq namesrv --controller     (automatic failover: docs/guides/failover.md)

      SPARKMQ_NAMESRV_AUTH_ENABLED=true sparkmq namesrv --ssl-certfile cert.pem --ssl-keyfile key.pem
    """
    from pydantic import ValidationError  # settings (pydantic) load only when the command runs

    from ..auth import exposure_warning
    from ..settings.namesrv import load_namesrv_settings

    try:
        settings = load_namesrv_settings(config, host=host, port=port,
                                         tls_certfile=str(ssl_certfile) if ssl_certfile else None,
                                         tls_keyfile=str(ssl_keyfile) if ssl_keyfile else None,
                                         controller_enabled=controller)
    except FileNotFoundError as exc:
        fail(str(exc), code=2)  # 2, as ``run_namesrv`` has always answered a bad configuration
    except ValidationError as exc:
        fail(f"invalid NameServer settings: {validation_summary(exc)}", code=2)
    check_listen_address(settings.host, settings.port, "NameServer")
    warning = exposure_warning(settings.host, settings.auth_enabled, bool(settings.tls_certfile), "NameServer")
    if warning:
        note(warning)
    from ..namesrv.server import serve_namesrv  # loads FastAPI: only when serving

    serve_namesrv(settings)
