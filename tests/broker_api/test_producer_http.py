"""The Producer senders' kept-alive connections (client/producer_http.py) against a scripted server on 127.0.0.1.

    answers           Content-Length, chunked, 100 Continue first, to the end of the connection
    keep-alive        one connection for many requests; a new one after ``Connection: close``
    errors            an error answer as the client's class; an answer cut short: stored_unknown
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from broker_api.client import SparkMQClient
from broker_api.client.producer_http import Connections
from broker_api.client.results import BrokerUnreachableError
from broker_api.errors import TopicNotFoundError


class Scripted:
    """Answers each request with the next scripted bytes; None closes the connection without answering."""

    def __init__(self, answers: list[bytes | None]) -> None:
        self.answers, self.connections = list(answers), 0
        self.requests: list[tuple[str, bytes]] = []
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while self.answers:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            with conn:
                buf = b""
                while self.answers:
                    while b"\r\n\r\n" not in buf:
                        chunk = conn.recv(65536)
                        if not chunk:
                            break
                        buf += chunk
                    if b"\r\n\r\n" not in buf:
                        break
                    head, buf = buf.split(b"\r\n\r\n", 1)
                    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                                      if line.lower().startswith(b"content-length")))
                    while len(buf) < length:
                        buf += conn.recv(65536)
                    self.requests.append((head.decode(), buf[:length]))
                    buf = buf[length:]
                    answer = self.answers.pop(0)
                    if answer is None:
                        break
                    conn.sendall(answer)
                    if b"Connection: close" in answer:
                        break


@pytest.fixture
def conns() -> Iterator[Connections]:
    c = Connections(SparkMQClient("http://127.0.0.1:9", token="alice:t0k"))
    yield c
    c.close()


def _post(c: Connections, server: Scripted, topic: str = "orders") -> object:
    return c.post(server.url, f"/v1/topics/{topic}/messages", "b", b"\x01" * 70_000,
                  {"Content-Type": "application/vnd.apache.arrow.stream"}, {"answer": "summary"})


def test_answers_by_length_in_chunks_after_100_continue_and_to_the_close(conns: Connections) -> None:
    server = Scripted([
        b'HTTP/1.1 200 OK\r\nContent-Length: 8\r\ncontent-type: application/json\r\n\r\n{"n": 1}',
        b'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\n{"n\r\n5\r\n": 2}\r\n0\r\nT: 1\r\n\r\n',
        b'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\n{"n": 3}',
        b'HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n{"n": 4}',
        b'HTTP/1.0 200 OK\r\nContent-Length: 8\r\n\r\n{"n": 5}',
        b'HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\n{"n": 6}',
    ])
    assert [_post(conns, server) for _ in range(6)] == [{"n": i} for i in range(1, 7)]
    assert server.connections == 3  # kept alive until "Connection: close", and after an HTTP/1.0 answer a new one
    head, body = server.requests[0]
    assert head.startswith("POST /v1/topics/orders/messages?answer=summary HTTP/1.1\r\n")
    assert "Authorization: Bearer alice:t0k" in head and "Content-Length: 70000" in head and body == b"\x01" * 70_000


def test_a_topic_name_is_quoted_in_the_request_line(conns: Connections) -> None:
    server = Scripted([b'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}'])
    assert _post(conns, server, "a b") == {}
    assert server.requests[0][0].startswith("POST /v1/topics/a%20b/messages?answer=summary HTTP/1.1\r\n")


def test_an_error_answer_is_the_clients_error_and_a_cut_answer_may_be_stored(conns: Connections) -> None:
    server = Scripted([
        b'HTTP/1.1 404 Not Found\r\nContent-Length: 50\r\n\r\n{"error": "topic_not_found", "message": "no such"}',
        b'HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 50\r\n\r\n{"cut',
        None,
    ])
    with pytest.raises(TopicNotFoundError, match="no such"):
        _post(conns, server)
    for _ in range(2):
        with pytest.raises(BrokerUnreachableError) as info:
            _post(conns, server)
        assert info.value.stored_unknown
