"""The broker's HTTP front door: the FastAPI app and everything that speaks HTTP.

``app`` builds the application and its lifespan; ``hotpath`` serves produce
and pull without FastAPI's per-request overhead; one module per route group
(``messages``, ``admin``, ``groups``, ``transactions``, ``ops``, ``sql``);
``wire`` the JSON/raw/Arrow formats; ``errors`` the one error-to-HTTP
mapping; ``openapi`` the request/response documentation.  New route groups
are new modules here, registered in ``app``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_getattr

if TYPE_CHECKING:
    from .app import create_app

__getattr__ = lazy_getattr(__name__, {"create_app": "app"})

__all__ = ["create_app"]
