"""``python -m broker_api.namesrv [--host H] [--port P] [--config F]``."""

from __future__ import annotations

import typer

from ..cli.namesrv import namesrv_command


def main() -> None:
    typer.run(namesrv_command)


if __name__ == "__main__":
    main()
