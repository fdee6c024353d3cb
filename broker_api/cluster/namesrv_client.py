"""A small NameServer client: route and cluster lookups across several NameServers."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import httpx

from ..errors import NamesrvUnavailableError, TopicRouteNotFoundError
from ..settings.addresses import parse_namesrv_addrs

__all__ = ["NamesrvClient"]


class NamesrvClient:
    """Ask each NameServer in turn; the first one that knows the answer wins.

    ``addrs`` is ``"host:port;host:port"`` or a list of addresses.  A
    NameServer that is down, or that does not know a topic yet (it may have
    just restarted), is skipped.
    """

    def __init__(self, addrs: str | Iterable[str], timeout_s: float = 3.0, **http_options: Any) -> None:
        """``http_options`` go to ``httpx.Client`` (credentials, ``verify``: see ``client/auth.py``)."""
        self.addrs = parse_namesrv_addrs(addrs)
        self._http = httpx.Client(timeout=timeout_s, **http_options)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> NamesrvClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def route(self, topic: str) -> dict[str, Any]:
        """``GET /v1/routes/{topic}``; raises TopicRouteNotFoundError or NamesrvUnavailableError."""
        return self._get(f"/v1/routes/{topic}", missing=f"no live broker serves topic {topic!r}")

    def cluster(self) -> dict[str, Any]:
        """``GET /v1/cluster`` from the first NameServer that answers."""
        return self._get("/v1/cluster", missing="")

    def topics(self) -> dict[str, list[str]]:
        """``GET /v1/topics``: topic -> broker names, from the first NameServer that answers."""
        return dict(self._get("/v1/topics", missing="")["topics"])

    def _get(self, path: str, missing: str) -> dict[str, Any]:
        errors: list[str] = []
        not_found = False
        for base in self.addrs:
            try:
                resp = self._http.get(base + path)
            except httpx.HTTPError as exc:
                errors.append(f"{base}: {type(exc).__name__}")
                continue
            if resp.status_code == 200:
                return dict(resp.json())
            if resp.status_code == 404 and missing:
                not_found = True
                continue
            errors.append(f"{base}: HTTP {resp.status_code} {resp.text[:200]}")
        if not_found:
            raise TopicRouteNotFoundError(f"{missing} (asked {', '.join(self.addrs)})")
        raise NamesrvUnavailableError(f"no NameServer answered {path}: {'; '.join(errors)}")
