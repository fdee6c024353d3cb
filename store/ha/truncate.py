"""Cut a stopped store's CommitLog at an offset (a returning master's unacknowledged tail).

Runs before :meth:`MessageStore.start`, so no reader or writer is mapped yet.
It drops every segment past ``offset``, zeroes the tail of the one holding it
(``MappedFileQueue.truncate_dirty``, recovery's own path) and fsyncs what
remains plus the directory, so a crash right after leaves no stale record
that a later scan could take as valid (RocketMQ #10666).  The next start's
recovery then finds the log ending at ``offset`` and drops ConsumeQueue units
and index files past it, as after any torn tail.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from ..mapped_file_queue import MappedFileQueue

__all__ = ["truncate_commitlog"]

_log = logging.getLogger(__name__)


def truncate_commitlog(root: Path, segment_bytes: int, offset: int) -> int:
    """Drop the CommitLog under ``root`` at and past ``offset``; returns the segment space cut (0: none)."""
    directory = root / "commitlog"
    if not directory.is_dir():
        return 0
    queue = MappedFileQueue(directory, segment_bytes)
    queue.load()
    try:
        last = queue.last()
        end = last.end_offset if last is not None else 0
        if offset >= end:
            return 0
        queue.truncate_dirty(offset)
        names = [f.path for f in queue.files]
    finally:
        queue.close()
    for path in names:
        fd = os.open(path, os.O_RDWR)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    _log.warning("HA: CommitLog cut at offset %d (its segments ended at %d)", offset, end)
    return end - offset
