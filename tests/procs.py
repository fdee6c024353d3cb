"""Helpers for the real server subprocesses tests start: stopping them, and free ports for them."""

from __future__ import annotations

import errno
import os
import random
import signal
import socket
import subprocess
from collections import deque

# Under pytest-xdist each worker hands out ports from its own slice of 20000-32767: below Linux's
# ephemeral range (32768-60999), so no client connection of this run (httpx, Spark, a browser) can
# take a port between the test picking it and the server binding it, and two workers never pick
# the same one.  A run without workers asks the kernel (port 0), as before.
_SLICE_LOW = 20000
_SLICE_HIGH = 32768
_SLICES = 4
_RANDOM = random.SystemRandom()  # tests that seed `random` must not change which ports we pick
_RECENT: deque[int] = deque(maxlen=512)  # handed out lately, maybe not bound yet: never twice in a row


def _worker_index() -> int | None:
    """0 for xdist's gw0, 1 for gw1, ...; None outside xdist."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    return int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else None


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                return False
            raise
    return True


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (this worker's slice under xdist)."""
    index = _worker_index()
    if index is None:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            return int(s.getsockname()[1])
    width = (_SLICE_HIGH - _SLICE_LOW) // _SLICES
    low = _SLICE_LOW + (index % _SLICES) * width
    for _ in range(200):
        port = _RANDOM.randrange(low, low + width)
        if port not in _RECENT and _bindable(port):
            _RECENT.append(port)
            return port
    raise RuntimeError(f"no free port in {low}-{low + width - 1} after 200 tries")


def stop_process(proc: subprocess.Popen | None, timeout_s: float) -> int | None:
    """SIGTERM and wait (SIGKILL past the timeout); returns the exit code."""
    if proc is None:
        return None
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    return proc.returncode
