"""Which broker paths are open, and which only need a login at the front door.

What each route needs beyond a login is declared next to its handler
(``@requires(...)``, :mod:`broker_api.http.guard`, needs in :mod:`.needs`)
and checked from the values the handler receives; the front door
(:mod:`broker_api.http.auth`) only authenticates, before admission:

=====================================================  ==============================================
path                                                   at the front door
=====================================================  ==============================================
GET /healthz, /docs, /openapi.json, /redoc             nothing (open)
GET /console, /console/{file}                          nothing (the web console's static files)
GET /readyz, /metrics, /v1/broker                      open, or a user when ``[auth] control_open`` is false
anything else                                          an authenticated user (then the route's needs)
=====================================================  ==============================================
"""

from __future__ import annotations

from .authn import Permission

__all__ = ["CONTROL_PATHS", "OPEN_PATHS", "broker_access", "is_open"]

OPEN_PATHS = frozenset({"/healthz", "/docs", "/docs/oauth2-redirect", "/openapi.json", "/redoc"})
CONTROL_PATHS = frozenset({"/readyz", "/metrics", "/v1/broker"})
_CONSOLE = "/console"


def is_open(path: str) -> bool:
    """True for the routes anyone may call: health, the API documents, the console's static files."""
    return path in OPEN_PATHS or path == _CONSOLE or path.startswith(_CONSOLE + "/")


def broker_access(path: str, control_open: bool = True) -> list[Permission] | None:
    """``None`` when ``path`` is open, else ``[]``: a user is needed (the route checks the rest)."""
    if is_open(path) or (control_open and path in CONTROL_PATHS):
        return None
    return []
