"""A real S3 API on loopback for tests: moto's server mode (``moto[server]`` from PyPI), and a gate
that can hold the traffic between a broker and it (to kill a broker in the middle of an upload)."""

from __future__ import annotations

import itertools
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.procs import free_port

_BUCKETS = itertools.count()


@dataclass
class S3Server:
    endpoint: str

    def env(self) -> dict[str, str]:
        """The AWS_* variables a broker (obstore, delta-rs) reads to reach this server."""
        return {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1",
                "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": self.endpoint, "AWS_ALLOW_HTTP": "true"}

    def client(self):  # type: ignore[no-untyped-def]
        import boto3  # loaded only by the tests that use S3

        return boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id="testing",
                            aws_secret_access_key="testing", region_name="us-east-1")

    def new_bucket(self) -> str:
        name = f"sparkmq-test-{next(_BUCKETS)}"
        self.client().create_bucket(Bucket=name)
        return name

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        return sorted(o["Key"] for page in pages for o in page.get("Contents", []))


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """moto's S3 server on a free loopback port, one per test session (each test makes its own bucket)."""
    from moto.server import ThreadedMotoServer  # loaded only by the tests that use S3

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield S3Server(f"http://127.0.0.1:{port}")
    finally:
        server.stop()


class Gate:
    """A TCP relay on a free port in front of ``target``; ``close()`` holds every byte from then on
    (connections stay open, nothing is forwarded), and ``traffic`` is set when a client sends some."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = free_port()
        self.traffic = threading.Event()
        self._open = threading.Event()
        self._open.set()
        self._stop = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self._listener.settimeout(0.2)
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    def close(self) -> None:
        self._open.clear()
        self.traffic.clear()

    def open(self) -> None:
        self._open.set()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            for a, b in ((conn, upstream), (upstream, conn)):
                t = threading.Thread(target=self._pipe, args=(a, b), daemon=True)
                t.start()
                self._threads.append(t)

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        src.settimeout(0.2)
        while not self._stop.is_set():
            try:
                data = src.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                break
            if not data:
                break
            self.traffic.set()
            while not self._open.is_set() and not self._stop.is_set():
                self._stop.wait(0.05)
            if self._stop.is_set():
                break
            try:
                dst.sendall(data)
            except OSError:
                break
        for s in (src, dst):
            try:
                s.close()
            except OSError:
                pass

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=2)
        self._listener.close()
