"""A real etcd cluster on 127.0.0.1 for the controller's quorum tests (Debian's ``etcd-server``)."""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import httpx
import pytest

from tests.namesrv.support import free_port

_INSTALL_TIMEOUT_S = 300


def etcd_binary() -> str:
    """The ``etcd`` binary: Debian's ``etcd-server``, installed on first use where the tests run as root with
    apt-get (as the benchmarks install their peers); elsewhere the test is skipped with the command to run."""
    found = shutil.which("etcd")
    if found is None and shutil.which("apt-get") and os.geteuid() == 0:
        with open(Path(tempfile.gettempdir()) / "sparkmq-etcd-install.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # two test processes never run apt-get at once
            found = shutil.which("etcd")
            if found is None:
                env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
                for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "etcd-server"]):
                    subprocess.run(cmd, env=env, capture_output=True, timeout=_INSTALL_TIMEOUT_S, check=False)
                found = shutil.which("etcd")
    if found is None:
        pytest.skip("the etcd binary is not installed (apt-get install etcd-server)")
    return found


class EtcdCluster:
    """``n`` members with fast Raft timings; ``kill_leader`` SIGKILLs the Raft leader."""

    def __init__(self, root: Path, n: int = 3) -> None:
        self.root = root
        self.clients = [free_port() for _ in range(n)]
        self.peers = [free_port() for _ in range(n)]
        self.procs: list[subprocess.Popen[bytes] | None] = [None] * n
        self.initial = ",".join(f"m{i}=http://127.0.0.1:{p}" for i, p in enumerate(self.peers))

    @property
    def endpoints(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.clients)

    def start(self) -> EtcdCluster:
        etcd = etcd_binary()
        for i, (c, p) in enumerate(zip(self.clients, self.peers)):
            log = open(self.root / f"etcd{i}.log", "ab")  # noqa: SIM115 - closed with the process
            self.procs[i] = subprocess.Popen(
                [etcd, "--name", f"m{i}", "--data-dir", str(self.root / f"etcd{i}"),
                 "--listen-client-urls", f"http://127.0.0.1:{c}", "--advertise-client-urls", f"http://127.0.0.1:{c}",
                 "--listen-peer-urls", f"http://127.0.0.1:{p}", "--initial-advertise-peer-urls",
                 f"http://127.0.0.1:{p}", "--initial-cluster", self.initial, "--initial-cluster-state", "new",
                 "--heartbeat-interval", "50", "--election-timeout", "500", "--log-level", "error",
                 "--logger", "zap"], stdout=log, stderr=subprocess.STDOUT)
            log.close()
        self.wait_leader(30)
        return self

    def status(self, i: int) -> dict[str, str]:
        r = httpx.post(f"http://127.0.0.1:{self.clients[i]}/v3/maintenance/status", json={}, timeout=1)
        return dict(r.json())

    def leader(self) -> int | None:
        """Index of the member that is the Raft leader, as a live member sees it."""
        for i, proc in enumerate(self.procs):
            if proc is None or proc.poll() is not None:
                continue
            try:
                st = self.status(i)
            except (httpx.HTTPError, ValueError):
                continue
            if st.get("leader") and st.get("leader") == st["header"]["member_id"]:
                return i
        return None

    def wait_leader(self, timeout_s: float) -> int:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            found = self.leader()
            if found is not None:
                return found
            time.sleep(0.05)
        raise AssertionError(f"no etcd leader within {timeout_s} s")

    def kill(self, i: int) -> None:
        proc = self.procs[i]
        assert proc is not None
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)

    def stop(self) -> None:
        for proc in self.procs:
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(10)
