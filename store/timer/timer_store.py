"""TimerStore: the timer wheel over the timer log (RocketMQ 5's TimerMessageStore, store side).

::

    <store>/timer/
      log/<20-digit start byte>   TimerLog units (timer_log.py)
      wheel                       the wheel, mmapped: ``slots`` entries of 24 bytes
      checkpoint.json             {"offsets": {"read_slot", "enqueue_offset"}, "commitlog_end"}

A wheel entry (little-endian)::

    0        8            16        24
    +--------+------------+---------+
    | slot   | last pos   | count   |
    | int64  | int64      | int64   |
    +--------+------------+---------+

Time is cut into slots of ``precision_ms``; a message due at ``t`` belongs to slot
``ceil(t / precision_ms)`` and is delivered once ``now >= slot * precision_ms``, so at
its due time or at most one slot later, never early.  Slot ``k`` lives at wheel index
``k % slots``; the entry names its slot, so a stale entry (a slot already read) is
simply reset.  ``slots`` covers twice ``max_delay`` (as RocketMQ's wheel), so a slot
is never reused while pending.  Cost: one 40-byte unit per pending message and a
fixed wheel; a pass reads only the due slots' chains, whatever the delays are.

Enqueue (:meth:`enqueue`) appends units for the timer topic's ConsumeQueue units
(their tag code is the due time) and links each into its slot's backward chain.
Dequeue (:meth:`due`) collects the chains of every slot from ``read_slot`` to now;
the caller re-puts the messages and then :meth:`commit` advances ``read_slot`` and
records the checkpoint (with the CommitLog end, for exactly-once: store/schedule.py).

Recovery: the log is scanned for its end (timer_log.py), the enqueue offset is the
last unit's queue offset + 1 (or the checkpoint's, if further), and the wheel is
rebuilt from the units of unread slots, so a crash between writing a unit and
linking it, or a changed geometry, never loses or repeats one.  Segments whose units
are all read are deleted.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..schedule import ScheduleProgress
from .timer_log import MAGIC, UNIT_DTYPE, UNIT_SIZE, TimerLog

__all__ = ["TimerStore", "Due", "WHEEL_DTYPE"]

_log = logging.getLogger(__name__)

WHEEL_DTYPE = np.dtype([("slot", "<i8"), ("last", "<i8"), ("count", "<i8")])


@dataclass(slots=True)
class Due:
    """Messages due now, in enqueue order, and the slot after the last one read."""

    phys: np.ndarray  # int64, CommitLog offsets of the timer-topic copies
    sizes: np.ndarray  # int32
    next_slot: int


class TimerStore:
    def __init__(self, root: Path, precision_ms: int, max_delay_ms: int, segment_units: int = 1 << 20) -> None:
        self.root = root
        self.precision_ms = precision_ms
        self.slots = 2 * (max_delay_ms // precision_ms + 1) + 64
        self.log = TimerLog(root / "log", segment_units)
        self.progress = ScheduleProgress(root / "checkpoint.json")
        self.read_slot = 0
        self.enqueue_offset = 0
        self._wheel: np.memmap | None = None
        self._seg_max: dict[int, int] = {}  # segment start -> highest slot of its units

    # -- lifecycle -------------------------------------------------------

    def load(self, now_ms: int) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.progress.load()
        self.log.load()
        self.read_slot = self.progress.offsets.get("read_slot", 0) or self._slot(now_ms)
        self.enqueue_offset = self.progress.offsets.get("enqueue_offset", 0)
        self._open_wheel()
        self._rebuild()

    def _open_wheel(self) -> None:
        path = self.root / "wheel"
        size = self.slots * WHEEL_DTYPE.itemsize
        if not path.exists() or path.stat().st_size != size:
            with open(path, "wb") as fh:
                fh.truncate(size)
        self._wheel = np.memmap(path, WHEEL_DTYPE, "r+", shape=(self.slots,))

    def _rebuild(self) -> None:
        """The wheel from the log's units of unread slots (their prev pointers rewritten)."""
        wheel = self._w
        wheel["slot"], wheel["last"], wheel["count"] = -1, -1, 0
        positions, units = self.log.all_units()
        self._seg_max = {}
        if not len(units):
            return
        self.enqueue_offset = max(self.enqueue_offset, int(units["qoff"][-1]) + 1)
        slots = np.maximum(self._slots(units["deliver"]), 0)
        seg = positions - positions % self.log.segment_bytes
        for start in np.unique(seg).tolist():
            self._seg_max[start] = int(slots[seg == start].max())
        live = np.flatnonzero(slots >= self.read_slot)
        prev = self._link(slots[live], positions[live])
        self.log.set_prev(positions[live], prev)
        _log.info("timer wheel rebuilt: %d pending of %d units in the timer log", len(live), len(units))

    def _link(self, slots: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """Link units (log ``positions``, ascending) into their slots; returns each one's prev pointer."""
        n = len(slots)
        order = np.lexsort((positions, slots))
        s_sorted, p_sorted = slots[order], positions[order]
        first = np.ones(n, bool)
        first[1:] = s_sorted[1:] != s_sorted[:-1]
        last_of = np.ones(n, bool)
        last_of[:-1] = s_sorted[:-1] != s_sorted[1:]
        wheel = self._w
        idx = s_sorted % self.slots
        gi, gs = idx[first], s_sorted[first]
        same = wheel["slot"][gi] == gs  # the slot already has a chain (else: empty or stale, start one)
        prev_sorted = np.empty(n, np.int64)
        prev_sorted[1:] = p_sorted[:-1]
        prev_sorted[first] = np.where(same, wheel["last"][gi], -1)
        counts = np.diff(np.append(np.flatnonzero(first), n))
        old = np.where(same, wheel["count"][gi], 0)
        wheel["slot"][gi], wheel["last"][gi], wheel["count"][gi] = gs, p_sorted[last_of], old + counts
        prev = np.empty(n, np.int64)
        prev[order] = prev_sorted
        return prev

    def close(self) -> None:
        if self._wheel is not None:
            self._wheel.flush()
            self._wheel = None
        self.log.close()

    @property
    def _w(self) -> np.memmap:
        assert self._wheel is not None, "TimerStore.load() first"
        return self._wheel

    def _slot(self, ms: int) -> int:
        return -(-int(ms) // self.precision_ms)

    def _slots(self, ms: np.ndarray) -> np.ndarray:
        return -(-ms.astype(np.int64) // self.precision_ms)

    # -- enqueue ---------------------------------------------------------

    def enqueue(self, qoffs: np.ndarray, phys: np.ndarray, sizes: np.ndarray, deliver_ms: np.ndarray) -> None:
        """Add units for the timer queue's units at ``qoffs`` (consecutive, from ``enqueue_offset``)."""
        done = 0
        while done < len(qoffs):
            n = min(len(qoffs) - done, self.log.room())
            part = slice(done, done + n)
            self._enqueue_run(qoffs[part], phys[part], sizes[part], deliver_ms[part])
            done += n
        if len(qoffs):
            self.enqueue_offset = int(qoffs[-1]) + 1

    def _enqueue_run(self, qoffs: np.ndarray, phys: np.ndarray, sizes: np.ndarray, deliver: np.ndarray) -> None:
        n = len(qoffs)
        slots = np.maximum(self._slots(deliver), self.read_slot)  # overdue: the next pass
        units = np.zeros(n, UNIT_DTYPE)
        units["deliver"], units["phy"], units["size"], units["magic"], units["qoff"] = \
            deliver, phys, sizes, MAGIC, qoffs
        pos = self.log.append(units)  # prev = 0 for now: linked below, rewritten in place
        positions = pos + UNIT_SIZE * np.arange(n, dtype=np.int64)
        self.log.set_prev(positions, self._link(slots, positions))
        seg = pos - pos % self.log.segment_bytes
        self._seg_max[seg] = max(self._seg_max.get(seg, -1), int(slots.max()))

    # -- dequeue ---------------------------------------------------------

    def due(self, now_ms: int, limit: int = 100_000) -> Due:
        """Messages of the slots from ``read_slot`` to ``now_ms`` (whole slots, about ``limit`` at most)."""
        now_slot = now_ms // self.precision_ms
        if now_slot < self.read_slot:
            return Due(np.empty(0, np.int64), np.empty(0, np.int32), self.read_slot)
        wheel = self._w
        if now_slot - self.read_slot < self.slots:  # the usual pass: look at the due slots' entries only
            idx = np.arange(self.read_slot, now_slot + 1, dtype=np.int64) % self.slots
            ks = np.arange(self.read_slot, now_slot + 1, dtype=np.int64)
            hits = idx[(wheel["slot"][idx] == ks) & (wheel["count"][idx] > 0)]  # in slot order
        else:  # after a long pause: every slot could be due
            live = (wheel["slot"] >= self.read_slot) & (wheel["slot"] <= now_slot) & (wheel["count"] > 0)
            hits = np.flatnonzero(live)
            hits = hits[np.argsort(wheel["slot"][hits])]
        chain: list[Any] = []
        next_slot = now_slot + 1
        for i in hits.tolist():
            if len(chain) >= limit:
                next_slot = int(wheel["slot"][i])
                break
            pos = int(wheel["last"][i])
            while pos >= 0:
                unit = self.log.unit(pos)
                chain.append(unit)
                pos = int(unit["prev"])
        units = np.array(chain, UNIT_DTYPE) if chain else np.empty(0, UNIT_DTYPE)
        units = units[np.argsort(units["qoff"], kind="stable")]  # enqueue order
        return Due(units["phy"].astype(np.int64), units["size"].astype(np.int32), next_slot)

    def commit(self, next_slot: int, commitlog_end: int) -> None:
        """Slots before ``next_slot`` are delivered: clear them, record the checkpoint, drop read segments."""
        wheel = self._w
        gone = (wheel["slot"] >= 0) & (wheel["slot"] < next_slot)
        wheel["slot"][gone], wheel["last"][gone], wheel["count"][gone] = -1, -1, 0
        self.read_slot = max(self.read_slot, next_slot)
        self.save(commitlog_end)
        starts = sorted(self._seg_max)
        done = 0
        while done < len(starts) - 1 and self._seg_max[starts[done]] < self.read_slot:
            done += 1
        if done:  # whole segments of read units (never the last)
            self.log.delete_before(starts[done])
            for start in starts[:done]:
                del self._seg_max[start]

    def save(self, commitlog_end: int) -> None:
        self._w.flush()
        self.log.flush()
        self.progress.save({"read_slot": self.read_slot, "enqueue_offset": self.enqueue_offset}, commitlog_end)

    def pending(self) -> int:
        wheel = self._w
        return int(wheel["count"][wheel["slot"] >= self.read_slot].sum())

    def follow(self, read_slot: int, commitlog_end: int) -> None:
        """A slave takes its master's read slot (only forward)."""
        if read_slot > self.read_slot:
            self.commit(read_slot, commitlog_end)
