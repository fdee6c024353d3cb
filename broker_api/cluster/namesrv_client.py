"""A small NameServer client: route and cluster lookups across several NameServers."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import httpx

from ..errors import NamesrvUnavailableError, TopicRouteNotFoundError
from ..settings.addresses import parse_namesrv_addrs

__all__ = ["NamesrvClient", "started_ms", "uptime_s"]

UPTIME_HEADER = "X-Namesrv-Uptime-S"
STARTED_HEADER = "X-Namesrv-Started-Ms"


def uptime_s(resp: httpx.Response) -> float | None:
    """The answering NameServer's uptime (its ``X-Namesrv-Uptime-S``), None from an older one."""
    try:
        return float(resp.headers[UPTIME_HEADER])
    except (KeyError, ValueError):
        return None


def started_ms(resp: httpx.Response) -> int | None:
    """The answering NameServer's start time (``X-Namesrv-Started-Ms``): a new value means it restarted."""
    try:
        return int(resp.headers[STARTED_HEADER])
    except (KeyError, ValueError):
        return None


class NamesrvClient:
    """Ask each NameServer in turn; the first one that knows the answer wins.

    ``addrs`` is ``"host:port;host:port"`` or a list of addresses.  A
    NameServer that is down, or that does not know a topic yet (it may have
    just restarted), is skipped.  When every answer is "not found", the
    error's ``namesrv_uptime_s`` is the longest uptime of those that said so
    (None when one did not say): a young NameServer's "not found" may only
    mean its brokers have not re-registered yet.
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
        """``GET /v1/routes/{topic}``, with ``namesrv_uptime_s`` of the NameServer that answered (None if
        it did not say); raises TopicRouteNotFoundError or NamesrvUnavailableError."""
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
        uptimes: list[float | None] = []
        for base in self.addrs:
            try:
                resp = self._http.get(base + path)
            except httpx.HTTPError as exc:
                errors.append(f"{base}: {type(exc).__name__}")
                continue
            if resp.status_code == 200:
                return {**resp.json(), "namesrv_uptime_s": uptime_s(resp)}
            if resp.status_code == 404 and missing:
                not_found = True
                uptimes.append(uptime_s(resp))
                continue
            errors.append(f"{base}: HTTP {resp.status_code} {resp.text[:200]}")
        if not_found:
            exc = TopicRouteNotFoundError(f"{missing} (asked {', '.join(self.addrs)})")
            known = [u for u in uptimes if u is not None]
            exc.namesrv_uptime_s = max(known) if len(known) == len(uptimes) else None  # type: ignore[attr-defined]
            raise exc
        raise NamesrvUnavailableError(f"no NameServer answered {path}: {'; '.join(errors)}")
