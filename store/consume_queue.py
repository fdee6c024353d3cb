"""ConsumeQueue: the per (topic, queue) index of CommitLog positions.

Files live in ``consumequeue/<topic>/<queue id>/<20-digit start byte>`` and
hold fixed 20-byte units, big-endian::

    0        8              12               20
    +--------+--------------+----------------+
    | phy    | size (int32) | tag code       |
    | int64  |              | int64          |
    +--------+--------------+----------------+

The queue offset of a message is the index of its unit.  An all-zero unit
(size 0) marks the end of what was written: segments are created sparse, so
recovery finds the end by looking for the first zero size.
"""

from __future__ import annotations

import logging
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import numpy as np

from .mapped_file import MappedFile
from .mapped_file_queue import MappedFileQueue

__all__ = ["UNIT_DTYPE", "UNIT_SIZE", "ConsumeQueue", "RemoteUnits"]

_log = logging.getLogger(__name__)

UNIT_DTYPE = np.dtype([("phy", ">i8"), ("size", ">i4"), ("tag", ">i8")])
UNIT_SIZE = UNIT_DTYPE.itemsize  # 20


def _dead_units(count: int) -> np.ndarray:
    """Placeholder units (phy -1, size 1) for offsets whose messages are gone; never served."""
    units = np.zeros(count, UNIT_DTYPE)
    units["phy"], units["size"] = -1, 1
    return units


class RemoteUnits(Protocol):
    """Units of tiered CommitLog segments whose local ConsumeQueue files are gone (``store.tiered.RemoteQueues``)."""

    def low(self, topic: str, queue_id: int) -> int | None: ...

    def read(self, topic: str, queue_id: int, offset: int, count: int) -> bytes: ...


class ConsumeQueue:
    def __init__(self, directory: Path, topic: str, queue_id: int, segment_units: int,
                 remote: RemoteUnits | None = None) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.directory = directory
        self.files = MappedFileQueue(directory, segment_units * UNIT_SIZE)
        self.remote = remote
        self._min_logical = 0  # first unit whose message still exists
        self._floor = 0  # the same below the local files (remote units): raised by correct_min_offset
        self._lock = threading.Lock()

    # -- offsets ---------------------------------------------------------
    def max_offset(self) -> int:
        """One past the last unit (exclusive), as RocketMQ's getMaxOffsetInQueue."""
        return self.files.max_offset() // UNIT_SIZE

    def min_offset(self) -> int:
        local = max(self._min_logical, self.files.min_offset() // UNIT_SIZE)
        low = self.remote.low(self.topic, self.queue_id) if self.remote is not None else None
        return local if low is None or low >= local else max(low, self._floor)

    def max_phy_end(self) -> int:
        """CommitLog offset just past the last message this queue indexes."""
        n = self.max_offset()
        if n == 0 or n <= self.min_offset():
            return 0
        unit = self.read_units(n - 1, 1)
        return int(unit["phy"][0]) + int(unit["size"][0]) if len(unit) else 0

    # -- write -----------------------------------------------------------
    def put_units(self, qoffs: np.ndarray, phys: np.ndarray, sizes: np.ndarray, tags: np.ndarray) -> None:
        """Append units; those already present (a re-dispatch) are skipped."""
        cur = self.max_offset()
        if cur == 0 and self.files.last() is None and len(qoffs) and int(qoffs[0]) > 0:
            cur = self._start_midway(int(qoffs[0]))
        keep = qoffs >= cur
        if not keep.all():
            qoffs, phys, sizes, tags = qoffs[keep], phys[keep], sizes[keep], tags[keep]
        if not len(qoffs):
            return
        if int(qoffs[0]) != cur:
            # The records in between were deleted before they were dispatched.
            _log.warning("%s/%d: units %d-%d were lost to retention before dispatch; skipping them",
                         self.topic, self.queue_id, cur, int(qoffs[0]) - 1)
            self._append(_dead_units(int(qoffs[0]) - cur))
            self._min_logical = max(self._min_logical, int(qoffs[0]))
        units = np.empty(len(qoffs), UNIT_DTYPE)
        units["phy"], units["size"], units["tag"] = phys, sizes, tags
        self._append(units)

    def _append(self, units: np.ndarray) -> None:
        data = units.tobytes()
        pos = 0
        while pos < len(data):
            seg = self.files.writable(self.files.max_offset())
            take = min(seg.remaining, len(data) - pos)
            seg.append(data[pos : pos + take])
            pos += take

    def _start_midway(self, first: int) -> int:
        """A rebuilt queue whose early messages retention deleted starts at ``first``.

        Units before it in the first segment are filled with dead units
        (phy -1, size 1) that no read ever serves.
        """
        seg = self.files.writable(first * UNIT_SIZE)
        seg.append(_dead_units(first - seg.start_offset // UNIT_SIZE).tobytes())
        self._min_logical = first
        return first

    # -- read ------------------------------------------------------------
    def read_units(self, offset: int, count: int) -> np.ndarray:
        """Up to ``count`` units from ``offset``, stopping at a segment end."""
        end = min(offset + count, self.max_offset())
        if offset >= end:
            return np.empty(0, UNIT_DTYPE)
        byte_off = offset * UNIT_SIZE
        seg = self.files.find(byte_off)
        if seg is None:
            raw = self.remote.read(self.topic, self.queue_id, offset, end - offset) if self.remote else b""
            return np.frombuffer(raw, UNIT_DTYPE)
        pos = byte_off - seg.start_offset
        size = min((end - offset) * UNIT_SIZE, seg.wrote - pos)
        try:
            raw = seg.read(pos, size)
        except ValueError:  # deleted by retention meanwhile
            return np.empty(0, UNIT_DTYPE)
        return np.frombuffer(raw, UNIT_DTYPE)

    def offset_for_timestamp(self, ts_ms: int, store_time: Callable[[int, int], int]) -> int:
        """First queue offset whose message was stored at or after ``ts_ms``."""
        lo, hi = self.min_offset(), self.max_offset()
        while lo < hi:
            mid = (lo + hi) // 2
            unit = self.read_units(mid, 1)
            if not len(unit):
                lo = mid + 1
                continue
            if store_time(int(unit["phy"][0]), int(unit["size"][0])) < ts_ms:
                lo = mid + 1
            else:
                hi = mid
        return lo

    # -- maintenance -----------------------------------------------------
    def recover(self, commitlog_max: int) -> None:
        """Find the written end and drop units pointing past the CommitLog's end."""
        self.files.load()
        for seg in reversed(self.files.files):
            bad = self._first_bad_unit(seg, commitlog_max)
            if bad is None:
                break
            self.files.truncate_dirty(seg.start_offset + bad * UNIT_SIZE)
            if bad > 0:
                break
        self._min_logical = self.files.min_offset() // UNIT_SIZE

    @staticmethod
    def _first_bad_unit(seg: MappedFile, commitlog_max: int) -> int | None:
        """Index of the segment's first unit that is empty or points past ``commitlog_max`` (None: all good).
        Read a piece at a time: the zeroes after the written end are not read past the first."""
        step = -(-(1 << 20) // UNIT_SIZE) * UNIT_SIZE  # whole units, at least 1 MiB (read with pread)
        for at in range(0, seg.size - seg.size % UNIT_SIZE, step):
            units = np.frombuffer(seg.read(at, min(step, seg.size - at) // UNIT_SIZE * UNIT_SIZE), UNIT_DTYPE)
            bad = np.flatnonzero((units["size"] <= 0) | (units["phy"] + units["size"] > commitlog_max))
            if len(bad):
                return at // UNIT_SIZE + int(bad[0])
        return None

    def correct_min_offset(self, commitlog_min: int) -> None:
        """Move the min offset past units whose messages retention deleted."""
        lo, hi = self.min_offset(), self.max_offset()
        while lo < hi:
            mid = (lo + hi) // 2
            unit = self.read_units(mid, 1)
            if len(unit) and int(unit["phy"][0]) >= commitlog_min:
                hi = mid
            else:
                lo = mid + 1
        self._min_logical = self._floor = lo
        self.files.delete_before(lo * UNIT_SIZE)

    def flush(self) -> None:
        self.files.flush()

    def close(self) -> None:
        self.files.close()

    def destroy(self) -> None:
        self.files.close()
        shutil.rmtree(self.directory, ignore_errors=True)
