"""The store's lock file and abort marker.

``lock``: held with flock(LOCK_EX) for the life of the process, so a second
process opening the same store is refused (the kernel drops the lock when
the holder dies, even by SIGKILL).  ``abort``: created at start, removed by a
clean shutdown; finding it at start means the last run did not shut down.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from .errors import StoreLockedError

__all__ = ["StoreLock"]


class StoreLock:
    def __init__(self, root: Path) -> None:
        self.root = root
        self._fd: int | None = None

    @property
    def abort_path(self) -> Path:
        return self.root / "abort"

    def acquire(self) -> bool:
        """Take the lock; returns True when the last run ended abnormally."""
        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.root / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            os.close(fd)
            raise StoreLockedError(
                f"store {self.root} is in use by another process; stop it or choose another data dir"
            ) from exc
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._fd = fd
        abnormal = self.abort_path.exists()
        self.abort_path.touch()
        return abnormal

    def release(self, clean: bool) -> None:
        if clean:
            self.abort_path.unlink(missing_ok=True)
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
