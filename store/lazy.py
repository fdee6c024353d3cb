"""Package attributes imported on first use (PEP 562): a package's face names its classes, and importing one
light module (or the CLI) does not load numpy, pyarrow or Delta Lake behind the others.

The one ``lazy_getattr``: ``connectors.lazy`` and ``broker_api.lazy`` re-export it.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["lazy_getattr"]


def lazy_getattr(package: str, names: dict[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: ``names`` maps an attribute to its submodule."""

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f".{module}", package), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
