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

from .client import BrokerClient
from .errors import TopicNotFoundError
from .namesrv import NamesrvLookup
from .offsets import QueueKey, QueueRange, key_broker
from .options import ClientConfig

__all__ = ["Brokers", "SingleBroker", "RoutedBrokers", "open_brokers"]


class Brokers:
    """Which queues exist, and a client for the broker that owns a queue."""

    routed = False

    def topics(self) -> list[str]:
        raise NotImplementedError

    def queues(self, topic: str) -> dict[QueueKey, QueueRange]:
        """Queue windows of ``topic``; raises TopicNotFoundError when nobody serves it."""
        raise NotImplementedError

    def client_for(self, key: QueueKey) -> BrokerClient:
        raise NotImplementedError

    def address(self, broker: str) -> str:
        """The URL of ``broker`` ('' for the single-broker view)."""
        return ""

    def serving(self, topic: str) -> dict[str, str]:
        """Broker name → address of the brokers serving ``topic`` ({} for one broker)."""
        return {}

    def close(self) -> None:
        raise NotImplementedError


class SingleBroker(Brokers):
    """The ``endpoint`` option: one logical broker (several URLs fail over)."""

    def __init__(self, config: ClientConfig) -> None:
        self._client = BrokerClient(config)

    def topics(self) -> list[str]:
        return self._client.topics()

    def queues(self, topic: str) -> dict[QueueKey, QueueRange]:
        return {(topic, q): rng for q, rng in self._client.queues(topic).items()}

    def client_for(self, key: QueueKey) -> BrokerClient:
        return self._client

    def close(self) -> None:
        self._client.close()


class RoutedBrokers(Brokers):
    """The ``namesrv`` option: routes from the NameServer(s), queues from each broker."""

    routed = True

    def __init__(self, config: ClientConfig) -> None:
        self._config = config
        self._lookup = NamesrvLookup(config.namesrv, timeout_s=min(10.0, config.timeout_s))
        self._clients: dict[str, BrokerClient] = {}
        self.addresses: dict[str, str] = {}

    def topics(self) -> list[str]:
        return self._lookup.topics()

    def serving(self, topic: str) -> dict[str, str]:
        """Broker name → address of the brokers serving ``topic`` now (readable ones)."""
        route = self._lookup.route(topic)
        found = {name: r.address for name, r in route.items() if r.read_queues > 0}
        self.addresses.update(found)
        return found

    def queues(self, topic: str) -> dict[QueueKey, QueueRange]:
        out: dict[QueueKey, QueueRange] = {}
        for name, addr in self.serving(topic).items():
            try:
                windows = self._client(addr).queues(topic)
            except TopicNotFoundError:
                continue  # the route is a heartbeat behind a topic deletion
            out.update({(topic, name, q): rng for q, rng in windows.items()})
        return out

    def client_for(self, key: QueueKey) -> BrokerClient:
        broker = key_broker(key)
        if broker not in self.addresses:
            self.serving(key[0])
        if broker not in self.addresses:
            raise TopicNotFoundError(
                f"broker {broker!r} does not serve topic {key[0]!r} according to the "
                f"NameServer(s) {list(self._config.namesrv)}",
                status=404, code="topic_not_found",
            )
        return self._client(self.addresses[broker])

    def address(self, broker: str) -> str:
        return self.addresses.get(broker, "")

    def _client(self, addr: str) -> BrokerClient:
        if addr not in self._clients:
            self._clients[addr] = BrokerClient(
                ClientConfig(endpoints=(addr,), timeout_s=self._config.timeout_s)
            )
        return self._clients[addr]

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()
        self._lookup.close()


def open_brokers(config: ClientConfig) -> Brokers:
    """The view the options ask for."""
    return RoutedBrokers(config) if config.routed else SingleBroker(config)
