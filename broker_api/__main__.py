"""``python -m broker_api serve ...``: the same CLI as ``sparkmq``."""

from __future__ import annotations

from .cli import main

if __name__ == "__main__":
    main()
