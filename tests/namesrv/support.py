"""A NameServer as a real subprocess (``python -m broker_api namesrv``) for tests."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx

from broker_api.namesrv import body_crc32
from tests import launcher
from tests.procs import stop_process

REPO_ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class NamesrvProcess:
    """One NameServer on 127.0.0.1:``port``; ``env`` adds SPARKMQ_NAMESRV_* settings."""

    def __init__(self, port: int, log_path: Path, env: dict[str, str] | None = None) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.log_path = log_path
        self._env = {k: v for k, v in os.environ.items() if not k.startswith("SPARKMQ_")}
        self._env.update(env or {})
        self.proc: subprocess.Popen[bytes] | launcher.Forked | None = None

    def start(self, timeout_s: float = 60.0) -> NamesrvProcess:  # as a broker: a loaded machine imports slowly
        self.proc = launcher.spawn(["namesrv", "--host", "127.0.0.1", "--port", str(self.port)], self._env,
                                   self.log_path, cwd=REPO_ROOT)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"namesrv exited with {self.proc.returncode}:\n{self.log()}")
            try:
                if httpx.get(self.url + "/healthz", timeout=1.0).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"namesrv not ready after {timeout_s}s:\n{self.log()}")

    def stop(self, timeout_s: float = 15.0) -> int | None:
        """SIGTERM and wait (SIGKILL past the timeout); returns the exit code."""
        return stop_process(self.proc, timeout_s)

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def get(self, path: str) -> httpx.Response:
        return httpx.get(self.url + path, timeout=5.0)

    def post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        return httpx.post(self.url + path, json=body, timeout=5.0)


def register_body(broker_name: str, topics: dict[str, int], broker_id: int = 0, port: int = 18080,
                  counter: int = 0, cluster: str = "c1", ha_address: str | None = None) -> dict[str, Any]:
    """A registration body with a correct crc32; ``topics`` maps name -> queue count."""
    body: dict[str, Any] = {
        "cluster": cluster,
        "broker_name": broker_name,
        "broker_id": broker_id,
        "address": f"http://127.0.0.1:{port}",
        "ha_address": ha_address,
        "data_version": {"timestamp": 1_700_000_000_000, "counter": counter},
        "topics": {t: {"read_queues": n, "write_queues": n, "perm": "rw"} for t, n in topics.items()},
    }
    body["crc32"] = body_crc32(body)
    return body


def wait_until(check: Any, timeout_s: float = 10.0, step_s: float = 0.05) -> Any:
    """Poll ``check()`` until it returns something truthy; fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout_s}s: {check}")
        time.sleep(step_s)
