"""The client's topic routes from the NameServers, kept through a NameServer's outage and restart.

    NameServers down                 -> the cached route (a warning), as long as they stay down
    "not found" from a young one     -> the cached route: a NameServer that started less than
                                        ``grace_s`` ago has empty tables until brokers re-register
    a route from a young one         -> merged with the cached one: broker names it does not
                                        list yet keep their cached addresses
    "not found" from an old one      -> the topic is gone (TopicNotFoundError)

Every route seen also feeds :class:`~.placement.KnownBrokers` (keys stay on
their broker name) and a memory of which broker name each address served
(``message(id)`` finds the slaves of a master the NameServers dropped).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from ..cluster.namesrv_client import NamesrvClient
from ..errors import (
    NamesrvUnavailableError,
    TopicNotFoundError,
    TopicRouteNotFoundError,
)
from .placement import KnownBrokers
from .results import BrokerUnreachableError
from .routing import Route, parse_route

__all__ = ["RouteCache"]

log = logging.getLogger(__name__)


class RouteCache:
    """Routes per topic (cached ``ttl_s``), known broker names, and address -> broker name."""

    def __init__(self, namesrv: NamesrvClient, ttl_s: float, grace_s: float) -> None:
        self.namesrv = namesrv
        self.known = KnownBrokers()
        self._ttl_s, self._grace_s = ttl_s, grace_s
        self._routes: dict[str, Route] = {}
        self._names: dict[str, str] = {}  # "ip:port" of any address once seen -> its broker name
        self._lock = threading.Lock()

    def route(self, topic: str, refresh: bool = False) -> Route:
        cached = self._routes.get(topic)
        if cached is not None and not refresh and time.monotonic() - cached.fetched < self._ttl_s:
            return cached
        try:
            raw = self.namesrv.route(topic)
        except TopicRouteNotFoundError as exc:
            return self._not_found(topic, cached, exc)
        except NamesrvUnavailableError as exc:
            if cached is not None:  # keep serving from the last route while the NameServers are away
                log.warning("using the cached route of %r: %s", topic, exc.message)
                return cached
            raise BrokerUnreachableError(f"no NameServer answered: {exc.message}") from exc
        route = parse_route(raw)
        if cached is not None and self._young(raw.get("namesrv_uptime_s")):
            route = _merged(route, cached)
        self._remember(topic, route)
        return route

    def forget(self, topic: str) -> None:
        self._routes.pop(topic, None)
        self.known.forget(topic)

    def broker_of(self, host: str) -> str | None:
        """The broker name ``host`` ("ip:port") served when last seen in a route or cluster listing."""
        with self._lock:
            return self._names.get(host)

    def learn_hosts(self, brokers: list[dict[str, Any]]) -> None:
        """Remember the broker name of every address of a ``GET /v1/cluster`` listing."""
        with self._lock:
            self._names.update((_host(str(b["address"])), str(b["broker_name"])) for b in brokers)

    def _young(self, uptime: Any) -> bool:
        return isinstance(uptime, (int, float)) and uptime < self._grace_s

    def _not_found(self, topic: str, cached: Route | None, exc: TopicRouteNotFoundError) -> Route:
        if cached is not None and self._young(getattr(exc, "namesrv_uptime_s", None)):
            log.warning("the NameServer restarted %.1f s ago and does not route %r yet; using the cached route",
                        exc.namesrv_uptime_s, topic)  # type: ignore[attr-defined]
            return cached
        self._routes.pop(topic, None)
        raise TopicNotFoundError(
            f"{exc.message}; create it with SparkMQClient.create_topic or `sparkmq topic create {topic} "
            "--namesrv ...`") from exc

    def _remember(self, topic: str, route: Route) -> None:
        self._routes[topic] = route
        self.known.learn(topic, route)
        with self._lock:
            for name, ids in route.addresses.items():
                self._names.update((_host(url), name) for url in ids.values())


def _host(url: str) -> str:
    return url.split("://", 1)[-1].rstrip("/")


def _merged(fresh: Route, cached: Route) -> Route:
    """``fresh`` plus the broker names only ``cached`` lists (a young NameServer's partial route)."""
    missing = [n for n in cached.addresses if n not in fresh.addresses]
    if not missing:
        return fresh
    return Route({**fresh.addresses, **{n: cached.addresses[n] for n in missing}},
                 {**fresh.write_queues, **{n: cached.write_queues[n] for n in missing if n in cached.write_queues}},
                 {**fresh.read_queues, **{n: cached.read_queues[n] for n in missing if n in cached.read_queues}},
                 fresh.fetched)
