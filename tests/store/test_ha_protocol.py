"""HA wire protocol: a raw socket plays the slave or the master."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable
from pathlib import Path

from store import HAConfig, Message, MessageStore
from store.ha import HAClient, HAService
from tests.store.test_ha import SLAVE_HOST, Pair, commitlog_files, pair, produce, wait_until  # noqa: F401

HEADER = struct.Struct(">qi")
OFFSET = struct.Struct(">q")


def recv_exact(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise EOFError(f"closed after {len(out)} of {n} bytes")
        out += chunk
    return out


def recv_frame(sock: socket.socket) -> tuple[int, bytes]:
    offset, size = HEADER.unpack(recv_exact(sock, HEADER.size))
    return offset, recv_exact(sock, size)


def closed_by_peer(sock: socket.socket, timeout_s: float) -> bool:
    """Drain until EOF; True if the peer closed within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            if not sock.recv(1 << 16):
                return True
        except socket.timeout:
            return False
        except ConnectionResetError:
            return True
    return False


def test_frames_are_whole_records_of_at_most_32k_and_the_stream_starts_with_a_heartbeat(pair: Pair) -> None:
    master, ha = pair.master()
    produce(master, 200)
    top = master.max_phy_offset()
    with socket.create_connection(("127.0.0.1", ha.port), timeout=10) as sock:
        sock.sendall(OFFSET.pack(0))
        assert recv_frame(sock) == (0, b"")
        at = 0
        for _ in range(10_000):
            offset, body = recv_frame(sock)
            if not body:
                continue
            assert offset == at or (offset % (64 << 10) == 0 and offset > at), "frames follow each other"
            assert len(body) <= 32 << 10
            assert master.read_commitlog(offset, len(body)) == body
            assert len(body) == 8 or int.from_bytes(body[28:36], "big") == offset, "a frame starts with a record"
            at = offset + len(body)
            if at >= top:
                break
        assert at == top


def test_master_closes_a_connection_that_acks_above_its_max_offset(pair: Pair) -> None:
    master, ha = pair.master()
    produce(master, 20)
    top = master.max_phy_offset()
    with socket.create_connection(("127.0.0.1", ha.port), timeout=10) as sock:
        sock.sendall(OFFSET.pack(top))  # a slave that has everything
        assert recv_frame(sock) == (top, b"")
        assert wait_until(lambda: ha.connected_slaves == 1)
        sock.sendall(OFFSET.pack(top + 4096))  # a lie (RocketMQ #3015)
        assert closed_by_peer(sock, 5)
    assert wait_until(lambda: ha.connected_slaves == 0)
    assert ha.transfer.push_to_slave_offset == top
    assert not ha.wait_for_slave(top + 1, timeout_s=0.2)


def test_master_answers_a_slave_ahead_of_it_with_its_max_and_closes(pair: Pair) -> None:
    master, ha = pair.master()
    produce(master, 20)
    top = master.max_phy_offset()
    with socket.create_connection(("127.0.0.1", ha.port), timeout=10) as sock:
        sock.sendall(OFFSET.pack(top + 1000))
        assert recv_frame(sock) == (top, b"")
        assert closed_by_peer(sock, 5)
    assert ha.transfer.push_to_slave_offset == 0


def test_heartbeats_while_idle_and_silence_closes(pair: Pair) -> None:
    master, ha = pair.master(HAConfig(listen_host="127.0.0.1", listen_port=0, heartbeat_interval_s=0.1,
                                      housekeeping_interval_s=0.8))
    produce(master, 5)
    top = master.max_phy_offset()
    with socket.create_connection(("127.0.0.1", ha.port), timeout=10) as sock:
        sock.sendall(OFFSET.pack(top))
        beats = []
        t0 = time.monotonic()
        while time.monotonic() - t0 < 1.2:  # keep reporting: the master must not close
            beats.append(recv_frame(sock))
            sock.sendall(OFFSET.pack(top))
        assert len(beats) >= 6 and set(beats) == {(top, b"")}
        t1 = time.monotonic()
        assert closed_by_peer(sock, 5), "a silent slave is dropped"
        assert 0.6 <= time.monotonic() - t1 < 3
    assert wait_until(lambda: ha.connected_slaves == 0)


def test_idle_pair_stays_connected_on_heartbeats(pair: Pair) -> None:
    fast = {"heartbeat_interval_s": 0.1, "housekeeping_interval_s": 0.6}
    master, ha = pair.master(HAConfig(listen_host="127.0.0.1", listen_port=0, heartbeat_interval_s=0.1,
                                      housekeeping_interval_s=0.6))
    produce(master, 5)
    slave, client = pair.slave(ha, ha=fast)
    assert wait_until(lambda: ha.connected_slaves == 1 and slave.max_phy_offset() == master.max_phy_offset())
    time.sleep(1.5)
    status = ha.status()
    assert status.connected_slaves == 1 and status.slaves[0].connected_seconds >= 1.4, "same connection throughout"
    assert client.status().connected


def test_slave_writes_records_split_across_frames(open_store: Callable[..., MessageStore], tmp_path: Path) -> None:
    """A master that cuts the byte stream anywhere (as RocketMQ does): the slave keeps partial records."""
    master = open_store(tmp_path / "master")
    produce(master, 60)
    top = master.max_phy_offset()
    assert top < 60 << 10, "one segment, so the raw stream needs no BLANK"
    raw = master.read_commitlog(0, top)
    server = socket.create_server(("127.0.0.1", 0))
    slave = open_store(tmp_path / "slave", store_host=SLAVE_HOST)
    client = HAClient(slave, HAConfig(master_address=f"127.0.0.1:{server.getsockname()[1]}"))
    client.start()
    try:
        server.settimeout(10)
        conn, _ = server.accept()
        with conn:
            assert OFFSET.unpack(recv_exact(conn, 8)) == (0,)
            for at in range(0, top, 1000):
                conn.sendall(HEADER.pack(at, len(raw[at:at + 1000])) + raw[at:at + 1000])
            assert wait_until(lambda: slave.max_phy_offset() == top, 10)
            assert client.error is None
    finally:
        client.stop()
        server.close()
    assert commitlog_files(slave) == commitlog_files(master)
    assert slave.wait_visible(5) and slave.max_offset("ha", 0) == master.max_offset("ha", 0)


def test_the_master_turns_nagle_off_on_a_slaves_connection(pair: Pair) -> None:
    """A slave's 8-byte acks and the master's small frames must not wait for a delayed ACK (Nagle):
    the master's end of an accepted HA connection has TCP_NODELAY, as the slave's end has."""
    _master, ha = pair.master()
    with socket.create_connection(("127.0.0.1", ha.port), timeout=10) as sock:
        sock.sendall(OFFSET.pack(0))
        assert recv_frame(sock) == (0, b"")
        conns = ha._conns  # the accepted connection lives only inside the service
        assert len(conns) == 1
        assert conns[0]._sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
