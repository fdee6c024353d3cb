"""The web console: static pages at ``/console`` on the broker and on the NameServer.

No build step: ``console_assets/`` holds plain HTML, CSS and ES modules that
call only the public JSON API (``/v1/...``, ``/metrics``) from the browser.
This module serves those files and nothing else:

    GET /console           the broker's console (index.html) or the NameServer's (cluster.html)
    GET /console/{name}    one asset: a file name of console_assets/ (.html .js .css)

The routes are left out of the OpenAPI document and are open with ``[auth]``
on (the page holds no data; each API call it makes carries the token typed
into its token box).
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Literal

from fastapi import APIRouter
from starlette.responses import Response

from ..auth.needs import OPEN
from .errors import error_response
from .guard import GuardedRoute, requires

__all__ = ["ASSETS", "console_router"]

ASSETS = Path(__file__).with_name("console_assets")
_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,40}\.(html|js|css)$")
_TYPES = {"html": "text/html; charset=utf-8", "js": "text/javascript; charset=utf-8",
          "css": "text/css; charset=utf-8"}
_PAGES = {"broker": "index.html", "namesrv": "cluster.html"}


@lru_cache(maxsize=64)
def _read(name: str) -> bytes:
    return (ASSETS / name).read_bytes()


def _asset(name: str) -> Response:
    match = _NAME.match(name)
    if match is None or not (ASSETS / name).is_file():
        return error_response(404, "not_found", f"the console has no file {name!r}; open /console")
    headers = {"Cache-Control": "no-cache"}  # a broker upgrade must not leave a stale script behind
    return Response(_read(name), media_type=_TYPES[match.group(1)], headers=headers)


def console_router(kind: Literal["broker", "namesrv"]) -> APIRouter:
    """The two console routes; ``kind`` picks the page served at ``/console``."""
    router = APIRouter(include_in_schema=False, route_class=GuardedRoute)
    page = _PAGES[kind]

    @router.get("/console")
    @requires(OPEN, query=("poll_ms",))  # read by the page's own script (rates.js)
    async def console_page() -> Response:
        return _asset(page)

    @router.get("/console/{name}")
    @requires(OPEN)
    async def console_asset(name: str) -> Response:
        return _asset(name)

    return router
