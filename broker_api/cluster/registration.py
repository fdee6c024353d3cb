"""The broker's side of the NameServer protocol (RocketMQ's BrokerOuterAPI.registerBrokerAll).

:class:`NamesrvRegistrar` registers the broker with every NameServer in
parallel, at start and then every ``interval_s``.  Each round first asks
``query-data-version`` (needRegister): when the NameServer already has this
data version the question itself is the heartbeat and no body is sent;
otherwise the full body (identity, topics, data version, crc32) follows.
``register_now()`` pushes the full body at once (after a topic change).

Between rounds the registrar probes every NameServer cheaply once a second
(``GET /healthz``): a NameServer that was down and answers again, or that
answers with a new start time (``X-Namesrv-Started-Ms``: it restarted, its
tables are empty), gets the full registration at once, so routes come back
within a second of a NameServer answering.  A NameServer that is down is
logged once per outage; it never blocks the broker.  ``stop()``
unregisters, best effort.
"""

from __future__ import annotations

import logging
import ssl
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field, fields
from typing import Any

import httpx

from store.service_thread import ServiceThread

from ..errors import NamesrvRejectedError
from ..settings.addresses import normalize_url, parse_namesrv_addrs
from .namesrv_client import started_ms
from .wire import DataVersion, body_crc32

__all__ = [
    "BrokerIdentity",
    "DataVersion",
    "NamesrvRegistrar",
    "NamesrvState",
    "parse_namesrv_addrs",
    "topics_payload",
]

log = logging.getLogger("sparkmq.registration")
_PROBE_S = 1.0  # how often a NameServer is asked whether it is up and since when

TopicsProvider = Callable[[], dict[str, dict[str, Any]]]


def topics_payload(configs: Iterable[Any]) -> dict[str, dict[str, Any]]:
    """TopicConfig-like objects (``name``, ``queues``, ``perm``, ``system``) -> the ``topics`` field.

    System topics (``system`` true) are left out: clients never route to them.
    """
    return {
        c.name: {"read_queues": c.queues, "write_queues": c.queues, "perm": c.perm}
        for c in configs
        if not getattr(c, "system", False)
    }


@dataclass(frozen=True, slots=True)
class BrokerIdentity:
    """Who this broker is: cluster, broker name, id (0 = master, >0 = slave), addresses."""

    cluster: str
    broker_name: str
    broker_id: int
    address: str
    ha_address: str | None = None

    def __post_init__(self) -> None:
        if self.broker_id < 0:
            raise ValueError(f"broker_id must be 0 (master) or > 0 (slave), not {self.broker_id}")
        object.__setattr__(self, "address", normalize_url(self.address))

    @property
    def role(self) -> str:
        return "master" if self.broker_id == 0 else "slave"

    def ref(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "broker_name": self.broker_name,
                "broker_id": self.broker_id, "address": self.address}


@dataclass(slots=True)
class NamesrvState:
    """What the registrar knows about one NameServer."""

    address: str
    up: bool | None = None
    last_ok_ms: int | None = None
    last_error: str | None = None
    full_registrations: int = 0
    skipped_registrations: int = 0
    master_address: str | None = None
    ha_server_address: str | None = None
    started_ms: int | None = None  # the NameServer's start time when it last took a registration
    http: httpx.Client | None = field(default=None, repr=False)

    def view(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "http"}

    def needs_register(self, started: int | None) -> bool:
        """An answer to a probe: True when this NameServer was down or restarted since it last took us."""
        return self.up is False or (started is not None and started != self.started_ms)


class NamesrvRegistrar:
    """Keeps the broker registered with all NameServers; ``start()``/``stop()``."""

    def __init__(
        self,
        namesrv_addrs: str | Iterable[str],
        identity: BrokerIdentity,
        topics_provider: TopicsProvider,
        data_version_provider: Callable[[], DataVersion],
        interval_s: float = 30.0,
        timeout_s: float = 3.0,
        token: str = "",
        ca_file: str = "",
    ) -> None:
        self.identity = identity
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}  # the NameServer's [auth]
        self._verify: ssl.SSLContext | bool = ssl.create_default_context(cafile=ca_file) if ca_file else True
        self._topics = topics_provider
        self._version = data_version_provider
        self._interval_s = interval_s
        self._timeout_s = timeout_s
        self._states = {a: NamesrvState(a) for a in parse_namesrv_addrs(namesrv_addrs)}
        self._lock = threading.Lock()
        self._force = False
        self._wake = threading.Event()
        self._worker = ServiceThread("namesrv-registrar", self._run, join_timeout_s=2 * timeout_s + 10,
                                     wake=self._wake.set)
        self._pool: ThreadPoolExecutor | None = None
        self.rounds = 0

    @property
    def namesrv_addrs(self) -> list[str]:
        return list(self._states)

    # -- lifecycle ---------------------------------------------------------

    def start(self) -> None:
        """Start the background registration thread; returns at once."""
        if self._worker.running:
            return
        self._open()
        self._worker.start()

    def stop(self) -> None:
        """Stop the thread, unregister from every NameServer (best effort); safe twice."""
        if not self._worker.stop():
            return
        try:
            self._each(self._unregister_one)
        finally:
            self._close()

    def register_now(self) -> None:
        """Push the full registration to every NameServer as soon as possible (non-blocking)."""
        with self._lock:
            self._force = True
        self._wake.set()

    def register_all(self, force: bool = False) -> dict[str, bool | None]:
        """Run one round now, in this thread; per address: True = full body sent,
        False = skipped (data version unchanged, heartbeat only), None = failed."""
        opened = self._pool is None
        if opened:
            self._open()
        try:
            return self._round(force)
        finally:
            if opened:
                self._close()

    def status(self) -> list[dict[str, Any]]:
        """Per NameServer: up, last success, last error, counters, master/HA address."""
        with self._lock:
            return [s.view() for s in self._states.values()]

    # -- rounds ------------------------------------------------------------

    def _run(self) -> None:
        # A full round every interval; in between a probe each second, so a NameServer that was down
        # or restarted is registered with within a second of answering (not after a growing back-off).
        next_round = 0.0
        while True:
            self._wake.clear()  # before reading the flags, so no wake-up is lost
            if self._worker.stopping.is_set():
                return
            with self._lock:
                force, self._force = self._force, False
            if force or time.monotonic() >= next_round or self._probe():
                try:
                    self._round(force or time.monotonic() < next_round)
                except Exception:  # a bug in a provider must not end registration
                    log.exception("NameServer registration round failed; trying again in %.1fs", _PROBE_S)
                next_round = time.monotonic() + self._interval_s
            self._wake.wait(min(_PROBE_S, self._interval_s))

    def _probe(self) -> bool:
        """True when some NameServer answers ``/healthz`` after being down, or with a new start time."""
        return any(self._each(self._probe_one).values())

    def _probe_one(self, st: NamesrvState) -> bool | None:
        assert st.http is not None
        try:
            resp = st.http.get(st.address + "/healthz", timeout=min(self._timeout_s, _PROBE_S))
        except httpx.HTTPError:
            return False
        with self._lock:
            return resp.status_code == 200 and st.needs_register(started_ms(resp))

    def _round(self, force: bool) -> dict[str, bool | None]:
        version = self._version().to_dict()  # read before topics: a racing change bumps it again
        body: dict[str, Any] = {
            **self.identity.ref(),
            "ha_address": self.identity.ha_address,
            "data_version": version,
            "topics": self._topics(),
        }
        body["crc32"] = body_crc32(body)
        results = self._each(lambda st: self._register_one(st, body, force))
        with self._lock:
            self.rounds += 1
        return results

    def _each(self, task: Callable[[NamesrvState], bool | None]) -> dict[str, bool | None]:
        """Run ``task`` for every NameServer in parallel and wait (bounded by timeouts)."""
        assert self._pool is not None
        futures = {addr: self._pool.submit(task, st) for addr, st in self._states.items()}
        wait(futures.values())
        return {addr: f.result() for addr, f in futures.items()}

    def _register_one(self, st: NamesrvState, body: dict[str, Any], force: bool) -> bool | None:
        try:
            if not force:
                query = {**self.identity.ref(), "data_version": body["data_version"]}
                if not self._post(st, "/v1/brokers/query-data-version", query)["changed"]:
                    self._ok(st, full=False, result=None)
                    return False
            result = self._post(st, "/v1/brokers/register", body)
        except (httpx.HTTPError, NamesrvRejectedError, ValueError, KeyError) as exc:
            self._failed(st, exc)
            return None
        self._ok(st, full=True, result=result)
        return True

    def _unregister_one(self, st: NamesrvState) -> bool | None:
        try:
            self._post(st, "/v1/brokers/unregister", self.identity.ref())
        except (httpx.HTTPError, NamesrvRejectedError, ValueError) as exc:
            log.info("unregister from NameServer %s skipped: %s", st.address, exc)
            return None
        return True

    def _post(self, st: NamesrvState, path: str, body: dict[str, Any]) -> dict[str, Any]:
        assert st.http is not None
        resp = st.http.post(st.address + path, json=body)
        if resp.status_code != 200:
            raise NamesrvRejectedError(f"HTTP {resp.status_code}: {resp.text[:300]}")
        return {**resp.json(), "_started_ms": started_ms(resp)}

    # -- state -------------------------------------------------------------

    def _ok(self, st: NamesrvState, full: bool, result: dict[str, Any] | None) -> None:
        with self._lock:
            came_back = st.up is False
            st.up, st.last_ok_ms, st.last_error = True, int(time.time() * 1000), None
            if result is not None and full:
                st.started_ms = result.get("_started_ms")
            if full:
                st.full_registrations += 1
                assert result is not None
                st.master_address = result.get("master_address")
                st.ha_server_address = result.get("ha_server_address")
            else:
                st.skipped_registrations += 1
        if came_back:
            log.warning("NameServer %s is reachable again; %s is registered", st.address, self.identity.broker_name)

    def _failed(self, st: NamesrvState, exc: Exception) -> None:
        message = f"{type(exc).__name__}: {exc}"
        with self._lock:
            first = st.up is not False or st.last_error != message
            st.up, st.last_error = False, message
        if first:  # once per outage (or when the reason changes), not every round
            log.warning("cannot register %s with NameServer %s (%s); asking it every %.0fs and registering "
                        "as soon as it answers", self.identity.broker_name, st.address, message, _PROBE_S)

    def _open(self) -> None:
        timeout = httpx.Timeout(self._timeout_s)
        for st in self._states.values():
            st.http = httpx.Client(timeout=timeout, headers=self._headers, verify=self._verify)
        self._pool = ThreadPoolExecutor(max_workers=len(self._states), thread_name_prefix="namesrv-register")

    def _close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        for st in self._states.values():
            if st.http is not None:
                st.http.close()
                st.http = None
