"""A small typed Python client for sparkmq brokers, direct or through NameServers.

    SparkMQClient(endpoint="http://127.0.0.1:8080")          one broker
    SparkMQClient(namesrv="127.0.0.1:9876;127.0.0.1:9877")    the brokers the NameServers route to

With ``namesrv`` every call looks the topic's route up (cached for
``route_ttl_s``) and goes to the master (broker id 0) of each broker name
that serves it.  ``produce`` spreads messages over the sorted list of
writable (broker, queue) slots::

    slots = sorted((broker_name, queue_id) for each writable broker, queue_id < write_queues)
    keyed message     -> slots[crc32(first key) % len(slots)]    (same key, same broker+queue)
    message w/o keys  -> slots[round robin]

so per-key order holds as long as the set of brokers and queue counts stays
the same.  ``pull`` goes to the broker that owns the queue.  ``create_topic``
creates the topic on every master of the cluster (or of ``cluster=``) and
waits (bounded) until the NameServers route it to all of them.

Errors: the broker's own hierarchy (:class:`broker_api.errors.BrokerError`);
an error answer becomes the class its code maps to in ``ERROR_TABLE``
(``TopicNotFoundError`` for 404 ``topic_not_found``, ...) with ``.status``
and ``.code`` set; :class:`BrokerUnreachableError` when nothing answered.
"""

from __future__ import annotations

import base64
import itertools
import time
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from ..errors import (
    ERROR_TABLE,
    BadRequestError,
    BrokerError,
    GroupNotFoundError,
    TopicNotFoundError,
)
from ..namesrv.client import NamesrvClient
from ..namesrv.errors import (
    NamesrvAddressError,
    NamesrvUnavailableError,
    TopicRouteNotFoundError,
)
from ..namesrv.wire import normalize_url

__all__ = ["BrokerUnreachableError", "MessageLike", "PullResult", "QueueInfo", "SendResult", "SparkMQClient"]

MessageLike = str | bytes | Mapping[str, Any]
MASTER = "0"

# error code -> the broker's class for it (the first, most specific, entry of ERROR_TABLE wins)
_CODE_CLASSES: dict[str, type[BrokerError]] = {
    code: cls for cls, (_, code) in reversed(ERROR_TABLE.items()) if issubclass(cls, BrokerError)
}


class BrokerUnreachableError(BrokerError):
    """Raised when no broker or NameServer answered a client call (refused, timed out)."""


@dataclass(frozen=True, slots=True)
class SendResult:
    """Where one produced message landed."""

    broker: str
    msg_id: str
    queue_id: int
    queue_offset: int


@dataclass(frozen=True, slots=True)
class PullResult:
    """One pulled page of a queue (``messages`` are the broker's JSON objects)."""

    broker: str
    status: str
    messages: list[dict[str, Any]]
    next_offset: int
    min_offset: int
    max_offset: int


@dataclass(frozen=True, slots=True)
class QueueInfo:
    """A queue of a topic on one broker; ``max_offset`` is exclusive."""

    broker: str
    queue_id: int
    min_offset: int
    max_offset: int


@dataclass(frozen=True, slots=True)
class _Route:
    """A topic's masters (broker name -> URL) and queue counts, from the NameServers."""

    masters: dict[str, str]
    write_queues: dict[str, int]
    read_queues: dict[str, int]
    fetched: float

    def slots(self) -> list[tuple[str, int]]:
        return sorted((b, q) for b, n in self.write_queues.items() if b in self.masters for q in range(n))


def _error(resp: httpx.Response, url: str) -> BrokerError:
    """The BrokerError subclass for an error answer (by its ``error`` code)."""
    try:
        body = resp.json()
        code, message = str(body["error"]), str(body["message"])
    except (ValueError, KeyError, TypeError):
        code, message = f"http_{resp.status_code}", f"HTTP {resp.status_code} from {url}: {resp.text[:200]}"
    exc = _CODE_CLASSES.get(code, BrokerError)(message)
    exc.status, exc.code = resp.status_code, code  # type: ignore[attr-defined]
    return exc


def _wire_message(m: MessageLike) -> dict[str, Any]:
    if isinstance(m, str):
        return {"body": m}
    if isinstance(m, (bytes, bytearray, memoryview)):
        return {"body_base64": base64.b64encode(bytes(m)).decode()}
    return dict(m)


class SparkMQClient:
    """Produce, pull, offsets and topics against one broker or a NameServer-routed cluster."""

    def __init__(self, endpoint: str | None = None, *, namesrv: str | Iterable[str] | None = None,
                 timeout_s: float = 35.0, route_ttl_s: float = 5.0) -> None:
        if (endpoint is None) == (namesrv is None):
            raise BadRequestError("give exactly one of endpoint= (a broker URL) or namesrv= (host:port;...)")
        try:
            self.endpoint = normalize_url(endpoint) if endpoint is not None else None
            self._namesrv = NamesrvClient(namesrv, timeout_s=min(timeout_s, 5.0)) if namesrv is not None else None
        except NamesrvAddressError as exc:
            raise BadRequestError(exc.message) from exc
        self._http = httpx.Client(timeout=timeout_s)
        self._route_ttl_s = route_ttl_s
        self._routes: dict[str, _Route] = {}
        self._endpoint_name: str | None = None
        self._rr = itertools.count()

    def close(self) -> None:
        self._http.close()
        if self._namesrv is not None:
            self._namesrv.close()

    def __enter__(self) -> SparkMQClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- HTTP ----------------------------------------------------------------

    def _call(self, method: str, url: str, **kwargs: Any) -> Any:
        try:
            resp = self._http.request(method, url, **kwargs)
        except httpx.ConnectError as exc:
            raise BrokerUnreachableError(f"cannot reach the broker at {url.split('/v1')[0]}: {exc}") from exc
        except httpx.HTTPError as exc:
            raise BrokerUnreachableError(f"request {method} {url} failed: {type(exc).__name__}: {exc}") from exc
        if resp.status_code >= 400:
            raise _error(resp, url)
        return resp.json()

    # -- brokers and routes ----------------------------------------------------

    @property
    def routed(self) -> bool:
        """True when calls are routed through NameServers."""
        return self._namesrv is not None

    def _route(self, topic: str, refresh: bool = False) -> _Route:
        assert self._namesrv is not None
        cached = self._routes.get(topic)
        if cached is not None and not refresh and time.monotonic() - cached.fetched < self._route_ttl_s:
            return cached
        try:
            raw = self._namesrv.route(topic)
        except TopicRouteNotFoundError as exc:
            self._routes.pop(topic, None)
            raise TopicNotFoundError(
                f"{exc.message}; create it with SparkMQClient.create_topic or `sparkmq topic create {topic} "
                "--namesrv ...`") from exc
        except NamesrvUnavailableError as exc:
            raise BrokerUnreachableError(exc.message) from exc
        masters = {b["broker_name"]: b["addresses"][MASTER] for b in raw["brokers"] if MASTER in b["addresses"]}
        writes = {q["broker_name"]: q["write_queues"] for q in raw["queues"] if "w" in q["perm"]}
        reads = {q["broker_name"]: q["read_queues"] for q in raw["queues"] if "r" in q["perm"]}
        route = _Route(masters, writes, reads, time.monotonic())
        self._routes[topic] = route
        return route

    def _endpoint_broker(self) -> str:
        if self._endpoint_name is None:
            self._endpoint_name = str(self._call("GET", f"{self.endpoint}/v1/broker")["name"])
        return self._endpoint_name

    def brokers(self, topic: str | None = None) -> dict[str, str]:
        """Broker name -> URL: those serving ``topic``, else every live master (namesrv) or the endpoint."""
        if self._namesrv is None:
            assert self.endpoint is not None
            return {self._endpoint_broker(): self.endpoint}
        if topic is not None:
            return dict(self._route(topic, refresh=True).masters)
        return self.masters()

    def masters(self, cluster: str | None = None) -> dict[str, str]:
        """Broker name -> URL of every live master the NameServers know (of ``cluster`` if given)."""
        if self._namesrv is None:
            return self.brokers()
        try:
            info = self._namesrv.cluster()
        except NamesrvUnavailableError as exc:
            raise BrokerUnreachableError(exc.message) from exc
        return {b["broker_name"]: b["address"] for b in info["brokers"]
                if b["broker_id"] == 0 and (cluster is None or b["cluster"] == cluster)}

    def _owner(self, topic: str, broker: str | None) -> tuple[str, str]:
        """(broker name, URL) to pull from / commit to for ``topic``."""
        if self._namesrv is None:
            assert self.endpoint is not None
            return self._endpoint_broker(), self.endpoint
        masters = self._route(topic).masters
        if broker is None:
            if len(masters) != 1:
                raise BadRequestError(f"topic {topic!r} is served by brokers {sorted(masters)}; pass broker=")
            broker = next(iter(masters))
        if broker not in masters:
            masters = self._route(topic, refresh=True).masters
            if broker not in masters:
                raise TopicNotFoundError(f"broker {broker!r} does not serve topic {topic!r} (serving: "
                                         f"{sorted(masters)}); it may have stopped or left the cluster")
        return broker, masters[broker]

    # -- produce ---------------------------------------------------------------

    def produce(self, topic: str, messages: Sequence[MessageLike]) -> list[SendResult]:
        """Send ``messages`` (str, bytes, or dicts with body/keys/tags/properties); results in order."""
        wire = [_wire_message(m) for m in messages]
        if not wire:
            return []
        if self._namesrv is None:
            return self._send(self._endpoint_broker(), str(self.endpoint), topic, wire)
        route = self._route(topic)
        slots = route.slots()
        if not slots:
            raise TopicNotFoundError(f"no live master broker can write topic {topic!r} (check perm and "
                                     "GET /v1/cluster on the NameServer)")
        per_broker: dict[str, list[int]] = {}
        for i, m in enumerate(wire):
            broker, qid = self._slot(m, slots)
            if "queue_id" not in m:
                m["queue_id"] = qid
            per_broker.setdefault(broker, []).append(i)
        results: list[SendResult | None] = [None] * len(wire)
        for broker, indexes in per_broker.items():
            sent = self._send(broker, route.masters[broker], topic, [wire[i] for i in indexes])
            for i, r in zip(indexes, sent):
                results[i] = r
        return [r for r in results if r is not None]

    def _slot(self, m: Mapping[str, Any], slots: list[tuple[str, int]]) -> tuple[str, int]:
        keys = m.get("keys") or []
        if isinstance(keys, str):
            keys = [keys]
        if keys:
            return slots[zlib.crc32(str(keys[0]).encode()) % len(slots)]
        return slots[next(self._rr) % len(slots)]

    def _send(self, broker: str, url: str, topic: str, wire: list[dict[str, Any]]) -> list[SendResult]:
        answer = self._call("POST", f"{url}/v1/topics/{topic}/messages", json={"messages": wire})
        return [SendResult(broker, r["msg_id"], r["queue_id"], r["queue_offset"]) for r in answer["results"]]

    # -- pull and queues ---------------------------------------------------------

    def pull(self, topic: str, queue_id: int, offset: int, max_messages: int = 32, wait_ms: int = 0,
             tags: str | None = None, group: str | None = None, broker: str | None = None) -> PullResult:
        """One page of a queue, from the broker that owns it (``broker=`` when several serve the topic)."""
        name, url = self._owner(topic, broker)
        params: dict[str, Any] = {"offset": offset, "max_messages": max_messages, "wait_ms": wait_ms}
        if tags:
            params["tags"] = tags
        if group:
            params["group"] = group
        page = self._call("GET", f"{url}/v1/topics/{topic}/queues/{queue_id}/messages", params=params)
        return PullResult(name, page["status"], page["messages"], page["next_offset"], page["min_offset"],
                          page["max_offset"])

    def queues(self, topic: str) -> list[QueueInfo]:
        """Every readable queue of ``topic`` on every broker serving it, sorted by (broker, queue)."""
        out: list[QueueInfo] = []
        if self._namesrv is None:
            targets = self.brokers()
            limits: dict[str, int] | None = None
        else:
            route = self._route(topic, refresh=True)
            targets, limits = route.masters, route.read_queues
        for name, url in sorted(targets.items()):
            if limits is not None and name not in limits:
                continue
            for q in self._call("GET", f"{url}/v1/topics/{topic}/queues"):
                if limits is None or q["queue_id"] < limits[name]:
                    out.append(QueueInfo(name, q["queue_id"], q["min_offset"], q["max_offset"]))
        return out

    # -- consumer offsets --------------------------------------------------------

    def commit_offsets(self, group: str, topic: str, offsets: Mapping[int, int], broker: str | None = None) -> None:
        """Commit ``{queue_id: next offset}`` of ``group`` on the broker owning those queues."""
        _, url = self._owner(topic, broker)
        body = {"topic": topic, "offsets": {str(q): int(o) for q, o in offsets.items()}}
        self._call("PUT", f"{url}/v1/groups/{group}/offsets", json=body)

    def get_offsets(self, group: str, topic: str) -> dict[str, dict[int, int]]:
        """broker name -> {queue_id: committed next offset}; never-committed queues are absent."""
        targets = self.brokers(topic)
        return {name: {int(q): int(o) for q, o in self._call(
                    "GET", f"{url}/v1/groups/{group}/offsets", params={"topic": topic})["offsets"].items()}
                for name, url in sorted(targets.items())}

    # -- topics and groups ---------------------------------------------------------

    def create_topic(self, name: str, queues: int | None = None, perm: str = "rw", cluster: str | None = None,
                     wait_s: float = 10.0) -> dict[str, dict[str, Any]]:
        """Create ``name`` on the endpoint, or on every live master (of ``cluster``); broker -> topic.

        With NameServers it then waits up to ``wait_s`` until the route lists all those brokers.
        """
        targets = self.masters(cluster)
        if not targets:
            raise BrokerUnreachableError("no live master broker is registered with the NameServers"
                                         + (f" in cluster {cluster!r}" if cluster else ""))
        body = {"name": name, "perm": perm, **({"queues": queues} if queues else {})}
        created = {b: self._call("POST", f"{url}/v1/topics", json=body) for b, url in sorted(targets.items())}
        if self._namesrv is not None:
            self._await_route(name, set(created), wait_s)
        return created

    def _await_route(self, topic: str, brokers: set[str], wait_s: float) -> None:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                if brokers <= set(self._route(topic, refresh=True).masters):
                    return
            except TopicNotFoundError:
                pass
            if time.monotonic() > deadline:
                return  # registered later; produce raises topic_not_found until then
            time.sleep(0.05)

    def delete_topic(self, name: str) -> list[str]:
        """Delete ``name`` (and its messages) on every broker serving it; returns the broker names."""
        targets = self.brokers(name)
        for url in targets.values():
            self._call("DELETE", f"{url}/v1/topics/{name}")
        self._routes.pop(name, None)
        return sorted(targets)

    def topics(self) -> dict[str, list[dict[str, Any]]]:
        """broker name -> its topics (``GET /v1/topics``), for every live master or the endpoint."""
        return {b: self._call("GET", f"{url}/v1/topics") for b, url in sorted(self.masters().items())}

    def describe_topic(self, name: str) -> dict[str, dict[str, Any]]:
        """broker name -> ``GET /v1/topics/{name}`` on each broker serving it."""
        return {b: self._call("GET", f"{url}/v1/topics/{name}") for b, url in sorted(self.brokers(name).items())}

    def groups(self) -> dict[str, list[dict[str, Any]]]:
        """broker name -> its consumer groups with lag."""
        return {b: self._call("GET", f"{url}/v1/groups") for b, url in sorted(self.masters().items())}

    def group(self, group: str) -> dict[str, dict[str, Any]]:
        """broker name -> one group's per-queue offsets and lag (brokers that know the group)."""
        out: dict[str, dict[str, Any]] = {}
        for b, url in sorted(self.masters().items()):
            try:
                out[b] = self._call("GET", f"{url}/v1/groups/{group}")
            except BrokerError as exc:
                if getattr(exc, "code", "") != "group_not_found":
                    raise
        if not out:
            raise GroupNotFoundError(f"consumer group {group!r} has never committed an offset")
        return out
