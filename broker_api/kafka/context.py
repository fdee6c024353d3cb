"""What the Kafka handlers share: the broker's parts they use, this node's identity, producer state."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..model.groups import GroupManager
from ..model.topics import TopicConfig, TopicManager
from ..settings.sections import KafkaSection
from .mapping import kafka_topic_ok

__all__ = ["BrokerParts", "KafkaContext", "Node"]


class BrokerParts(Protocol):
    """The parts of :class:`broker_api.broker.Broker` the listener uses (the kafka room does not import it)."""

    store: Any
    topics: TopicManager
    groups: GroupManager
    writer: Any
    gate: Any
    replication: Any
    waiters: Any
    settings: Any

    def settle(self, timeout_s: float = 1.0) -> None: ...

    def queue_range(self, topic: str, queue_id: int) -> tuple[int, int]: ...


@dataclass(frozen=True, slots=True)
class Node:
    """This broker as Kafka clients see it."""

    node_id: int
    host: str
    port: int
    cluster_id: str


@dataclass(slots=True)
class _Sequence:
    """Per producer id and partition: the epoch and the last batches' (first seq, last seq, base offset)."""

    epoch: int
    recent: list[tuple[int, int, int]] = field(default_factory=list)
    recovered: bool = False  # whether the log's stamps were read back (producer_state.py)


@dataclass
class KafkaContext:
    """Everything a handler needs; one per listener."""

    broker: BrokerParts
    config: KafkaSection
    node: Node
    sequences: dict[tuple[int, str, int], _Sequence] = field(default_factory=dict)
    coordinator: Any = None  # the group coordinator (groups.py), set by the listener
    sasl: Any = None  # the SASL/PLAIN gate (sasl.py), set by the listener
    ahead: Any = None  # Fetch's pages built ahead (fetch_ahead.py), set by the listener; None: off
    _next_producer_id: int = field(default_factory=lambda: int(time.time() * 1000) << 8)
    first_producer_id: int = 0  # ids below it were handed out before this start

    def __post_init__(self) -> None:
        self.first_producer_id = self._next_producer_id + 1

    def new_producer_id(self) -> int:
        """A producer id not handed out before (time based, so it is fresh after a restart)."""
        self._next_producer_id += 1
        return self._next_producer_id

    def kafka_topics(self) -> list[TopicConfig]:
        """Topics Kafka clients see: not system topics, and only names Kafka accepts."""
        return [t for t in self.broker.topics.list() if kafka_topic_ok(t.name)]

    def allowed(self, session: dict[str, Any], resource: str, action: str) -> bool:
        """Whether the connection's user may do ``action`` on ``resource`` (always, with [auth] off)."""
        return self.sasl is None or self.sasl.allowed(session.get("principal"), resource, action)

    def topic_allowed(self, session: dict[str, Any], topic: str, action: str) -> bool:
        return self.allowed(session, f"Topic:{topic}", action)

    def sequence(self, producer_id: int, topic: str, partition: int, epoch: int) -> _Sequence:
        key = (producer_id, topic, partition)
        state = self.sequences.get(key)
        if state is None or state.epoch != epoch:
            state = self.sequences[key] = _Sequence(epoch)
        return state
