"""The ``sparkmq`` command line: one module per command group.

``root`` holds the typer app and ``serve``; ``topic``, ``produce``,
``consume``, ``groups``, ``sql`` and ``bench`` hold their command groups;
``common`` the shared options, client opener and output rules; ``progress``
the stderr progress bar.  Importing it does not load FastAPI.

It starts fast (issue 33): typer reads every command's options when the app
is built, so a command module imports only typer, rich and its option
declarations at load time; httpx (the client), pydantic (the settings),
numpy and pyarrow (the Producer, the store) and the benchmark suite load
inside the command that uses them.  ``tests/test_layout.py`` checks that
importing this package loads none of them.
"""

from __future__ import annotations

from .root import app, main

__all__ = ["app", "main"]
