"""The broker's side of master/slave replication (RocketMQ's BrokerController HA wiring).

Roles (``[ha] role``, else by broker id)::

    async_master   HAService on the HA port; a produce never waits       status SEND_OK
    sync_master    HAService; a produce waits until a slave's ack covers it:
                     no slave connected, or more than slave_fallbehind_max_bytes behind
                                                                         status SLAVE_NOT_AVAILABLE
                     not covered within slave_timeout_ms                 status FLUSH_SLAVE_TIMEOUT
                     covered                                             status SEND_OK
    slave          HAClient to [ha] master_addr, else to the ha_server_address the NameServer
                   returns at registration; refuses writes (403 slave_read_only naming the master)

SYNC_MASTER waits never block the event loop or a thread per request: each
produce parks an asyncio future keyed by its end offset, and one waiter
thread (:class:`_AckWaiter`) sleeps on the store's GroupTransferService and
releases every future its slaves' ack covers, so a burst of produces costs
one wake-up per ack, not one per message.  The soft statuses are 200
answers: the message is stored on the master either way.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import ssl
import threading
import time
from typing import Any

from store import MessageStore, PutResult
from store.ha import HAClient, HAService
from store.ha.handshake import HASecurity

from ..errors import SlaveReadOnlyError
from ..metrics import Counter, render_gauge
from .registration import NamesrvRegistrar
from ..settings.broker import BrokerSettings

__all__ = ["Replication", "SEND_OK", "FLUSH_DISK_TIMEOUT", "FLUSH_SLAVE_TIMEOUT", "SLAVE_NOT_AVAILABLE",
           "end_offset"]

log = logging.getLogger(__name__)

SEND_OK = "SEND_OK"
FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
_ASK_MASTER_EVERY_S = 2.0  # a slave without a master connection re-registers this often to learn it


def end_offset(results: list[PutResult]) -> int:
    """The CommitLog offset just past the last record of a put."""
    return max((r.phy_offset + r.size for r in results), default=0)


class _AckWaiter:
    """One thread that turns slave acks into resolved asyncio futures (see module docstring)."""

    def __init__(self, service: HAService, loop: asyncio.AbstractEventLoop) -> None:
        self._service, self._loop = service, loop
        self._heap: list[tuple[int, int, asyncio.Future[bool]]] = []
        self._seq = itertools.count()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sparkmq-ha-ack-waiter", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=5)

    async def wait(self, offset: int, timeout_s: float) -> bool:
        """True once a slave acknowledged ``offset``; False after ``timeout_s``."""
        future: asyncio.Future[bool] = self._loop.create_future()
        with self._lock:
            heapq.heappush(self._heap, (offset, next(self._seq), future))
        self._wake.set()
        try:
            return await asyncio.wait_for(future, timeout_s)
        except TimeoutError:
            return self._service.transfer.push_to_slave_offset >= offset

    def _run(self) -> None:
        transfer = self._service.transfer
        while not self._stop.is_set():
            with self._lock:
                target = self._heap[0][0] if self._heap else None
            if target is None:
                self._wake.wait(0.5)
                self._wake.clear()
                continue
            if not transfer.wait_for(target, 0.2):
                self._stop.wait(0.01 if self._service.connected_slaves else 0.05)
            acked = transfer.push_to_slave_offset
            done = []
            with self._lock:
                while self._heap and self._heap[0][0] <= acked:
                    done.append(heapq.heappop(self._heap)[2])
                # forget futures whose produce already timed out
                if len(self._heap) > 1024:
                    self._heap = [x for x in self._heap if not x[2].done()]
                    heapq.heapify(self._heap)
            if done:
                self._loop.call_soon_threadsafe(_resolve, done)


def _resolve(futures: list[asyncio.Future[bool]]) -> None:
    for future in futures:
        if not future.done():
            future.set_result(True)


class Replication:
    """Starts the role's HA part, answers SYNC_MASTER waits, refuses slave writes, reports status."""

    def __init__(self, settings: BrokerSettings, store: MessageStore) -> None:
        self.role = settings.ha_role
        self.config = settings.ha_config()
        self._section = settings.ha
        self._store = store
        self.service: HAService | None = None
        self.client: HAClient | None = None
        self._waiter: _AckWaiter | None = None
        self.master_url: str | None = settings.ha.master_url.rstrip("/") or None
        self.statuses = Counter("sparkmq_produce_status_total",
                                "Produce answers by SendStatus (SEND_OK, FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE).")
        self._last_ask = 0.0
        self.security = _security(settings, self.is_slave)

    @property
    def is_slave(self) -> bool:
        return self.role == "slave"

    @property
    def is_sync(self) -> bool:
        return self.role == "sync_master"

    # -- lifecycle ---------------------------------------------------------

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Bind the HA port (masters) or start replicating (slaves).  Raises OSError when the port is taken."""
        if self.is_slave:
            self.client = HAClient(self._store, self.config, self.security)
            self.client.start()
            return
        self.service = HAService(self._store, self.config, self.security)
        self.service.start()
        if self.is_sync:
            self._waiter = _AckWaiter(self.service, loop)
            self._waiter.start()

    def stop(self) -> None:
        """Stop waiting, close the HA port or the master connection; safe twice."""
        waiter, self._waiter = self._waiter, None
        if waiter is not None:
            waiter.stop()
        if self.service is not None:
            self.service.stop()
        if self.client is not None:
            self.client.stop()

    def ha_address(self, advertised_host: str) -> str | None:
        """``host:port`` slaves connect to (what the master registers), or None on a slave."""
        return f"{advertised_host}:{self.service.port}" if self.service is not None else None

    # -- produce -----------------------------------------------------------

    def check_writable(self) -> None:
        """Raise SlaveReadOnlyError on a slave: writes go to the master."""
        if self.is_slave:
            raise SlaveReadOnlyError(f"this broker is a slave and stores only what its master sends; "
                                     f"{self._send_to()}")

    def check_readable(self) -> None:
        """Raise SlaveReadOnlyError on a slave with ``[ha] slave_read_enable = false``."""
        if self.is_slave and not self._section.slave_read_enable:
            raise SlaveReadOnlyError(f"this slave does not serve reads ([ha] slave_read_enable = false); "
                                     f"{self._send_to('read from')}")

    def _send_to(self, verb: str = "send it to") -> str:
        if self.master_url:
            return f"{verb} the master at {self.master_url}"
        return f"{verb} the master (its address is not known yet: set [ha] master_url or a NameServer)"

    async def confirm(self, results: list[PutResult], flushed: bool = True) -> str:
        """The SendStatus of a stored put: SEND_OK, FLUSH_DISK_TIMEOUT when its SYNC flush did not
        confirm it in time (``flushed`` False), or on a sync_master what its slaves say (which wins,
        as in RocketMQ's CommitLog)."""
        status = SEND_OK if flushed else FLUSH_DISK_TIMEOUT
        service, waiter = self.service, self._waiter
        if service is not None and waiter is not None and results:
            end = end_offset(results)
            if not service.slave_available():
                status = SLAVE_NOT_AVAILABLE
            elif service.transfer.push_to_slave_offset < end and not await waiter.wait(
                    end, self.config.slave_timeout_ms / 1000):
                status = FLUSH_SLAVE_TIMEOUT
        self.statuses.inc(status=status)
        return status

    # -- the master's address, from the NameServers -------------------------

    def follow(self, registrar: NamesrvRegistrar | None) -> None:
        """Slave: take the master's HTTP and HA address from the latest registration answers.

        While not connected it asks for a fresh answer (a full registration) every few
        seconds, so a master that restarted on a new HA port is found again."""
        if not self.is_slave or registrar is None:
            return
        states = registrar.status()
        master = next((s["master_address"] for s in states if s.get("master_address")), None)
        ha = next((s["ha_server_address"] for s in states if s.get("ha_server_address")), None)
        if master and not self._section.master_url:
            self.master_url = str(master).rstrip("/")
        client = self.client
        if client is None:
            return
        if ha and not self._section.master_addr and ha != client.master_address:
            client.update_master_address(str(ha))
        now = time.monotonic()
        if not client.connected and now - self._last_ask >= _ASK_MASTER_EVERY_S:
            self._last_ask = now
            registrar.register_now()

    # -- status ------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """Role, HA address, slaves with ack offsets and lag (master), or the master link (slave)."""
        out: dict[str, Any] = {"role": self.role, "authenticated": self.security.authenticated,
                               "tls": self.security.server_ssl is not None or self.security.client_ssl is not None}
        if self.service is not None:
            st = self.service.status()
            out.update(refused_peers=dict(self.service.refused),listen_address=st.listen_address, max_offset=st.max_offset,
                       push_to_slave_offset=st.push_to_slave_offset, connected_slaves=st.connected_slaves,
                       slaves=[{"address": s.address, "ack_offset": s.ack_offset, "lag_bytes": s.lag_bytes,
                                "lag_seconds": s.lag_seconds, "connected_seconds": s.connected_seconds}
                               for s in st.slaves])
        if self.client is not None:
            cs = self.client.status()
            out.update(master_ha_address=cs.master_address, master_url=self.master_url, connected=cs.connected,
                       max_offset=cs.max_offset, error=cs.error,
                       seconds_since_master_read=cs.seconds_since_master_read,
                       read_enabled=self._section.slave_read_enable)
        return out

    def metric_lines(self) -> list[str]:
        """Prometheus lines: role, connected slaves, each slave's ack offset and lag."""
        lines = render_gauge("sparkmq_ha_role", "1 for this broker's HA role.", [({"role": self.role}, 1.0)])
        lines += list(self.statuses.render())
        if self.service is not None:
            st = self.service.status()
            refused = render_gauge("sparkmq_ha_refused_peers_total", "HA peers refused at the handshake (no or "
                                   "wrong [ha] secret, not the HA protocol, TLS failure, silence), by reason.",
                                   [({"reason": r}, float(n)) for r, n in sorted(self.service.refused.items())])
            lines += [line.replace(" gauge", " counter") if line.startswith("# TYPE") else line for line in refused]
            lines += render_gauge("sparkmq_ha_connected_slaves", "Slaves connected to this master.",
                                  [({}, float(st.connected_slaves))])
            lines += render_gauge("sparkmq_ha_slave_ack_offset", "CommitLog offset each slave acknowledged.",
                                  [({"slave": s.address}, float(s.ack_offset)) for s in st.slaves])
            lines += render_gauge("sparkmq_ha_slave_lag_bytes", "Master max offset minus the slave's ack offset.",
                                  [({"slave": s.address}, float(s.lag_bytes)) for s in st.slaves])
            lines += render_gauge("sparkmq_ha_slave_lag_seconds", "Seconds since the slave last covered the "
                                  "master's max offset (0: it does).",
                                  [({"slave": s.address}, s.lag_seconds) for s in st.slaves])
        if self.client is not None:
            cs = self.client.status()
            lines += render_gauge("sparkmq_ha_master_connected", "1 while this slave is connected to its master.",
                                  [({}, 1.0 if cs.connected else 0.0)])
            lines += render_gauge("sparkmq_ha_replication_refused", "1 while this slave refuses its master's log.",
                                  [({}, 1.0 if cs.error else 0.0)])
        return lines


def _security(settings: BrokerSettings, slave: bool) -> HASecurity:
    """The HA link's secret and TLS contexts from ``[ha] secret`` and ``[tls]`` (see store.ha.handshake)."""
    secret = settings.ha.secret.encode()
    if not secret and settings.auth.enabled:
        log.error("HA: [auth] is enabled but [ha] secret is empty: %s", "this slave cannot prove itself to its "
                  "master" if slave else "every slave is refused. Set the same [ha] secret (SPARKMQ_HA__SECRET) "
                  "on the master and its slaves to replicate")
    server_ssl = client_ssl = None
    if settings.tls.enabled:
        server_ssl = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server_ssl.load_cert_chain(settings.tls.certfile, settings.tls.keyfile)
        server_ssl.num_tickets = 0  # no post-handshake records: the two HA threads share one TLS socket
        client_ssl = ssl.create_default_context(cafile=settings.tls.ca_file or None)
    return HASecurity(secret, server_ssl, client_ssl, refuse_all=not secret and settings.auth.enabled)
