"""StoreCheckpoint: how far the store is known to be durable.

A small JSON file, replaced atomically (write temp, fsync, rename, fsync the
directory) so a crash leaves either the old or the new version::

    {"commitlog_flushed": 1048576,   # CommitLog bytes covered by fdatasync
     "logics_flushed": 1040000,      # reput offset when ConsumeQueues + index were last flushed
     "commitlog_ts": 1700000000000,  # wall-clock ms of those flushes
     "logics_ts": 1700000000000,
     "crc": 123456789}               # zlib.crc32 of the four fields' JSON (sorted keys)

A file whose ``crc`` does not match is unreadable, like one that does not
parse: recovery then scans from the start, which costs time, never data.

Recovery starts its CRC scan at ``commitlog_flushed`` (the last safe point)
and re-dispatches from ``logics_flushed``.
"""

from __future__ import annotations

import json
import logging
import errno
import os
import threading
import zlib
from dataclasses import asdict, dataclass
from pathlib import Path

__all__ = ["Checkpoint", "StoreCheckpoint", "atomic_write"]

_log = logging.getLogger(__name__)


def atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves old or new, never a mix."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        if os.write(fd, data) != len(data):
            raise OSError(errno.ENOSPC, f"short write to {tmp}")
        os.fsync(fd)
    except BaseException:
        tmp.unlink(missing_ok=True)  # a full disk leaves the old file, and no half-written temp
        raise
    finally:
        os.close(fd)
    os.replace(tmp, path)
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


@dataclass(slots=True)
class Checkpoint:
    commitlog_flushed: int = 0
    logics_flushed: int = 0
    commitlog_ts: int = 0
    logics_ts: int = 0


class StoreCheckpoint:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.value = Checkpoint()
        self.loaded = False
        self._lock = threading.Lock()

    def load(self) -> Checkpoint:
        try:
            raw = json.loads(self.path.read_bytes())
            value = Checkpoint(**{k: int(raw[k]) for k in asdict(Checkpoint())})
            if "crc" in raw and int(raw["crc"]) != _crc(value):
                raise ValueError("its crc does not match its fields")
            self.value, self.loaded = value, True
        except FileNotFoundError:
            pass
        except (ValueError, KeyError, TypeError) as exc:
            _log.warning("checkpoint %s is unreadable (%s); recovery will scan from the start", self.path, exc)
        return self.value

    def update(self, **fields: int) -> None:
        with self._lock:
            for k, v in fields.items():
                setattr(self.value, k, v)
            atomic_write(self.path, json.dumps({**asdict(self.value), "crc": _crc(self.value)}).encode())


def _crc(value: Checkpoint) -> int:
    return zlib.crc32(json.dumps(asdict(value), sort_keys=True).encode())
