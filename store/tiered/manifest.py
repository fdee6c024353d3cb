"""The manifest: the only truth about which CommitLog segments live in the object store.

A JSON file ``<store root>/tiered/manifest.json``, replaced atomically (temp file,
fsync, rename, fsync the directory) after every change::

    {"version": 1,
     "segments": [{"start": 0, "size": 1073741824, "crc": 123, "block_bytes": 1048576,
                   "block_crcs": [..], "newest_ms": 1700000000000, "key": "commitlog/000..0",
                   "queues": [["orders", 0, 1200, 5000], ...],      # topic, queue id, first unit, units
                   "cq": {"key": "consumequeue/000..0", "size": .., "crc": .., "block_bytes": ..,
                          "block_crcs": [..]}}, ...],
     "indexes": [{"begin_phy": 0, "end_phy": .., "begin_ts": .., "end_ts": .., "slots": ..,
                  "count": .., "obj": {"key": "index/000..0", ...}}, ...]}

Next to each CommitLog segment, ``cq`` is one object holding, for every queue with
messages in the segment, its ConsumeQueue units that point into it (``queues`` in that
order, 20 bytes a unit); ``indexes`` are whole IndexFiles whose range lies in the
remote part of the log.  Every object is listed only once it was uploaded and read back
with the same size and CRC32; it is removed from the list *before* it is deleted.  An
object that is not listed (a crash mid-upload) is never read and is overwritten by
the next upload.  Manifests written before ``queues``/``indexes`` existed still load.
"""

from __future__ import annotations

import json
import threading
from bisect import bisect_right
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..checkpoint import atomic_write
from ..errors import StoreError

__all__ = ["Manifest", "QueueRange", "RemoteIndexInfo", "RemoteObject", "RemoteSegmentInfo"]

_VERSION = 1
_UNIT = 20  # bytes of a ConsumeQueue unit


@dataclass(frozen=True, slots=True)
class RemoteObject:
    """One uploaded object read back in blocks: its key, size and CRC32s (whole and per block)."""

    key: str
    size: int
    crc: int
    block_bytes: int
    block_crcs: list[int]


@dataclass(frozen=True, slots=True)
class RemoteSegmentInfo:
    """One uploaded segment: its log range, its checks, its object key and its ConsumeQueue ranges."""

    start: int
    size: int
    crc: int
    block_bytes: int
    block_crcs: list[int]
    newest_ms: int
    key: str
    queues: list[list[Any]] = field(default_factory=list)  # [topic, queue id, first unit, units] in cq order
    cq: RemoteObject | None = None

    @property
    def end(self) -> int:
        return self.start + self.size

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> RemoteSegmentInfo:
        cq = doc.pop("cq", None)
        return cls(**doc, cq=RemoteObject(**cq) if cq else None)


@dataclass(frozen=True, slots=True)
class RemoteIndexInfo:
    """One uploaded IndexFile: the header fields a query needs, and its object."""

    begin_phy: int
    end_phy: int
    begin_ts: int
    end_ts: int
    slots: int
    count: int
    obj: RemoteObject

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> RemoteIndexInfo:
        return cls(**{**doc, "obj": RemoteObject(**doc["obj"])})


@dataclass(frozen=True, slots=True)
class QueueRange:
    """Units ``first`` up to ``end`` of one queue, at byte ``pos`` of the ConsumeQueue object ``obj``."""

    first: int
    end: int
    pos: int
    obj: RemoteObject


class Manifest:
    """Uploaded segments and index files in log order; thread-safe; every change is on disk before it returns."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._segments: list[RemoteSegmentInfo] = []
        self._indexes: list[RemoteIndexInfo] = []
        self._queues: dict[tuple[str, int], list[QueueRange]] = {}
        self._publish(*self._load())

    def _load(self) -> tuple[list[RemoteSegmentInfo], list[RemoteIndexInfo]]:
        if not self.path.exists():
            return [], []
        try:
            doc = json.loads(self.path.read_bytes())
            if doc.get("version") != _VERSION:
                raise ValueError(f"version {doc.get('version')!r}, expected {_VERSION}")
            segs = sorted((RemoteSegmentInfo.from_dict(s) for s in doc["segments"]), key=lambda s: s.start)
            indexes = sorted((RemoteIndexInfo.from_dict(i) for i in doc.get("indexes", [])),
                             key=lambda i: i.begin_phy)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise StoreError(f"the tiered-storage manifest {self.path} is unreadable ({exc}); restore it from the "
                             f"copy in the object store (manifest.json) or move it aside") from exc
        return segs, indexes

    def segments(self) -> list[RemoteSegmentInfo]:
        return list(self._segments)

    def indexes(self) -> list[RemoteIndexInfo]:
        return list(self._indexes)

    def find(self, offset: int) -> RemoteSegmentInfo | None:
        """The remote segment holding ``offset``, or None."""
        segs = self._segments
        i = bisect_right(segs, offset, key=lambda s: s.start) - 1
        return segs[i] if i >= 0 and segs[i].start <= offset < segs[i].end else None

    def min_offset(self) -> int | None:
        segs = self._segments
        return segs[0].start if segs else None

    def end_offset(self) -> int | None:
        segs = self._segments
        return segs[-1].end if segs else None

    def total_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    # -- ConsumeQueue ranges ---------------------------------------------
    def queue_ranges(self, topic: str, queue_id: int) -> list[QueueRange]:
        """The remote ConsumeQueue ranges of one queue, in offset order (contiguous)."""
        return self._queues.get((topic, queue_id), [])

    def queue_range(self, topic: str, queue_id: int, offset: int) -> QueueRange | None:
        """The remote range holding unit ``offset`` of the queue, or None."""
        ranges = self._queues.get((topic, queue_id), [])
        i = bisect_right(ranges, offset, key=lambda r: r.first) - 1
        return ranges[i] if i >= 0 and ranges[i].first <= offset < ranges[i].end else None

    # -- changes ---------------------------------------------------------
    def add(self, info: RemoteSegmentInfo) -> None:
        with self._lock:
            segs = [s for s in self._segments if s.start != info.start] + [info]
            self._save(sorted(segs, key=lambda s: s.start), self._indexes)

    def add_index(self, info: RemoteIndexInfo) -> None:
        with self._lock:
            indexes = [i for i in self._indexes if i.begin_phy != info.begin_phy] + [info]
            self._save(self._segments, sorted(indexes, key=lambda i: i.begin_phy))

    def remove(self, start: int) -> None:
        with self._lock:
            self._save([s for s in self._segments if s.start != start], self._indexes)

    def remove_index(self, begin_phy: int) -> None:
        with self._lock:
            self._save(self._segments, [i for i in self._indexes if i.begin_phy != begin_phy])

    def dumps(self) -> bytes:
        return self._doc(self._segments, self._indexes)

    @staticmethod
    def _doc(segs: list[RemoteSegmentInfo], indexes: list[RemoteIndexInfo]) -> bytes:
        return json.dumps({"version": _VERSION, "segments": [asdict(s) for s in segs],
                           "indexes": [asdict(i) for i in indexes]}).encode()

    def _save(self, segs: list[RemoteSegmentInfo], indexes: list[RemoteIndexInfo]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, self._doc(segs, indexes))
        self._publish(segs, indexes)

    def _publish(self, segs: list[RemoteSegmentInfo], indexes: list[RemoteIndexInfo]) -> None:
        """Swap in the new lists and the per-queue ranges built from them (readers never lock)."""
        queues: dict[tuple[str, int], list[QueueRange]] = {}
        for seg in segs:
            pos = 0
            for topic, qid, first, count in seg.queues:
                if seg.cq is not None:
                    queues.setdefault((topic, qid), []).append(QueueRange(first, first + count, pos, seg.cq))
                pos += count * _UNIT
        self._queues, self._segments, self._indexes = queues, segs, indexes
