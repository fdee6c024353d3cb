"""[tls] on: the Kafka port speaks TLS with the broker's certificate (security.protocol SSL)."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import confluent_kafka as ck

from tests.broker_api.conftest import FAST_ENV
from tests.broker_api.test_tls import HttpsBroker, make_certificates
from tests.conftest import _free_port


def test_kafka_port_is_tls_when_tls_is_on(tmp_path: Path) -> None:
    ca, cert, key = make_certificates(tmp_path)
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARKMQ_")} | FAST_ENV | {
        "SPARKMQ_TLS__CERTFILE": str(cert), "SPARKMQ_TLS__KEYFILE": str(key), "SPARKMQ_KAFKA__PORT": str(port)}
    broker = HttpsBroker(ca, tmp_path / "data", _free_port(), env, tmp_path / "broker.log").start()
    try:
        conf = {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SSL", "ssl.ca.location": str(ca)}
        p = ck.Producer(conf)
        p.produce("secure", b"over tls", partition=0)
        assert p.flush(20) == 0
        c = ck.Consumer({**conf, "group.id": "tls", "enable.auto.commit": False})
        c.assign([ck.TopicPartition("secure", 0, 0)])
        m, deadline = None, time.monotonic() + 20
        while m is None and time.monotonic() < deadline:
            m = c.poll(0.5)
        c.close()
        assert m is not None and m.error() is None and m.value() == b"over tls"
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:  # plain Kafka is not served
            s.sendall(b"\x00\x00\x00\x0a\x00\x12\x00\x00\x00\x00\x00\x01\x00\x00")
            s.settimeout(5)
            try:
                answer = s.recv(100)
            except (ConnectionResetError, socket.timeout):
                answer = b""
            assert not answer.startswith(b"\x00\x00")  # no Kafka answer (a TLS alert or nothing)
    finally:
        broker.stop()
