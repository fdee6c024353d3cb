"""A small real file system for disk-full tests: a tmpfs of a fixed size (needs root and mount)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

__all__ = ["small_tmpfs", "fill_to"]


@contextmanager
def small_tmpfs(path: Path, size_bytes: int) -> Iterator[Path]:
    """Mount a ``size_bytes`` tmpfs at ``path`` for the block; skips the test where mounting is impossible."""
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        pytest.skip("disk-full tests mount a small tmpfs, which needs root (CI runs them as root)")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_bytes}", "tmpfs", str(path)],
                          capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        pytest.skip(f"this machine cannot mount a tmpfs ({done.stderr.strip()}); disk-full tests need one")
    try:
        yield path
    finally:
        if subprocess.run(["umount", str(path)], capture_output=True, timeout=30).returncode != 0:
            subprocess.run(["umount", "-l", str(path)], capture_output=True, timeout=30)


def fill_to(path: Path, free_bytes: int) -> Path:
    """Take space with a filler file until about ``free_bytes`` are left on ``path``'s file system."""
    st = os.statvfs(path)
    free = st.f_bavail * st.f_frsize
    filler = path / "filler"
    take = max(0, free - free_bytes)
    with open(filler, "wb") as f:
        if take:
            os.posix_fallocate(f.fileno(), 0, take)
    return filler
