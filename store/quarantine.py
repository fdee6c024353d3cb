"""Quarantine: damaged CommitLog records that recovery kept instead of cutting.

Recovery cuts only a torn tail (damage with no record start after it).  A
damaged record with records after it is *quarantined*: the log keeps it, the
reput jumps over it, and its ConsumeQueue unit (placed from its own header
when that header agrees with the queue, else filled into the gap the record
leaves in its queue) points at it, so a read of that queue offset answers
CORRUPT_MESSAGE instead of shifting offsets.  The list lives in
``<store root>/quarantine``, JSON replaced atomically, so every later start
and ``store verify`` give the same answer::

    {"records": [{"phy_offset": 4096, "size": 150, "reason": "...",
                  "topic": "t", "queue_id": 0, "queue_offset": 27}, ...]}
"""

from __future__ import annotations

import json
import logging
import threading
from bisect import bisect_right
from dataclasses import asdict, dataclass
from pathlib import Path

from .checkpoint import atomic_write

__all__ = ["DAMAGED_TAG", "Quarantine", "QuarantinedRecord"]

_log = logging.getLogger(__name__)

DAMAGED_TAG = -1  # the tag code of a ConsumeQueue unit that points at a quarantined record (no tag hashes to it)


@dataclass(frozen=True, slots=True)
class QuarantinedRecord:
    """A damaged span of the CommitLog kept by recovery; topic, queue and queue offset come from its
    own header when that could be parsed (None otherwise)."""

    phy_offset: int
    size: int
    reason: str
    topic: str | None = None
    queue_id: int | None = None
    queue_offset: int | None = None

    @property
    def end(self) -> int:
        return self.phy_offset + self.size

    def describe(self) -> str:
        where = (f"topic {self.topic!r} queue {self.queue_id} offset {self.queue_offset}, "
                 if self.topic is not None else "")
        return f"{where}CommitLog offset {self.phy_offset} ({self.size} bytes): {self.reason}"

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


class Quarantine:
    """The sorted, persisted list of quarantined records."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._records: list[QuarantinedRecord] = []
        self._starts: list[int] = []
        self._lock = threading.Lock()

    def load(self) -> None:
        """Read the list; an unreadable file is logged and leaves it empty (recovery finds the records again
        when it scans them)."""
        if self.path is None or not self.path.exists():
            return
        try:
            raw = json.loads(self.path.read_bytes())
            self._set([QuarantinedRecord(**r) for r in raw["records"]])
        except (ValueError, KeyError, TypeError) as exc:
            _log.warning("quarantine list %s is unreadable (%s); it is rebuilt by the next full scan", self.path, exc)

    def _set(self, records: list[QuarantinedRecord]) -> None:
        records = sorted({r.phy_offset: r for r in records}.values(), key=lambda r: r.phy_offset)
        with self._lock:
            self._records, self._starts = records, [r.phy_offset for r in records]

    def records(self) -> list[QuarantinedRecord]:
        return list(self._records)

    def __len__(self) -> int:
        return len(self._records)

    def add(self, record: QuarantinedRecord) -> None:
        self._set([*self._records, record])

    def keep_within(self, lo: int, hi: int) -> None:
        """Forget records outside ``[lo, hi)`` (retention deleted them, or recovery cut the log there)."""
        kept = [r for r in self._records if r.phy_offset >= lo and r.end <= hi]
        if len(kept) != len(self._records):
            self._set(kept)

    def save(self) -> None:
        if self.path is not None and (self._records or self.path.exists()):
            data = {"records": [r.as_dict() for r in self._records]}
            atomic_write(self.path, json.dumps(data).encode())

    def covering(self, offset: int) -> QuarantinedRecord | None:
        """The record whose span holds ``offset``, or None."""
        starts = self._starts
        i = bisect_right(starts, offset) - 1
        if i >= 0 and offset < self._records[i].end:
            return self._records[i]
        return None

    def next_start(self, offset: int) -> int | None:
        """Where the first record at or after ``offset`` starts, or None."""
        starts = self._starts
        i = bisect_right(starts, offset - 1)
        return starts[i] if i < len(starts) else None

    def between(self, lo: int, hi: int) -> list[QuarantinedRecord]:
        """Records that start in ``[lo, hi)``."""
        starts = self._starts
        return self._records[bisect_right(starts, lo - 1):bisect_right(starts, hi - 1)]
