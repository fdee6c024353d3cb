"""POP consumption from the Python client: pop, ack, change_invisible, retry and the DLQ.

The broker's receipt (``offset:index:pop_time``) names no broker, so the client
hands out **broker-qualified receipts**, ``"{broker}@{broker receipt}"``
(RocketMQ's receipt handle carries the broker name the same way)::

    msgs = client.pop("billing", "orders", max_messages=32, invisible_ms=60_000)
    client.ack("billing", [m.receipt for m in msgs])      # each to the broker that issued it

With NameServers, ``pop`` asks every master serving the topic (from a rotating
start, so no broker is always asked last) until ``max_messages`` are in hand;
``ack`` and ``change_invisible`` go to the master the receipt names; ``retry``
goes to the broker whose address is in the msg id.  Against one broker
(``endpoint=``) a bare broker receipt is accepted too.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from ..errors import BadRequestError, BrokerError
from .routing import id_host

if TYPE_CHECKING:
    from ..cluster.namesrv_client import NamesrvClient
    from .routing import Route

__all__ = ["AckResult", "DeadLetter", "InvisibleResult", "PopMessage", "PopMixin", "RetryResult",
           "split_receipt"]

_SEP = "@"
_DLQ_PREFIX = "%DLQ%"


@dataclass(frozen=True, slots=True)
class PopMessage:
    """A popped message; ``receipt`` (broker-qualified) acks it or extends its invisible time.

    ``topic`` is the message's own topic (also for a retry delivery, whose
    ``store_topic`` is ``%RETRY%{group}``); ``raw`` is the broker's JSON object.
    """

    broker: str
    receipt: str
    msg_id: str
    topic: str
    queue_id: int
    offset: int
    body: str | None
    reconsume_times: int
    invisible_until: int
    keys: list[str] = field(default_factory=list)
    tags: str | None = None
    properties: dict[str, str] = field(default_factory=dict)
    store_topic: str | None = None
    raw: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AckResult:
    """One receipt's ack: ``OK``, ``ALREADY_ACKED`` or ``EXPIRED`` (already redelivered)."""

    receipt: str
    status: str
    broker: str


@dataclass(frozen=True, slots=True)
class InvisibleResult:
    """A change of invisible time: ``status`` and the new receipt (the old one no longer acks)."""

    status: str
    receipt: str
    broker: str


@dataclass(frozen=True, slots=True)
class RetryResult:
    """A send-back: ``status`` ``RETRY`` (to ``%RETRY%{group}``) or ``DLQ``."""

    status: str
    msg_id: str
    broker: str


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A message in ``%DLQ%{group}`` with where it came from and how often it was consumed."""

    broker: str
    msg_id: str
    origin_topic: str
    origin_msg_id: str
    reconsume_times: int
    queue_id: int
    offset: int
    body: str | None
    store_timestamp: int
    raw: dict[str, Any] = field(default_factory=dict)


def split_receipt(receipt: str) -> tuple[str | None, str]:
    """(broker name or None, the broker's own receipt) of a client receipt."""
    broker, sep, raw = receipt.rpartition(_SEP)
    return (broker, raw) if sep and broker else (None, receipt)


def _popped(broker: str, m: dict[str, Any]) -> PopMessage:
    return PopMessage(broker, f"{broker}{_SEP}{m['receipt']}", m["msg_id"], m["topic"], m["queue_id"], m["offset"],
                      m.get("body"), int(m.get("reconsume_times", 0)), int(m.get("invisible_until", 0)),
                      list(m.get("keys") or []), m.get("tags"), dict(m.get("properties") or {}),
                      m.get("store_topic"), m)


def _dead(broker: str, m: dict[str, Any]) -> DeadLetter:
    props = m.get("properties") or {}
    return DeadLetter(broker, m["msg_id"], str(props.get("RETRY_TOPIC", "")), str(props.get("ORIGIN_MESSAGE_ID", "")),
                      int(props.get("RECONSUME_TIME", 0) or 0), m["queue_id"], m["offset"], m.get("body"),
                      int(m.get("store_timestamp", 0)), m)


class PopMixin:
    """The POP calls of :class:`~broker_api.client.SparkMQClient` (which supplies the transport)."""

    if TYPE_CHECKING:
        endpoint: str | None
        _namesrv: NamesrvClient | None

        def _call(self, method: str, url: str, broker: str | None = None, **kwargs: Any) -> Any: ...
        def _route(self, topic: str, refresh: bool = False) -> Route: ...
        def _endpoint_broker(self) -> str: ...
        def masters(self, cluster: str | None = None) -> dict[str, str]: ...
        def _brokers_by_host(self) -> dict[str, list[str]]: ...

    _pop_turn = 0

    def _pop_targets(self, topic: str) -> list[tuple[str, str]]:
        """(broker, URL) of every master serving ``topic``, from a start that moves on each call."""
        if self._namesrv is None:
            return [(self._endpoint_broker(), str(self.endpoint))]
        masters = sorted(self._route(topic).masters.items())
        if not masters:
            raise BrokerError(f"no live master broker serves topic {topic!r}; POP needs a master")
        self._pop_turn += 1
        start = self._pop_turn % len(masters)
        return masters[start:] + masters[:start]

    def pop(self, group: str, topic: str, max_messages: int = 32, invisible_ms: int = 60_000, wait_ms: int = 0,
            filter: str | None = None) -> list[PopMessage]:
        """Up to ``max_messages`` of any queue of ``topic`` (and ``group``'s retries), each with a receipt.

        With several brokers the first round does not wait; later rounds wait
        on each broker in turn for a slice of what is left of ``wait_ms``.
        """
        targets = self._pop_targets(topic)
        body: dict[str, Any] = {"topic": topic, "invisible_ms": invisible_ms, **({"filter": filter} if filter else {})}
        out: list[PopMessage] = []
        deadline = time.monotonic() + wait_ms / 1000
        first = True
        while True:
            for broker, url in targets:
                want = max_messages - len(out)
                if want <= 0:
                    return out
                left_ms = int((deadline - time.monotonic()) * 1000)
                wait = left_ms if len(targets) == 1 else (0 if first else max(0, min(left_ms, 1000 // len(targets))))
                answer = self._call("POST", f"{url}/v1/groups/{group}/pop", broker,
                                    json={**body, "max_messages": want, "wait_ms": max(0, wait)})
                out.extend(_popped(broker, m) for m in answer["messages"])
            first = False
            if out or time.monotonic() >= deadline:
                return out

    def _receipt_url(self, receipt: str) -> tuple[str, str, str]:
        """(broker, URL of its master, the broker's receipt) for a client receipt."""
        broker, raw = split_receipt(receipt)
        if self._namesrv is None:
            return broker or self._endpoint_broker(), str(self.endpoint), raw
        if broker is None:
            raise BadRequestError(f"receipt {receipt!r} names no broker; pass the receipt pop() returned "
                                  f"(broker{_SEP}receipt)")
        masters = self.masters()
        if broker not in masters:
            raise BrokerError(f"broker {broker!r} that issued receipt {receipt!r} is not a live master "
                              "(the message comes back after its invisible time)")
        return broker, masters[broker], raw

    def ack(self, group: str, receipts: Iterable[str | PopMessage]) -> list[AckResult]:
        """Ack popped messages, each at the broker that issued its receipt; results in call order."""
        wanted = [r.receipt if isinstance(r, PopMessage) else r for r in receipts]
        by_broker: dict[tuple[str, str], list[int]] = {}
        raws: list[str] = []
        for i, receipt in enumerate(wanted):
            broker, url, raw = self._receipt_url(receipt)
            by_broker.setdefault((broker, url), []).append(i)
            raws.append(raw)
        out: list[AckResult | None] = [None] * len(wanted)
        for (broker, url), idx in by_broker.items():
            answer = self._call("POST", f"{url}/v1/groups/{group}/ack", broker, json={"receipts": [raws[i] for i in idx]})
            for i, result in zip(idx, answer["results"]):
                out[i] = AckResult(wanted[i], str(result["status"]), broker)
        return [r for r in out if r is not None]

    def change_invisible(self, group: str, receipt: str | PopMessage, invisible_ms: int) -> InvisibleResult:
        """Keep a popped message invisible ``invisible_ms`` from now; the answer's receipt replaces the old."""
        text = receipt.receipt if isinstance(receipt, PopMessage) else receipt
        broker, url, raw = self._receipt_url(text)
        answer = self._call("POST", f"{url}/v1/groups/{group}/invisible", broker,
                            json={"receipt": raw, "invisible_ms": invisible_ms})
        return InvisibleResult(str(answer["status"]), f"{broker}{_SEP}{answer['receipt']}", broker)

    def retry(self, group: str, msg_id: str, delay_level: int | None = None) -> RetryResult:
        """Send a pulled message back for a later retry (``delay_level=-1``: straight to the DLQ)."""
        if self._namesrv is None:
            broker, url = self._endpoint_broker(), str(self.endpoint)
        else:
            urls = self._brokers_by_host().get(id_host(msg_id))
            if not urls:
                raise BrokerError(f"no live broker stored msg id {msg_id!r} (its address is {id_host(msg_id)})")
            url = urls[0]
            broker = next((b for b, u in self.masters().items() if u == url), id_host(msg_id))
        answer = self._call("POST", f"{url}/v1/groups/{group}/retry", broker,
                            json={"msg_id": msg_id, "delay_level": delay_level})
        return RetryResult(str(answer["status"]), msg_id, broker)

    def dlq(self, group: str, max_messages: int = 1000) -> list[DeadLetter]:
        """Messages of ``%DLQ%{group}`` on every master (oldest first per broker), at most ``max_messages``."""
        topic = quote(_DLQ_PREFIX + group, safe="")
        out: list[DeadLetter] = []
        for broker, url in sorted(self.masters().items()):
            try:
                queues = self._call("GET", f"{url}/v1/topics/{topic}/queues", broker)
            except BrokerError as exc:
                if getattr(exc, "code", "") == "topic_not_found":
                    continue  # nothing dead-lettered on this broker
                raise
            for q in queues:
                offset = q["min_offset"]
                while offset < q["max_offset"] and len(out) < max_messages:
                    page = self._call("GET", f"{url}/v1/topics/{topic}/queues/{q['queue_id']}/messages", broker,
                                      params={"offset": offset, "max_messages": min(256, max_messages - len(out))})
                    out.extend(_dead(broker, m) for m in page["messages"])
                    if page["next_offset"] <= offset:
                        break
                    offset = page["next_offset"]
        return out

