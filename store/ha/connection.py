"""HAConnection: the master's side of one slave connection (RocketMQ's HAConnection).

Two threads per slave:

* the reader takes the slave's 8-byte offset reports.  The first one decides
  where sending starts (see :meth:`HAConnection._decide_start`); later ones
  are acks.  An ack above the master's max offset closes the connection
  (RocketMQ #3015: a fake slave must not release SYNC_MASTER waiters), and
  so do ``housekeeping_interval_s`` of silence.
* the writer sends frames from that offset on (``protocol`` cuts them at
  record boundaries), and a heartbeat after ``heartbeat_interval_s`` with
  nothing to send.  It sleeps until the store appends.

A slave the master cannot serve (it reports more than the master holds, or
an offset where no master record starts) gets one heartbeat carrying the
master's max offset, so it can tell why, and is then disconnected.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..config import HAConfig
from ..errors import StoreError
from . import protocol
from .handshake import readable
from .protocol import FrameError

if TYPE_CHECKING:
    from ..message_store import MessageStore

__all__ = ["HAConnection"]

_log = logging.getLogger(__name__)
_TICK_S = 0.1
_REFUSE_GRACE_S = 2.0


class HAConnection:
    """One connected slave; the HAService owns it."""

    def __init__(self, sock: socket.socket, address: str, store: MessageStore, config: HAConfig,
                 on_ack: Callable[[int], None], wait_data: Callable[[int, float], int]) -> None:
        self.address = address
        self._sock, self._store, self._config = sock, store, config
        self._on_ack, self._wait_data = on_ack, wait_data
        self.ack_offset = -1  # -1 until the first valid report
        self.connected_at = time.monotonic()
        self._caught_up_at = self.connected_at
        self._last_read = self.connected_at
        self._start: int | None = None
        self._refuse_at: int | None = None
        self._refused_since = 0.0
        self._decided = threading.Event()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._read_loop, name=f"sparkmq-ha-read-{address}", daemon=True),
                         threading.Thread(target=self._write_loop, name=f"sparkmq-ha-write-{address}", daemon=True)]

    # -- lifecycle -------------------------------------------------------
    def start(self) -> None:
        for t in self._threads:
            t.start()

    @property
    def closed(self) -> bool:
        return self._stop.is_set()

    def close(self) -> None:
        """Close the socket; both threads leave soon after.  Safe to call twice."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._decided.set()
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()

    def stop(self) -> None:
        self.close()
        for t in self._threads:
            if t is not threading.current_thread():
                t.join(timeout=5)

    # -- status ----------------------------------------------------------
    def lag_bytes(self, master_max: int) -> int:
        return max(0, master_max - max(self.ack_offset, 0))

    def lag_seconds(self, master_max: int) -> float:
        """Seconds since this slave last covered the master's max offset (0 when it does now)."""
        if self.ack_offset >= master_max:
            return 0.0
        return time.monotonic() - self._caught_up_at

    # -- reader ----------------------------------------------------------
    def _read_loop(self) -> None:
        buf = b""
        try:
            while not self._stop.is_set() and self._keep_reading():
                if not readable(self._sock, _TICK_S):
                    continue
                data = self._sock.recv(1 << 16)
                if not data:
                    _log.info("HA: slave %s closed the connection", self.address)
                    break
                self._last_read = time.monotonic()
                buf += data
                whole = len(buf) - len(buf) % 8
                if whole and self._refuse_at is None:
                    self._on_report(protocol.OFFSET.unpack_from(buf, whole - 8)[0])
                buf = buf[whole:]
        except (OSError, ValueError, StoreError) as exc:
            if not self._stop.is_set():
                _log.warning("HA: connection to slave %s failed: %s", self.address, exc)
        finally:
            self.close()

    def _keep_reading(self) -> bool:
        silent = time.monotonic() - self._last_read
        if self._refuse_at is not None and time.monotonic() - self._refused_since > _REFUSE_GRACE_S:
            return False
        if silent > self._config.housekeeping_interval_s:
            _log.warning("HA: slave %s silent for %.1f s; closing the connection", self.address, silent)
            return False
        return True

    def _on_report(self, offset: int) -> None:
        if not self._decided.is_set():
            self._decide_start(offset)
            return
        master_max = self._store.max_phy_offset()
        if offset > master_max:
            _log.error("HA: slave %s acked offset %d above this master's max offset %d; closing the connection",
                       self.address, offset, master_max)
            self.close()
            return
        self._ack(offset, master_max)

    def _ack(self, offset: int, master_max: int) -> None:
        self.ack_offset = offset
        if offset >= master_max:
            self._caught_up_at = time.monotonic()
        self._on_ack(offset)

    def _decide_start(self, offset: int) -> None:
        """Where to send from: the slave's end, or the oldest retained segment for an empty one."""
        lo, hi = self._store.min_phy_offset(), self._store.max_phy_offset()
        why = ""
        if offset > hi:
            why = f"it reports offset {offset} above this master's max offset {hi}"
        elif offset == 0 or offset < lo:
            self._start = lo
            _log.info("HA: slave %s reports %d; sending from the oldest retained segment at %d",
                      self.address, offset, lo)
        elif offset < hi and not protocol.is_record_start(self._store.read_commitlog(offset, 36), offset):
            why = f"no record of this master starts at its offset {offset}: the logs differ"
        else:
            self._start = offset
        if why:
            _log.error("HA: refusing slave %s: %s", self.address, why)
            self._refuse_at, self._refused_since = hi, time.monotonic()
        else:
            self._ack(offset, hi)
        self._decided.set()

    # -- writer ----------------------------------------------------------
    def _write_loop(self) -> None:
        try:
            self._decided.wait()
            if self._stop.is_set():
                return
            if self._refuse_at is not None:
                self._sock.sendall(protocol.encode_frame(self._refuse_at))
                self._sock.shutdown(socket.SHUT_WR)
                return
            assert self._start is not None
            self._send_from(self._start)
        except (OSError, FrameError, StoreError) as exc:
            if not self._stop.is_set():
                _log.warning("HA: sending to slave %s stopped: %s", self.address, exc)
            self.close()

    def _send_from(self, nxt: int) -> None:
        self._sock.sendall(protocol.encode_frame(nxt))  # tells the slave where the stream starts
        last_write = time.monotonic()
        version = 0
        while not self._stop.is_set():
            frame, after = self._next_frame(nxt)
            if frame:
                self._sock.sendall(frame)
                nxt, last_write = after, time.monotonic()
                continue
            if time.monotonic() - last_write >= self._config.heartbeat_interval_s:
                self._sock.sendall(protocol.encode_frame(nxt))
                last_write = time.monotonic()
            version = self._wait_data(version, min(_TICK_S, self._config.heartbeat_interval_s))

    def _next_frame(self, nxt: int) -> tuple[bytes, int]:
        """The frame (encoded) of whole records from ``nxt``, of the segment's BLANK alone or of one
        quarantined record, and the offset after it; ``b""`` when there is nothing to send."""
        lo = self._store.min_phy_offset()
        if nxt < lo:
            raise FrameError(f"the slave needs offset {nxt} but retention deleted the log before {lo}")
        quarantine = self._store.commitlog.quarantine
        damaged = quarantine.covering(nxt)
        if damaged is not None:  # sent as it is, named: the slave quarantines the same span
            data = self._store.read_commitlog(damaged.phy_offset, damaged.size)
            if len(data) != damaged.size:
                return b"", nxt
            return protocol.encode_quarantined(damaged.phy_offset, damaged.as_dict(), data), damaged.end
        stop = quarantine.next_start(nxt)  # whole records end before a quarantined one
        limit = self._config.transfer_batch_bytes if stop is None else min(self._config.transfer_batch_bytes,
                                                                            stop - nxt)
        chunk = self._store.read_commitlog(nxt, limit)
        if not chunk:
            return b"", nxt
        n, blank = protocol.whole_records(chunk)
        if n:
            return protocol.encode_frame(nxt, chunk[:n]), nxt + n
        if blank:
            seg = self._store.config.commitlog_segment_bytes
            return protocol.encode_frame(nxt, chunk[:8]), nxt - nxt % seg + seg
        total = protocol.first_record_size(chunk)  # one record larger than a batch travels alone
        whole = self._store.read_commitlog(nxt, total)
        return (protocol.encode_frame(nxt, whole), nxt + total) if len(whole) == total else (b"", nxt)
