"""Atomic JSON files and fsynced JSON-lines journals for broker metadata.

An atomic write goes to ``<name>.tmp``, is fsynced, renamed over the target
and the directory is fsynced, so a crash leaves either the old or the new
file, never a torn one.  A journal is appended one JSON object per line and
fsynced per append; a torn last line (crash mid-append) is skipped on read.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, Iterator

import orjson

__all__ = ["write_json_atomic", "read_json", "Journal"]

log = logging.getLogger(__name__)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_json_atomic(path: Path, value: Any) -> None:
    """Write ``value`` as JSON to ``path`` atomically (temp, fsync, rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    data = orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def read_json(path: Path, default: Any) -> Any:
    """Read a JSON file written by :func:`write_json_atomic`; ``default`` if absent.

    A file that does not parse is renamed aside to ``<name>.corrupt`` and the
    default is returned, so one bad file does not stop the broker.
    """
    if not path.exists():
        return default
    try:
        return orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError:
        aside = path.with_name(path.name + ".corrupt")
        log.error("metadata file %s does not parse; moved to %s", path, aside)
        os.replace(path, aside)
        return default


class Journal:
    """An append-only JSON-lines file; each append is fsynced before returning."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh: Any = None

    def open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(self.path, "ab")

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def append(self, record: dict[str, Any]) -> None:
        """Append one record and fsync it (the record is durable on return)."""
        fh = self._fh
        fh.write(orjson.dumps(record) + b"\n")
        fh.flush()
        os.fdatasync(fh.fileno())

    def records(self) -> Iterator[dict[str, Any]]:
        """Every complete record in order; a torn last line is skipped."""
        if not self.path.exists():
            return
        with open(self.path, "rb") as fh:
            for line in fh:
                if not line.endswith(b"\n"):
                    log.warning("journal %s has a torn last line; ignored", self.path)
                    return
                yield orjson.loads(line)

    def reset(self) -> None:
        """Empty the journal (after its content went into a snapshot)."""
        self.close()
        with open(self.path, "wb") as fh:
            os.fsync(fh.fileno())
        self.open()
