"""Slow clients against a real broker: a trickled body holds no slot, a stalled body or header is cut off.

Raw sockets play the slow clients; the broker runs with few slots and short read deadlines.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

_ENV = {"SPARKMQ_SERVER__PRODUCE_INFLIGHT": "4", "SPARKMQ_SERVER__PRODUCE_WAIT_MS": "100",
        "SPARKMQ_SERVER__ADMIN_INFLIGHT": "1", "SPARKMQ_SERVER__ADMIN_WAIT_MS": "100",
        "SPARKMQ_SERVER__BODY_READ_TIMEOUT_S": "2", "SPARKMQ_SERVER__HEADER_READ_TIMEOUT_S": "2"}


@pytest.fixture(scope="module")
def slow_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from tests.broker_api.conftest import FAST_ENV
    from tests.conftest import BrokerProcess, _free_port

    base = tmp_path_factory.mktemp("slow")
    b = BrokerProcess(base / "data", _free_port(), {**FAST_ENV, **_ENV}, base / "broker.log")
    b.start()
    httpx.post(b.url + "/v1/topics", json={"name": "orders", "queues": 2}, timeout=10).raise_for_status()
    yield b
    b.stop()


def _open(b: Any, head: bytes) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", b.port), timeout=10)
    sock.sendall(head)
    return sock


def _post_head(path: str, length: int) -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {length}\r\n\r\n").encode()


def _answer(sock: socket.socket, timeout_s: float) -> tuple[bytes, bool]:
    """What the broker sent before closing, and whether it closed within ``timeout_s``."""
    sock.settimeout(timeout_s)
    got = b""
    try:
        while chunk := sock.recv(65536):
            got += chunk
    except TimeoutError:
        return got, False
    except ConnectionResetError:
        pass
    return got, True


def test_forty_trickled_bodies_hold_no_produce_slot(slow_broker: Any) -> None:
    socks = [_open(slow_broker, _post_head("/v1/topics/orders/messages", 1000) + b"{") for _ in range(40)]
    stop = threading.Event()

    def trickle() -> None:  # one body byte per connection every 0.5 s: progress, never complete
        while not stop.wait(0.5):
            for s in socks:
                try:
                    s.sendall(b" ")
                except OSError:
                    pass

    t = threading.Thread(target=trickle, daemon=True)
    t.start()
    try:
        time.sleep(0.5)
        with httpx.Client(base_url=slow_broker.url, timeout=10) as c:
            codes = [c.post("/v1/topics/orders/messages", json={"messages": [{"body": f"m{i}"}]}).status_code
                     for i in range(20)]
        assert codes == [200] * 20, codes
        admission = httpx.get(slow_broker.url + "/v1/broker", timeout=10).json()["admission"]
        assert "produce" in str(admission)
    finally:
        stop.set()
        t.join(5)
        for s in socks:
            s.close()


def test_a_stalled_body_is_answered_408_and_closed(slow_broker: Any) -> None:
    sock = _open(slow_broker, _post_head("/v1/topics/orders/messages", 1000) + b'{"messages":')
    t0 = time.monotonic()
    got, closed = _answer(sock, 8)
    sock.close()
    assert closed and 1.5 <= time.monotonic() - t0 < 6, got
    assert got.startswith(b"HTTP/1.1 408") and b"body_read_timeout_s" in got, got


def test_headers_sent_one_byte_at_a_time_are_cut_off(slow_broker: Any) -> None:
    sock = socket.create_connection(("127.0.0.1", slow_broker.port), timeout=10)
    head = b"GET /v1/topics HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 200 + b"\r\n\r\n"
    t0, sent = time.monotonic(), 0
    try:
        for byte in head:
            sock.sendall(bytes([byte]))
            sent += 1
            time.sleep(0.1)
    except OSError:
        pass  # the broker closed it: the point
    got, closed = _answer(sock, 5)
    sock.close()
    assert sent < len(head) or closed, "the connection outlived its header deadline"
    assert not got.startswith(b"HTTP/1.1 200"), got
    assert time.monotonic() - t0 < 8


def test_an_idle_connection_without_a_request_is_closed(slow_broker: Any) -> None:
    sock = socket.create_connection(("127.0.0.1", slow_broker.port), timeout=10)
    t0 = time.monotonic()
    got, closed = _answer(sock, 8)
    sock.close()
    assert closed and got == b"" and time.monotonic() - t0 < 6


def test_an_unsent_admin_body_does_not_starve_admin_routes(slow_broker: Any) -> None:
    huge = _open(slow_broker, _post_head("/v1/topics", 1_000_000_000))
    got, closed = _answer(huge, 5)  # above [limits] max_request_bytes: refused before any of it is read
    huge.close()
    assert closed and got.startswith(b"HTTP/1.1 413"), got
    held = [_open(slow_broker, _post_head("/v1/topics", 100_000)) for _ in range(3)]  # declared, never sent
    try:
        time.sleep(0.3)
        with httpx.Client(base_url=slow_broker.url, timeout=10) as c:
            for i in range(5):
                assert c.get("/v1/topics").status_code == 200
                r = c.post("/v1/topics", json={"name": f"admin-{i}", "queues": 1})
                assert r.status_code in (200, 201), r.text
    finally:
        for s in held:
            s.close()
