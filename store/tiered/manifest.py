"""The manifest: the only truth about which CommitLog segments live in the object store.

A JSON file ``<store root>/tiered/manifest.json``, replaced atomically (temp file,
fsync, rename, fsync the directory) after every change::

    {"version": 1,
     "segments": [{"start": 0, "size": 1073741824, "crc": 123, "block_bytes": 1048576,
                   "block_crcs": [..], "newest_ms": 1700000000000, "key": "commitlog/000..0"}, ...]}

A segment is listed only once its object was uploaded and read back with the same
size and CRC32; it is removed from the list *before* its object is deleted.  An
object that is not listed (a crash mid-upload) is never read and is overwritten by
the next upload of that segment.
"""

from __future__ import annotations

import json
from bisect import bisect_right
import threading
from dataclasses import asdict, dataclass
from pathlib import Path

from ..checkpoint import atomic_write
from ..errors import StoreError

__all__ = ["Manifest", "RemoteSegmentInfo"]

_VERSION = 1


@dataclass(frozen=True, slots=True)
class RemoteSegmentInfo:
    """One uploaded segment: its log range, its checks and its object key."""

    start: int
    size: int
    crc: int
    block_bytes: int
    block_crcs: list[int]
    newest_ms: int
    key: str

    @property
    def end(self) -> int:
        return self.start + self.size


class Manifest:
    """Uploaded segments in log order; thread-safe; every change is on disk before it returns."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._segments: list[RemoteSegmentInfo] = self._load()

    def _load(self) -> list[RemoteSegmentInfo]:
        if not self.path.exists():
            return []
        try:
            doc = json.loads(self.path.read_bytes())
            if doc.get("version") != _VERSION:
                raise ValueError(f"version {doc.get('version')!r}, expected {_VERSION}")
            segs = sorted((RemoteSegmentInfo(**s) for s in doc["segments"]), key=lambda s: s.start)
        except (ValueError, KeyError, TypeError) as exc:
            raise StoreError(f"the tiered-storage manifest {self.path} is unreadable ({exc}); restore it from the "
                             f"copy in the object store (manifest.json) or move it aside") from exc
        return segs

    def segments(self) -> list[RemoteSegmentInfo]:
        return list(self._segments)

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

    def add(self, info: RemoteSegmentInfo) -> None:
        with self._lock:
            segs = [s for s in self._segments if s.start != info.start] + [info]
            self._save(sorted(segs, key=lambda s: s.start))

    def remove(self, start: int) -> None:
        with self._lock:
            self._save([s for s in self._segments if s.start != start])

    def dumps(self) -> bytes:
        return json.dumps({"version": _VERSION, "segments": [asdict(s) for s in self._segments]}).encode()

    def _save(self, segs: list[RemoteSegmentInfo]) -> None:
        doc = {"version": _VERSION, "segments": [asdict(s) for s in segs]}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, json.dumps(doc).encode())
        self._segments = segs
