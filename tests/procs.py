"""Helpers for the real server subprocesses tests start."""

from __future__ import annotations

import signal
import subprocess


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
