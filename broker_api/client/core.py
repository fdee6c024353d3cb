"""A small typed Python client for sparkmq brokers, direct or through NameServers.

    SparkMQClient(endpoint="http://127.0.0.1:8080")          one broker
    SparkMQClient(namesrv="127.0.0.1:9876;127.0.0.1:9877")    the brokers the NameServers route to
    SparkMQClient(url, token="alice:SECRET", ca_file="ca.pem")  [auth] and TLS (client/auth.py)

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
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import httpx

from ..cluster.namesrv_client import NamesrvClient
from ..errors import (
    BadRequestError,
    BrokerError,
    GroupNotFoundError,
    NamesrvAddressError,
    NamesrvUnavailableError,
    TopicNotFoundError,
)
from ..settings.addresses import normalize_url
from .auth import http_options
from .lookup import LookupMixin
from .pop import PopMixin
from .results import (
    BrokerUnreachableError,
    PullResult,
    QueueInfo,
    SendResult,
    busy_delay,
    error_from_answer,
    unreachable_error,
)
from .routes import RouteCache
from .routing import FaultTracker, Route
from .sender import SendPlan, first_key, send_routed
from .tables import TablesMixin

__all__ = ["MessageLike", "SparkMQClient", "Unreachable"]

log = logging.getLogger(__name__)

MessageLike = str | bytes | Mapping[str, Any]
# called with (broker name, URL, error) when a read skips a broker that did not answer
Unreachable = Callable[[str, str, BrokerError], None]


def _wire_message(m: MessageLike) -> dict[str, Any]:
    if isinstance(m, str):
        return {"body": m}
    if isinstance(m, (bytes, bytearray, memoryview)):
        return {"body_base64": base64.b64encode(bytes(m)).decode()}
    return dict(m)


class SparkMQClient(LookupMixin, PopMixin, TablesMixin):
    """Produce, pull, POP (client/pop.py), offsets and topics against one broker or a NameServer-routed cluster."""

    def __init__(self, endpoint: str | None = None, *, namesrv: str | Iterable[str] | None = None,
                 timeout_s: float = 35.0, route_ttl_s: float = 5.0, send_retries: int = 2,
                 backoff_max_s: float = 1.0, busy_retries: int = 3, token: str | None = None,
                 user: str | None = None, secret: str | None = None, ca_file: str | None = None,
                 send_timeout_s: float = 3.0, keyed_failover: str = "wait", namesrv_grace_s: float = 60.0) -> None:
        if (endpoint is None) == (namesrv is None):
            raise BadRequestError("give exactly one of endpoint= (a broker URL) or namesrv= (host:port;...)")
        if send_retries < 0 or busy_retries < 0 or send_timeout_s < 0:
            raise BadRequestError(f"send_retries, busy_retries and send_timeout_s must be >= 0, got {send_retries}, "
                                  f"{busy_retries}, {send_timeout_s}")
        if keyed_failover not in ("wait", "move"):
            raise BadRequestError(f"keyed_failover is 'wait' or 'move', not {keyed_failover!r}")
        try:
            options = http_options(token, user, secret, ca_file)  # bearer token or HMAC; the CA to trust
            self.endpoint = normalize_url(endpoint) if endpoint is not None else None
            self._namesrv = (NamesrvClient(namesrv, timeout_s=min(timeout_s, 5.0), **options)
                             if namesrv is not None else None)
        except (NamesrvAddressError, ValueError, OSError) as exc:
            raise BadRequestError(getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}") from exc
        self._http = httpx.Client(timeout=timeout_s, **options)
        self.timeout_s = timeout_s
        # what a plain http.client connection sends on every request; None: requests are signed (HMAC)
        self.plain_headers: dict[str, str] | None = None if "auth" in options else dict(options.get("headers", {}))
        self._cache = RouteCache(self._namesrv, route_ttl_s, namesrv_grace_s) if self._namesrv else None
        self._send_timeout_s, self._move_keys = send_timeout_s, keyed_failover == "move"
        self._endpoint_name: str | None = None
        self._rr = itertools.count()
        self._send_retries = send_retries
        self._busy_retries = busy_retries
        self.busy_retried = 0  # how many times a busy answer (429/503 with Retry-After) was waited out
        self.faults = FaultTracker(base_s=min(0.25, backoff_max_s), max_s=backoff_max_s)

    def close(self) -> None:
        self._http.close()
        if self._namesrv is not None:
            self._namesrv.close()

    def __enter__(self) -> SparkMQClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- HTTP ----------------------------------------------------------------

    def _call(self, method: str, url: str, broker: str | None = None, **kwargs: Any) -> Any:
        for attempt in range(self._busy_retries + 1):
            try:
                resp = self._http.request(method, url, **kwargs)
            except httpx.HTTPError as exc:
                raise unreachable_error(method, url, broker, exc, self._namesrv is not None) from exc
            if resp.status_code < 400:
                return resp.json()
            error = error_from_answer(resp, url)
            delay = busy_delay(error, attempt, self._busy_retries)
            if delay is None:
                try:
                    raise error
                finally:
                    del error  # a local naming the raised error would tie it to this frame: a reference cycle
            self.busy_retried += 1
            log.info("%s answered %s (%s); retry %d of %d in %.2f s", url.split("/v1")[0], resp.status_code,
                     getattr(error, "code", ""), attempt + 1, self._busy_retries, delay)
            time.sleep(delay)
        raise AssertionError("unreachable")  # the loop returns or raises

    # -- brokers and routes ----------------------------------------------------

    @property
    def routed(self) -> bool:
        """True when calls are routed through NameServers."""
        return self._namesrv is not None

    def _route(self, topic: str, refresh: bool = False) -> Route:
        assert self._cache is not None
        return self._cache.route(topic, refresh)

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
            raise BrokerUnreachableError(f"no NameServer answered: {exc.message}") from exc
        return {b["broker_name"]: b["address"] for b in info["brokers"]
                if b["broker_id"] == 0 and (cluster is None or b["cluster"] == cluster)}

    def _readers(self, topic: str, broker: str | None) -> tuple[str, list[str]]:
        """(broker name, URLs that serve its reads: master first, then slaves) for ``topic``."""
        if self._namesrv is None:
            assert self.endpoint is not None
            return self._endpoint_broker(), [self.endpoint]
        readable = self._route(topic).readable()
        if broker is None:
            if len(readable) != 1:
                raise BadRequestError(f"topic {topic!r} is served by brokers {sorted(readable)}; pass broker=")
            broker = next(iter(readable))
        if broker not in readable:
            readable = self._route(topic, refresh=True).readable()
            if broker not in readable:
                raise TopicNotFoundError(f"broker {broker!r} does not serve topic {topic!r} (serving: "
                                         f"{sorted(readable)}); it may have stopped or left the cluster")
        return broker, readable[broker]

    def _read(self, broker: str, urls: list[str], call: Callable[[str], Any]) -> tuple[str, Any]:
        """``call(url)`` on the first reader that answers (healthy ones first); (URL, answer)."""
        last: BrokerUnreachableError | None = None
        for url in self.faults.order(urls):
            try:
                answer = call(url)
            except BrokerUnreachableError as exc:
                self.faults.failed(url, exc.message)
                last = exc
                continue
            self.faults.succeeded(url)
            return url, answer
        assert last is not None
        if len(urls) > 1:
            raise BrokerUnreachableError(f"no address of broker {broker!r} answered ({', '.join(urls)}): "
                                         f"{last.message}", broker=broker, url=urls[0]) from last
        raise last

    # -- produce ---------------------------------------------------------------

    def produce(self, topic: str, messages: Sequence[MessageLike]) -> list[SendResult]:
        """Send ``messages`` (str, bytes, or dicts with body/keys/tags/properties); results in order.

        With NameServers, messages without a key or queue_id that a broker
        could not take are sent to another broker (``send_retries`` times).
        Raises :class:`SendError` (``.results``, ``.errors``, ``.failed``)
        when some messages were not stored; the others were, once.
        """
        wire = [_wire_message(m) for m in messages]
        if not wire:
            return []
        if self._namesrv is None:
            return self._send(self._endpoint_broker(), str(self.endpoint), topic, wire)
        route = self._route(topic)
        assert self._cache is not None
        self._cache.known.learn(topic, route)
        if not self._cache.known.names(topic) or (not route.slots() and any(first_key(m) is None for m in wire)):
            raise TopicNotFoundError(f"no live master broker can write topic {topic!r} (check perm and "
                                     "GET /v1/cluster on the NameServer)")
        plan = SendPlan(lambda b, url, part: self._send(b, url, topic, part), lambda r: self._route(topic, r),
                        self._probe, self.faults, self._cache.known, topic, self._rr, self._send_retries,
                        self._send_timeout_s, self._move_keys)
        return send_routed(plan, wire)

    def _send(self, broker: str, url: str, topic: str, wire: list[dict[str, Any]]) -> list[SendResult]:
        answer = self._call("POST", f"{url}/v1/topics/{topic}/messages", broker, json={"messages": wire})
        try:
            status = str(answer.get("status", "SEND_OK"))
            return [SendResult(broker, r["msg_id"], r["queue_id"], r["queue_offset"], status)
                    for r in answer["results"]]
        except (AttributeError, KeyError, TypeError) as exc:
            raise BrokerError(f"broker {broker!r} at {url} answered a produce with an unexpected body "
                              f"({type(exc).__name__}: {exc}); the messages may be stored") from exc

    def _probe(self, url: str) -> bool:
        """Does the broker at ``url`` answer ``GET /healthz`` within a second (no retry, no back-off)?"""
        try:
            return self._http.get(f"{url}/healthz", timeout=1.0).status_code == 200
        except httpx.HTTPError:
            return False

    # -- pull and queues ---------------------------------------------------------

    def pull(self, topic: str, queue_id: int, offset: int, max_messages: int = 32, wait_ms: int = 0,
             tags: str | None = None, group: str | None = None, broker: str | None = None,
             filter: str | None = None) -> PullResult:
        """One page of a queue, from the broker that owns it (``broker=`` when several serve the topic).

        ``filter`` is a SQL92 property filter (``"a > 5 AND region = 'eu'"``); only matches are served.

        When the master does not answer, a slave of the same broker serves the page.
        """
        name, urls = self._readers(topic, broker)
        params: dict[str, Any] = {"offset": offset, "max_messages": max_messages, "wait_ms": wait_ms}
        params.update((k, v) for k, v in (("tags", tags), ("group", group), ("filter", filter)) if v)
        url, page = self._read(name, urls, lambda u: self._call(
            "GET", f"{u}/v1/topics/{topic}/queues/{queue_id}/messages", name, params=params))
        return PullResult(name, page["status"], page["messages"], page["next_offset"], page["min_offset"],
                          page["max_offset"], url, page.get("damaged"))

    def queues(self, topic: str, on_unreachable: Unreachable | None = None) -> list[QueueInfo]:
        """Every readable queue of ``topic`` on every broker serving it, sorted by (broker, queue).

        A broker none of whose addresses answers raises, or with
        ``on_unreachable`` is reported to it and skipped.
        """
        out: list[QueueInfo] = []
        if self._namesrv is None:
            targets = {name: [url] for name, url in self.brokers().items()}
            limits: dict[str, int] | None = None
        else:
            route = self._route(topic, refresh=True)
            targets, limits = route.readable(), route.read_queues
        for name, urls in sorted(targets.items()):
            try:
                _, answer = self._read(name, urls, lambda u: self._call("GET", f"{u}/v1/topics/{topic}/queues", name))
            except BrokerUnreachableError as exc:
                if on_unreachable is None:
                    raise
                on_unreachable(name, urls[0], exc)
                continue
            out.extend(QueueInfo(name, q["queue_id"], q["min_offset"], q["max_offset"]) for q in answer
                       if limits is None or q["queue_id"] < limits[name])
        return out

    # -- consumer offsets --------------------------------------------------------

    def commit_offsets(self, group: str, topic: str, offsets: Mapping[int, int], broker: str | None = None) -> None:
        """Commit ``{queue_id: next offset}`` of ``group`` on the master owning those queues."""
        name, urls = self._readers(topic, broker)
        body = {"topic": topic, "offsets": {str(q): int(o) for q, o in offsets.items()}}
        self._call("PUT", f"{urls[0]}/v1/groups/{group}/offsets", name, json=body)

    def get_offsets(self, group: str, topic: str, on_unreachable: Unreachable | None = None
                    ) -> dict[str, dict[int, int]]:
        """broker name -> {queue_id: committed next offset}; never-committed queues are absent."""
        targets = (self._route(topic, refresh=True).readable() if self._namesrv is not None
                   else {name: [url] for name, url in self.brokers().items()})
        out: dict[str, dict[int, int]] = {}
        for name, urls in sorted(targets.items()):
            try:
                _, answer = self._read(name, urls, lambda u: self._call(
                    "GET", f"{u}/v1/groups/{group}/offsets", name, params={"topic": topic}))
            except BrokerUnreachableError as exc:
                if on_unreachable is None:
                    raise
                on_unreachable(name, urls[0], exc)
                continue
            out[name] = {int(q): int(o) for q, o in answer["offsets"].items()}
        return out

    # -- topics and groups ---------------------------------------------------------

    def create_topic(self, name: str, queues: int | None = None, perm: str = "rw", cluster: str | None = None,
                     wait_s: float = 10.0, table: Mapping[str, Any] | None = None) -> dict[str, dict[str, Any]]:
        """Create ``name`` on the endpoint, or on every live master (of ``cluster``); broker -> topic.

        With NameServers it then waits up to ``wait_s`` until the route lists all those brokers.
        """
        targets = self.masters(cluster)
        if not targets:
            raise BrokerUnreachableError("no live master broker is registered with the NameServers"
                                         + (f" in cluster {cluster!r}" if cluster else ""))
        body = {"name": name, "perm": perm, **({"queues": queues} if queues else {}),
                **({"table": dict(table)} if table is not None else {})}
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
        if self._cache is not None:
            self._cache.forget(name)
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

