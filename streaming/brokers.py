"""Driver-side view of where queues live: one broker (``endpoint``) or a cluster (``namesrv``).

Both views answer the same questions with the same queue keys the planner
uses (see :mod:`offsets`)::

    SingleBroker   endpoint=URL[,URL]   keys (topic, queue_id)
    RoutedBrokers  namesrv=ADDR[;ADDR]  keys (topic, broker, queue_id); the
                                        NameServer says which brokers serve a
                                        topic, each broker says its queues

Only the driver holds one of these; executors get a broker address inside
each partition and talk to that broker directly.
"""

from __future__ import annotations

import logging

from .client import BrokerClient
from .errors import BrokerUnavailableError, NamesrvUnavailableError, TopicNotFoundError
from .health import BrokerHealth
from .namesrv import BrokerRoute, NamesrvLookup
from .offsets import QueueKey, QueueRange, key_broker
from .options import ClientConfig

__all__ = ["Brokers", "SingleBroker", "RoutedBrokers", "open_brokers"]

log = logging.getLogger("sparkmq.streaming")


class Brokers:
    """Which queues exist, and a client for the broker that owns a queue.

    ``health`` is the back-off shared by every client this view opens;
    ``unavailable`` holds, by broker name, the error of each broker that did
    not answer since :meth:`new_round` (the driver calls it once a batch).
    """

    routed = False

    def __init__(self) -> None:
        self.health = BrokerHealth()
        self.unavailable: dict[str, BrokerUnavailableError] = {}

    def new_round(self) -> None:
        """Forget which brokers failed in the previous round of look-ups."""
        self.unavailable.clear()

    def topics(self) -> list[str]:
        raise NotImplementedError

    def queues(self, topic: str) -> dict[QueueKey, QueueRange]:
        """Queue windows of ``topic``; raises TopicNotFoundError when nobody serves it."""
        raise NotImplementedError

    def client_for(self, key: QueueKey) -> BrokerClient:
        raise NotImplementedError

    def addresses(self, broker: str) -> tuple[str, ...]:
        """Addresses of ``broker``, those to try first first (() for the single-broker view)."""
        return ()

    def refresh(self, topic: str) -> None:
        """Look the routes of ``topic`` up again (nothing to do for one broker)."""

    def listed(self, topic: str, broker: str) -> bool | None:
        """Whether the NameServer routes ``topic`` to ``broker`` (None: it did not answer)."""
        return None

    def close(self) -> None:
        raise NotImplementedError


class SingleBroker(Brokers):
    """The ``endpoint`` option: one broker (its master URL, then its slaves')."""

    def __init__(self, config: ClientConfig) -> None:
        super().__init__()
        self._config = config
        self._client = BrokerClient(config, health=self.health, rounds=config.retries)

    def topics(self) -> list[str]:
        return self._client.topics()

    def queues(self, topic: str) -> dict[QueueKey, QueueRange]:
        return {(topic, q): rng for q, rng in self._client.queues(topic).items()}

    def client_for(self, key: QueueKey) -> BrokerClient:
        return self._client

    def addresses(self, broker: str) -> tuple[str, ...]:
        return tuple(self.health.order(self._config.endpoints))

    def close(self) -> None:
        self._client.close()


class RoutedBrokers(Brokers):
    """The ``namesrv`` option: routes from the NameServer(s), queues from each broker.

    A broker that does not answer is left out of :meth:`queues` (and noted
    in ``unavailable``); the caller decides how long to wait for it. When no
    NameServer answers, the routes last seen for a topic are used.
    """

    routed = True

    def __init__(self, config: ClientConfig) -> None:
        super().__init__()
        self._config = config
        self._lookup = NamesrvLookup(config.namesrv, timeout_s=min(10.0, config.timeout_s), trust=config.trust)
        self._clients: dict[tuple[str, ...], BrokerClient] = {}
        self._serving: dict[str, dict[str, BrokerRoute]] = {}
        self._namesrv_down: set[str] = set()
        self.routes: dict[str, BrokerRoute] = {}

    def topics(self) -> list[str]:
        return self._lookup.topics()

    def serving(self, topic: str) -> dict[str, BrokerRoute]:
        """Broker name → route of the readable brokers serving ``topic`` now."""
        try:
            route = self._lookup.route(topic)
        except NamesrvUnavailableError as exc:
            self._namesrv_down.add(topic)
            if topic not in self._serving:
                raise
            log.warning("%s; using the routes of %r seen last", exc, topic)
            return self._serving[topic]
        except TopicNotFoundError:
            self._serving[topic] = {}
            self._namesrv_down.discard(topic)
            raise
        found = {name: r for name, r in route.items() if r.read_queues > 0}
        self._serving[topic] = found
        self._namesrv_down.discard(topic)
        self.routes.update(found)
        return found

    def refresh(self, topic: str) -> None:
        self.serving(topic)

    def listed(self, topic: str, broker: str) -> bool | None:
        if topic in self._namesrv_down:
            return None
        return broker in self._serving.get(topic, {})

    def queues(self, topic: str) -> dict[QueueKey, QueueRange]:
        out: dict[QueueKey, QueueRange] = {}
        for name, route in self.serving(topic).items():
            try:
                windows = self._client(route).queues(topic)
            except TopicNotFoundError:
                continue  # the route is a heartbeat behind a topic deletion
            except BrokerUnavailableError as exc:
                self.unavailable[name] = exc
                continue
            out.update({(topic, name, q): rng for q, rng in windows.items()})
        return out

    def client_for(self, key: QueueKey) -> BrokerClient:
        broker = key_broker(key)
        if broker not in self.routes:
            try:
                self.serving(key[0])
            except TopicNotFoundError:
                pass
        if broker not in self.routes:
            raise TopicNotFoundError(
                f"broker {broker!r} does not serve topic {key[0]!r} according to the "
                f"NameServer(s) {list(self._config.namesrv)}",
                status=404, code="topic_not_found",
            )
        return self._client(self.routes[broker])

    def addresses(self, broker: str) -> tuple[str, ...]:
        route = self.routes.get(broker)
        return tuple(self.health.order(route.addresses)) if route else ()

    def _client(self, route: BrokerRoute) -> BrokerClient:
        if route.addresses not in self._clients:
            config = ClientConfig(endpoints=route.addresses, timeout_s=self._config.timeout_s,
                                  broker=route.name, trust=self._config.trust)
            # one pass: a broker that does not answer is waited for by the caller
            self._clients[route.addresses] = BrokerClient(config, health=self.health, rounds=1)
        return self._clients[route.addresses]

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()
        self._lookup.close()


def open_brokers(config: ClientConfig) -> Brokers:
    """The view the options ask for."""
    return RoutedBrokers(config) if config.routed else SingleBroker(config)
