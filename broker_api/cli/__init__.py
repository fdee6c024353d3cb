"""The ``sparkmq`` command line: one module per command group.

``root`` holds the typer app and ``serve``; ``topic``, ``produce``,
``consume``, ``groups``, ``sql`` and ``bench`` hold their command groups;
``common`` the shared options, client opener and output rules; ``progress``
the stderr progress bar.  Importing it does not load FastAPI.
"""

from __future__ import annotations

from .root import app, main

__all__ = ["app", "main"]
