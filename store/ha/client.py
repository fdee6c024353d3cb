"""HAClient: the slave's side (RocketMQ's HAClient).

It connects to the master's HA address (settable at runtime with
:meth:`HAClient.update_master_address`), reports its CommitLog max offset at
connect, after every write and every ``heartbeat_interval_s``, and writes the
frames it receives at the same physical offsets through
``MessageStore.append_replicated``; the slave's own reput builds its
ConsumeQueues and index from them.  A lost connection is retried with a
doubling back-off (``reconnect_min_s`` .. ``reconnect_max_s``); a master
silent for ``housekeeping_interval_s`` is dropped and reconnected.

Every frame must continue the slave's log exactly.  When it does not (the
master holds less than the slave, or starts elsewhere: deleted segments,
different history, another segment size) the client stops replicating,
logs why and keeps the reason in :attr:`HAClient.error`; it never truncates
its own log.  Pointing it at a master again (``update_master_address``)
clears the error and retries.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..config import HAConfig
from ..service_thread import ServiceThread
from ..errors import CorruptRecordError, InvalidOffsetError, StoreClosedError
from ..quarantine import QuarantinedRecord
from . import protocol
from .handshake import HandshakeError, HASecurity, readable, slave_handshake
from .protocol import FrameError

if TYPE_CHECKING:
    from ..message_store import MessageStore

__all__ = ["HAClient", "HAClientStatus"]

_log = logging.getLogger(__name__)
_TICK_S = 0.1
_READ_BYTES = 4 << 20


@dataclass(frozen=True, slots=True)
class HAClientStatus:
    """The slave's replication facts for the broker's status and metrics."""

    role: str  # always "slave"
    master_address: str | None
    connected: bool
    max_offset: int  # this slave's CommitLog max offset
    error: str | None  # why replication stopped, or None
    seconds_since_master_read: float | None  # None while not connected


class _Refused(Exception):
    """Raised when the master's stream does not continue this slave's log."""


class HAClient:
    """Slave side of HA: ``start()``, ``stop()``, ``update_master_address()``, status."""

    def __init__(self, store: MessageStore, config: HAConfig | None = None,
                 security: HASecurity | None = None) -> None:
        self.store = store
        self.config = config or HAConfig()
        self.security = security or HASecurity()
        self._address = self.config.master_address
        self.error: str | None = None
        self.connected = False
        self._last_read = 0.0
        self._pending = bytearray()  # a partial record, starting at _pending_at
        self._pending_at = 0
        self._wake = threading.Event()
        self._worker = ServiceThread("sparkmq-ha-client", self._run, wake=self._wake.set)

    # -- lifecycle -------------------------------------------------------
    def start(self) -> None:
        self._worker.start()

    def stop(self) -> None:
        """Disconnect and end the thread.  Safe twice."""
        self._worker.stop()

    def update_master_address(self, address: str | None) -> None:
        """Replicate from ``host:port`` from now on (None: stop replicating); clears ``error``."""
        if address != self._address or self.error is not None:
            _log.info("HA: master address %s -> %s", self._address, address)
            self._address, self.error = address, None
            self._wake.set()

    @property
    def master_address(self) -> str | None:
        return self._address

    def status(self) -> HAClientStatus:
        since = round(time.monotonic() - self._last_read, 3) if self.connected else None
        return HAClientStatus("slave", self._address, self.connected, self.store.max_phy_offset(), self.error, since)

    # -- connect loop ----------------------------------------------------
    def _run(self) -> None:
        backoff = self.config.reconnect_min_s
        while not self._worker.stopping.is_set():
            address = self._address
            if address is None or self.error is not None:
                self._wake.wait(1.0)
                self._wake.clear()
                continue
            try:
                sock = socket.create_connection(_split(address), timeout=self.config.heartbeat_interval_s)
                sock = self._handshake(sock, address)
            except (OSError, ValueError) as exc:
                _log.info("HA: cannot connect to master %s (%s); retrying in %.1f s", address, exc, backoff)
                self._wake.wait(backoff)
                self._wake.clear()
                backoff = min(backoff * 2, self.config.reconnect_max_s)
                continue
            backoff = self.config.reconnect_min_s
            self._session(sock, address)

    def _handshake(self, sock: socket.socket, address: str) -> socket.socket:
        """Prove this slave to the master (see :mod:`.handshake`); a refusal is kept in ``error``."""
        try:
            return slave_handshake(protocol.no_delay(sock), self.security, _split(address)[0])
        except HandshakeError as exc:
            sock.close()
            if exc.reason == "bad_secret":
                self.error = f"replication from {address} refused: {exc}"
            raise

    def _session(self, sock: socket.socket, address: str) -> None:
        try:
            sock.settimeout(None)
            self.connected, self._last_read = True, time.monotonic()
            self._pending.clear()
            _log.info("HA: connected to master %s at offset %d", address, self.store.max_phy_offset())
            self._replicate(sock, address)
        except _Refused as exc:
            self.error = f"replication from {address} refused: {exc}"
            _log.error("HA: %s; this slave's log is left as it is", self.error)
        except (OSError, FrameError, StoreClosedError) as exc:
            if not self._worker.stopping.is_set():
                _log.warning("HA: connection to master %s lost: %s", address, exc)
        finally:
            self.connected = False
            sock.close()

    def _replicate(self, sock: socket.socket, address: str) -> None:
        cfg = self.config
        max_body = max(cfg.transfer_batch_bytes, self.store.max_message_bytes)
        reported = self._report(sock)
        last_report, buf = time.monotonic(), bytearray()
        while not self._worker.stopping.is_set() and self._address == address:
            if readable(sock, _TICK_S):
                data = sock.recv(_READ_BYTES)
                if not data:
                    raise OSError("the master closed the connection")
                self._last_read = time.monotonic()
                buf += data
                frames, used = protocol.parse_frames(buf, max_body)
                del buf[:used]
                self._apply_frames(frames)
            now = time.monotonic()
            if self.store.max_phy_offset() != reported or now - last_report >= cfg.heartbeat_interval_s:
                reported, last_report = self._report(sock), now
            if now - self._last_read > cfg.housekeeping_interval_s:
                _log.warning("HA: master %s silent for %.1f s; reconnecting", address, now - self._last_read)
                return

    def _report(self, sock: socket.socket) -> int:
        offset = self.store.max_phy_offset()
        sock.sendall(protocol.encode_offset(offset))
        return offset

    # -- frames ----------------------------------------------------------
    def _apply_frames(self, frames: list[tuple[int, bytes | protocol.QuarantinedSpan]]) -> None:
        """Check each frame continues the log; contiguous bodies go to the store as one run; a
        quarantined record the master names is written as it is and quarantined here too."""
        run_at, run = 0, bytearray()
        for offset, body in frames:
            if isinstance(body, protocol.QuarantinedSpan):
                if run:
                    self._append(run_at, run)
                    run = bytearray()
                self._check_continues(offset)
                self._append_quarantined(offset, body)
                continue
            if run and body and offset == run_at + len(run):
                run += body
                continue
            if run:
                self._append(run_at, run)
                run = bytearray()
            self._check_continues(offset)
            if body:
                run_at, run = offset, bytearray(body)
        if run:
            self._append(run_at, run)

    def _expected(self) -> int | None:
        """Where the next frame must start; None for an empty log (the master picks)."""
        if self._pending:
            return self._pending_at + len(self._pending)
        top = self.store.max_phy_offset()
        return top if top else None

    def _check_continues(self, offset: int) -> None:
        expected = self._expected()
        if expected is None or offset == expected:
            return
        if offset < expected:
            raise _Refused(f"the master's log ends at {offset}, before this slave's end {expected}: "
                           f"the slave holds data the master does not have")
        raise _Refused(f"the master continues at {offset}, not at this slave's end {expected}: the master no "
                       f"longer holds that range (retention) or its log differs from this slave's")

    def _append_quarantined(self, offset: int, span: protocol.QuarantinedSpan) -> None:
        if self._pending:
            raise _Refused(f"the master names a quarantined record at {offset} inside a partial record")
        try:
            self.store.commitlog.append_quarantined(offset, span.data, QuarantinedRecord(**span.meta))  # type: ignore[arg-type]
        except (TypeError, InvalidOffsetError, CorruptRecordError) as exc:
            raise _Refused(f"quarantined record at {offset}: {exc}") from exc
        _log.warning("HA: the master's quarantined record at %d (%d bytes) copied as it is and quarantined: %s",
                     offset, len(span.data), span.meta.get("reason"))

    def _append(self, offset: int, data: bytearray) -> None:
        if self._pending:
            data, offset = self._pending + data, self._pending_at
        try:
            used = self.store.append_replicated(offset, bytes(data))
        except (InvalidOffsetError, CorruptRecordError) as exc:
            raise _Refused(str(exc)) from exc
        self._pending = data[used:]
        self._pending_at = offset + used
        if len(self._pending) > self.store.max_message_bytes:
            raise _Refused(f"{len(self._pending)} bytes at {self._pending_at} hold no whole record")


def _split(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host or "127.0.0.1", int(port)
