"""Fixtures for the Kafka listener: a fast broker with ``[kafka] port`` on a free port, and helpers."""

from __future__ import annotations

import base64
import socket
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from broker_api.kafka.codec import decode_request  # noqa: F401  (re-exported for tests)
from tests.broker_api.conftest import FAST_ENV
from tests.conftest import _free_port


@dataclass
class KafkaBroker:
    """A broker process with its HTTP URL and Kafka bootstrap address."""

    proc: Any
    bootstrap: str

    @property
    def url(self) -> str:
        return str(self.proc.url)

    @property
    def kafka_port(self) -> int:
        return int(self.bootstrap.rsplit(":", 1)[1])


@pytest.fixture
def kafka_factory(broker_factory: Callable[..., Any]) -> Callable[..., KafkaBroker]:
    def start(env: dict[str, str] | None = None) -> KafkaBroker:
        port = _free_port()
        proc = broker_factory(env={**FAST_ENV, "SPARKMQ_KAFKA__PORT": str(port), **(env or {})})
        return KafkaBroker(proc, f"127.0.0.1:{port}")

    return start


@pytest.fixture
def kafka(kafka_factory: Callable[..., KafkaBroker]) -> KafkaBroker:
    return kafka_factory()


def create_topic(url: str, name: str, queues: int = 2) -> None:
    r = httpx.post(f"{url}/v1/topics", json={"name": name, "queues": queues}, timeout=10)
    assert r.status_code in (200, 201), r.text


def http_messages(url: str, topic: str, queue: int, offset: int = 0, n: int = 1000) -> list[dict[str, Any]]:
    r = httpx.get(f"{url}/v1/topics/{topic}/queues/{queue}/messages",
                  params={"offset": offset, "max_messages": n}, timeout=10)
    assert r.status_code == 200, r.text
    return list(r.json()["messages"])


def body_of(m: dict[str, Any]) -> bytes:
    return base64.b64decode(m["body_base64"]) if "body_base64" in m else m["body"].encode()


def roundtrip(port: int, frame: bytes, timeout_s: float = 5.0) -> bytes | None:
    """Send one frame on a new connection; the answer's bytes after the size, or None if closed."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as s:
        s.sendall(frame)
        return read_frame(s)


def read_frame(s: socket.socket) -> bytes | None:
    head = _read(s, 4)
    if head is None:
        return None
    (size,) = struct.unpack(">i", head)
    return _read(s, size)


def _read(s: socket.socket, n: int) -> bytes | None:
    buf = b""
    while len(buf) < n:
        try:
            chunk = s.recv(n - len(buf))
        except ConnectionResetError:
            return None
        if not chunk:
            return None
        buf += chunk
    return buf
