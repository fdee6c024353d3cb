"""HAService: the master's HA port (RocketMQ's HAService + AcceptSocketService).

It accepts slaves on ``listen_host:listen_port`` (port 0 picks a free one,
see :attr:`HAService.port`) and runs one :class:`HAConnection` per slave.
Every store append wakes the connections' senders; every slave ack moves the
GroupTransferService's high-water mark, which releases SYNC_MASTER waiters.
"""

from __future__ import annotations

import logging
import select
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..config import HAConfig
from . import protocol
from .connection import HAConnection
from .group_transfer import GroupTransferService
from .handshake import HandshakeError, HASecurity, for_threads, master_handshake

if TYPE_CHECKING:
    from ..message_store import MessageStore

__all__ = ["HAService", "HAMasterStatus", "SlaveStatus"]

_log = logging.getLogger(__name__)
_TICK_S = 0.2


@dataclass(frozen=True, slots=True)
class SlaveStatus:
    """One connected slave as the master sees it."""

    address: str  # the slave's host:port as connected
    ack_offset: int  # last CommitLog offset it acknowledged (-1: none yet)
    lag_bytes: int  # master max offset - ack offset
    lag_seconds: float  # since it last covered the master's max offset (0: it does)
    connected_seconds: float


@dataclass(frozen=True, slots=True)
class HAMasterStatus:
    """The master's replication facts for the broker's status and metrics."""

    role: str  # always "master"
    listen_address: str
    max_offset: int  # this master's CommitLog max offset
    push_to_slave_offset: int  # largest offset any slave acknowledged
    connected_slaves: int
    slaves: list[SlaveStatus] = field(default_factory=list)


class HAService:
    """Master side of HA: ``start()``, ``stop()``, SYNC_MASTER waits, status."""

    def __init__(self, store: MessageStore, config: HAConfig | None = None,
                 security: HASecurity | None = None) -> None:
        self.store = store
        self.config = config or HAConfig()
        self.security = security or HASecurity()
        self.refused: dict[str, int] = {}  # peers refused at the handshake, by reason
        self.transfer = GroupTransferService()
        self._conns: list[HAConnection] = []
        self._lock = threading.Lock()
        self._data = threading.Condition()
        self._version = 0
        self._stop = threading.Event()
        self._server: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    # -- lifecycle -------------------------------------------------------
    def start(self) -> None:
        """Bind the HA port and accept slaves.  Raises OSError when the port is taken."""
        if self._thread is not None:
            return
        host, port = self.config.listen_host, self.config.listen_port
        try:
            self._server = socket.create_server((host, port))
        except OSError as exc:
            raise OSError(exc.errno, f"the HA listener cannot listen on {host}:{port} ([ha] listen_port, "
                                     f"--ha-port): {exc.strerror or exc}") from exc
        self.port = self._server.getsockname()[1]
        self._stop.clear()
        self.transfer.start()
        self.store.add_append_listener(self._appended)
        self._thread = threading.Thread(target=self._accept_loop, name="sparkmq-ha-accept", daemon=True)
        self._thread.start()
        _log.info("HA: master listening on %s:%d", self.config.listen_host, self.port)

    def stop(self) -> None:
        """Close the port and every slave connection; releases SYNC waiters.  Safe twice."""
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join(timeout=5)
        self._thread = None
        assert self._server is not None
        self._server.close()
        self.store.remove_append_listener(self._appended)
        with self._lock:
            conns, self._conns = self._conns, []
        for conn in conns:
            conn.stop()
        self.transfer.stop()

    def _accept_loop(self) -> None:
        assert self._server is not None
        while not self._stop.is_set():
            if not select.select([self._server], [], [], _TICK_S)[0]:
                continue
            try:
                sock, peer = self._server.accept()
            except OSError as exc:
                _log.warning("HA: accept failed: %s", exc)
                continue
            address = f"{peer[0]}:{peer[1]}"
            threading.Thread(target=self._admit, args=(sock, address), name=f"sparkmq-ha-hello-{address}",
                             daemon=True).start()

    def _admit(self, sock: socket.socket, address: str) -> None:
        """Handshake with one accepted peer (see :mod:`.handshake`); serve it only when it passes."""
        try:
            sock = master_handshake(protocol.no_delay(sock), self.security)
        except HandshakeError as exc:
            with self._lock:
                self.refused[exc.reason] = self.refused.get(exc.reason, 0) + 1
            _log.warning("HA: refused peer %s (%s): %s", address, exc.reason, exc)
            sock.close()
            return
        _log.info("HA: slave %s connected%s", address, " (authenticated)" if self.security.authenticated else "")
        conn = HAConnection(for_threads(sock), address, self.store, self.config,
                            self._acked, self._wait_data)
        with self._lock:
            if self._stop.is_set():
                sock.close()
                return
            dead = [c for c in self._conns if c.closed]
            self._conns = [c for c in self._conns if not c.closed] + [conn]
        for c in dead:
            c.stop()
        conn.start()

    def _acked(self, offset: int) -> None:
        """A slave's ack: releases SYNC waiters and, in controller mode, may move the confirm offset."""
        self.transfer.notify_ack(offset)
        if self.store.reput.end_limit is not None:
            self.store.reput.notify()

    # -- data wake-up ----------------------------------------------------
    def _appended(self, _end: int) -> None:
        with self._data:
            self._version += 1
            self._data.notify_all()

    def _wait_data(self, seen: int, timeout_s: float) -> int:
        """Sleep until the store appends after version ``seen`` (or ``timeout_s``); the new version."""
        with self._data:
            if self._version == seen:
                self._data.wait(timeout_s)
            return self._version

    # -- SYNC_MASTER -----------------------------------------------------
    def wait_for_slave(self, offset: int, timeout_s: float | None = None) -> bool:
        """Block until a slave acknowledged CommitLog ``offset`` (a put's end offset).

        True once covered; False after ``timeout_s`` (default ``slave_timeout_ms``):
        the broker answers FLUSH_SLAVE_TIMEOUT then.  Many puts may wait at once.
        """
        if timeout_s is None:
            timeout_s = self.config.slave_timeout_ms / 1000
        return self.transfer.wait_for(offset, timeout_s)

    def slave_available(self, max_fallbehind_bytes: int | None = None) -> bool:
        """Whether a slave is connected and at most ``max_fallbehind_bytes`` behind
        (default ``slave_fallbehind_max_bytes``; RocketMQ's isSlaveOK).  When False,
        a SYNC_MASTER put answers SLAVE_NOT_AVAILABLE without waiting."""
        limit = self.config.slave_fallbehind_max_bytes if max_fallbehind_bytes is None else max_fallbehind_bytes
        behind = self.store.max_phy_offset() - self.transfer.push_to_slave_offset
        return self.connected_slaves > 0 and behind <= limit

    # -- status ----------------------------------------------------------
    @property
    def connected_slaves(self) -> int:
        return sum(1 for c in self._live())

    def _live(self) -> list[HAConnection]:
        with self._lock:
            return [c for c in self._conns if not c.closed]

    def status(self) -> HAMasterStatus:
        top = self.store.max_phy_offset()
        now = time.monotonic()
        slaves = [SlaveStatus(c.address, c.ack_offset, c.lag_bytes(top), round(c.lag_seconds(top), 3),
                              round(now - c.connected_at, 3)) for c in self._live()]
        return HAMasterStatus("master", f"{self.config.listen_host}:{self.port}", top,
                              self.transfer.push_to_slave_offset, len(slaves), slaves)
