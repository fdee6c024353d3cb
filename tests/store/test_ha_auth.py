"""The HA link's handshake: a peer that cannot prove the cluster secret gets none of the log.

Real master and slave stores on 127.0.0.1, raw sockets as attackers.
"""

from __future__ import annotations

import socket
import ssl
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from store import HAConfig, MessageStore
from store.ha import HAClient, HAService
from store.ha.handshake import HASecurity
from tests.broker_api.test_tls import make_certificates
from tests.store.test_ha import SLAVE_HOST, assert_replica, produce, wait_until

SECRET = b"correct horse battery staple"


class Link:
    """A master with a secured HA port and the slaves made against it; all stopped at teardown."""

    def __init__(self, open_store: Callable[..., MessageStore], tmp_path: Path) -> None:
        self.open_store, self.tmp_path = open_store, tmp_path
        self.parts: list[HAService | HAClient] = []

    def master(self, security: HASecurity) -> tuple[MessageStore, HAService]:
        store = self.open_store(self.tmp_path / "master")
        svc = HAService(store, HAConfig(listen_host="127.0.0.1", listen_port=0), security)
        svc.start()
        self.parts.append(svc)
        produce(store, 30)
        return store, svc

    def slave(self, svc: HAService, security: HASecurity, name: str = "slave") -> tuple[MessageStore, HAClient]:
        store = self.open_store(self.tmp_path / name, store_host=SLAVE_HOST)
        client = HAClient(store, HAConfig(master_address=f"127.0.0.1:{svc.port}", reconnect_max_s=0.3), security)
        client.start()
        self.parts.append(client)
        return store, client


@pytest.fixture
def link(open_store: Callable[..., MessageStore], tmp_path: Path) -> Iterator[Link]:
    made = Link(open_store, tmp_path)
    yield made
    for part in reversed(made.parts):
        part.stop()


def _drain(sock: socket.socket, timeout_s: float = 8.0) -> bytes:
    """Everything the peer sends until it closes (fails the test if it never closes)."""
    sock.settimeout(timeout_s)
    got = b""
    while True:
        try:
            data = sock.recv(1 << 16)
        except ConnectionResetError:  # a TLS alert, then a reset: nothing of the log either way
            return got
        if not data:
            return got
        got += data


def test_a_raw_peer_sending_eight_zero_bytes_gets_nothing_and_is_closed_and_counted(link: Link) -> None:
    master, svc = link.master(HASecurity(SECRET))
    with socket.create_connection(("127.0.0.1", svc.port)) as raw:
        raw.sendall(b"\0" * 8)
        t0 = time.monotonic()
        assert _drain(raw) == b""  # no frame, no challenge, no log
    assert time.monotonic() - t0 < 7
    assert wait_until(lambda: svc.refused.get("closed", 0) + svc.refused.get("timeout", 0) >= 1, 8)
    assert svc.connected_slaves == 0 and master.max_phy_offset() > 0


def test_a_peer_with_a_wrong_magic_is_refused_at_once(link: Link) -> None:
    _, svc = link.master(HASecurity(SECRET))
    with socket.create_connection(("127.0.0.1", svc.port)) as raw:
        raw.sendall(b"\0" * 40)
        assert _drain(raw, 3) == b""
    assert wait_until(lambda: svc.refused.get("bad_hello") == 1, 5)


def test_a_slave_with_the_wrong_secret_is_refused_counted_and_gets_nothing(link: Link) -> None:
    _, svc = link.master(HASecurity(SECRET))
    slave, client = link.slave(svc, HASecurity(b"wrong secret"))
    assert wait_until(lambda: svc.refused.get("bad_secret", 0) >= 1, 10), svc.refused
    assert wait_until(lambda: client.status().error is not None, 10)
    assert "secret" in (client.status().error or "")
    assert slave.max_phy_offset() == 0 and svc.connected_slaves == 0


def test_a_slave_without_a_secret_gets_nothing_from_a_secured_master(link: Link) -> None:
    _, svc = link.master(HASecurity(SECRET))
    slave, _ = link.slave(svc, HASecurity())
    # a slave without a secret opens with an offset report, not the hello: the master refuses it on the
    # bytes or at the handshake deadline (5 s), later on a loaded machine
    assert wait_until(lambda: sum(svc.refused.values()) >= 1, 30), svc.refused
    time.sleep(0.3)
    assert slave.max_phy_offset() == 0 and svc.connected_slaves == 0


def test_a_master_that_refuses_all_serves_no_one(link: Link) -> None:
    _, svc = link.master(HASecurity(refuse_all=True))
    slave, _ = link.slave(svc, HASecurity())
    assert wait_until(lambda: svc.refused.get("no_secret", 0) >= 1, 10), svc.refused
    assert slave.max_phy_offset() == 0


def test_a_slave_with_the_right_secret_replicates(link: Link) -> None:
    master, svc = link.master(HASecurity(SECRET))
    slave, client = link.slave(svc, HASecurity(SECRET))
    produce(master, 20, seed=1)
    assert_replica(master, slave)
    assert client.status().error is None and svc.refused == {}


def test_over_tls_a_slave_with_the_secret_replicates_and_a_plain_peer_is_refused(link: Link, tmp_path: Path) -> None:
    ca, cert, key = make_certificates(tmp_path)
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert, key)
    server.num_tickets = 0
    master, svc = link.master(HASecurity(SECRET, server_ssl=server))
    with socket.create_connection(("127.0.0.1", svc.port)) as raw:
        raw.sendall(b"\0" * 8)
        assert _drain(raw) == b""
    assert wait_until(lambda: sum(svc.refused.values()) == 1, 8)
    slave, client = link.slave(svc, HASecurity(SECRET, client_ssl=ssl.create_default_context(cafile=str(ca))))
    for seed in range(2, 5):  # bodies larger than one TLS record and several writes while acks flow back
        produce(master, 60, seed=seed)
    assert_replica(master, slave)
    assert client.status().connected and client.status().error is None
    untrusted, _ = link.slave(svc, HASecurity(SECRET, client_ssl=ssl.create_default_context()), name="untrusted")
    assert wait_until(lambda: svc.refused.get("tls", 0) >= 1, 10), svc.refused
    assert untrusted.max_phy_offset() == 0
