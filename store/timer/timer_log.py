"""TimerLog: the append-only log of pending timer messages, one 40-byte unit each.

Files live in ``<store>/timer/log/<20-digit start byte>`` (a MappedFileQueue);
positions are log-wide byte offsets.  A unit, little-endian::

    0        8              16       24       28       32             40
    +--------+--------------+--------+--------+--------+--------------+
    | prev   | deliver_ms   | phy    | size   | magic  | queue_offset |
    | int64  | int64        | int64  | int32  | int32  | int64        |
    +--------+--------------+--------+--------+--------+--------------+

``prev`` links the units of one wheel slot backwards (-1 ends the chain); the
slot holds the last one (see timer_store.py).  ``phy``/``size`` locate the
message in the CommitLog (topic ``rmq_sys_wheel_timer``), ``queue_offset`` is
its offset in that topic's queue 0, so recovery knows what was enqueued.
``magic`` is :data:`MAGIC`; segments are created sparse, so the first unit
whose magic is 0 ends the log (recovery trusts that scan, never file sizes).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..mapped_file_queue import MappedFileQueue

__all__ = ["TimerLog", "UNIT_DTYPE", "UNIT_SIZE", "MAGIC"]

UNIT_DTYPE = np.dtype([("prev", "<i8"), ("deliver", "<i8"), ("phy", "<i8"), ("size", "<i4"), ("magic", "<i4"),
                       ("qoff", "<i8")])
UNIT_SIZE = UNIT_DTYPE.itemsize  # 40
MAGIC = 0x7153E7A1


class TimerLog:
    def __init__(self, directory: Path, segment_units: int) -> None:
        self.files = MappedFileQueue(directory, segment_units * UNIT_SIZE)
        self.segment_bytes = segment_units * UNIT_SIZE

    def load(self) -> None:
        """Map the segments and find the written end by scanning for the first unit without magic."""
        self.files.load()
        for seg in reversed(self.files.files):
            units = np.frombuffer(seg.read(0, seg.size), UNIT_DTYPE)
            bad = np.flatnonzero(units["magic"] != MAGIC)
            if not len(bad):
                break
            self.files.truncate_dirty(seg.start_offset + int(bad[0]) * UNIT_SIZE)
            if bad[0] > 0:
                break

    @property
    def end(self) -> int:
        return self.files.max_offset()

    @property
    def start(self) -> int:
        return self.files.min_offset()

    def append(self, units: np.ndarray) -> int:
        """Append ``units`` (they must not cross a segment end: see :meth:`room`); returns their position."""
        seg = self.files.writable(self.end)
        pos = seg.append(units.tobytes())
        return seg.start_offset + pos

    def room(self) -> int:
        """Units that fit before the current segment ends (a full one rolls at the next append)."""
        last = self.files.last()
        if last is None or last.is_full:
            return self.segment_bytes // UNIT_SIZE
        return last.remaining // UNIT_SIZE

    def unit(self, pos: int) -> np.ndarray:
        seg = self.files.find(pos)
        if seg is None:
            raise ValueError(f"timer log position {pos} is not in the log")
        return np.frombuffer(seg.read(pos - seg.start_offset, UNIT_SIZE), UNIT_DTYPE)[0]

    def all_units(self) -> tuple[np.ndarray, np.ndarray]:
        """(positions, units) of every unit in the log, in log order."""
        pos_parts, unit_parts = [], []
        for seg in self.files.files:
            units = np.frombuffer(seg.read(0, seg.wrote), UNIT_DTYPE)
            pos_parts.append(seg.start_offset + UNIT_SIZE * np.arange(len(units), dtype=np.int64))
            unit_parts.append(units)
        if not unit_parts:
            return np.empty(0, np.int64), np.empty(0, UNIT_DTYPE)
        return np.concatenate(pos_parts), np.concatenate(unit_parts)

    def set_prev(self, positions: np.ndarray, prev: np.ndarray) -> None:
        """Rewrite the ``prev`` field of the units at ``positions`` (ascending) in place."""
        if not len(positions):
            return
        seg_of = positions - positions % self.segment_bytes
        for start in np.unique(seg_of).tolist():
            seg = self.files.find(int(start))
            if seg is None:
                continue
            rows = seg_of == start
            view = np.frombuffer(seg._mm, UNIT_DTYPE)  # writable: the segment's shared mapping
            view["prev"][(positions[rows] - start) // UNIT_SIZE] = prev[rows]

    def delete_before(self, offset: int) -> int:
        return self.files.delete_before(offset)

    def flush(self) -> None:
        self.files.flush()

    def close(self) -> None:
        self.files.close()
