"""Reads of CommitLog offsets, ConsumeQueue units and index entries no longer on the local disk.

The CommitLog asks :meth:`RemoteLog.find` for the segment holding an offset when no
local segment does; the answer reads like a local ``MappedFile`` (``start_offset``,
``wrote``, ``read``, ``view``), so pulls, lookups by id, key or time, the dispatcher
and a slave catching up all read remote bytes through the same code, from the bounded
:class:`~store.tiered.cache.BlockCache`.  A ConsumeQueue asks :class:`RemoteQueues` for
units below its local files, and the IndexService asks :class:`RemoteIndex` to walk the
hash chains of IndexFiles that are only remote (the layout of ``store/index_file.py``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from ..index_file import ENTRY, HEADER, SLOT
from .cache import BlockCache
from .manifest import Manifest, RemoteIndexInfo, RemoteSegmentInfo

__all__ = ["RemoteIndex", "RemoteLog", "RemoteQueues", "RemoteSegment"]

_UNIT = 20
_INT32_MAX = (1 << 31) - 1


class RemoteSegment:
    """One uploaded segment, read through the cache (never written)."""

    __slots__ = ("_ahead", "_cache", "_log", "info")

    def __init__(self, info: RemoteSegmentInfo, log: RemoteLog) -> None:
        self.info, self._log, self._cache, self._ahead = info, log, log.cache, log.ahead

    @property
    def start_offset(self) -> int:
        return self.info.start

    @property
    def size(self) -> int:
        return self.info.size

    @property
    def wrote(self) -> int:
        return self.info.size  # only full segments are uploaded

    @property
    def end_offset(self) -> int:
        return self.info.end

    def read(self, pos: int, size: int) -> bytes:
        """``size`` bytes at ``pos``; RemoteReadError when they cannot be read back intact."""
        with self.view(pos, size) as mv:
            return bytes(mv)

    @contextlib.contextmanager
    def view(self, pos: int, size: int) -> Iterator[memoryview]:
        mv = self._cache.view(self.info, pos, size, self._ahead)
        near_end = pos + size > self.info.size - self._ahead // 2 * self.info.block_bytes
        if self._ahead and near_end and self._cache.sequential(self.info.key):
            self._log.prefetch_after(self.info)  # a sequential reader nears the end: the next segment
        yield mv


class RemoteLog:
    """The remote part of the CommitLog, as the manifest lists it."""

    def __init__(self, manifest: Manifest, cache: BlockCache, ahead: int) -> None:
        self.manifest, self.cache, self.ahead = manifest, cache, ahead

    def find(self, offset: int) -> RemoteSegment | None:
        info = self.manifest.find(offset)
        return RemoteSegment(info, self) if info is not None else None

    def prefetch_after(self, info: RemoteSegmentInfo) -> None:
        """Start reading the first blocks of the segment after ``info`` (if it is remote)."""
        nxt = self.manifest.find(info.end)
        if nxt is not None:
            self.cache.prefetch(nxt, 0, self.ahead)

    def min_offset(self) -> int | None:
        """Start of the oldest remote segment, None when nothing is remote."""
        return self.manifest.min_offset()


class RemoteQueues:
    """ConsumeQueue units of remote segments, as the manifest lists them (``store.consume_queue.RemoteUnits``)."""

    def __init__(self, manifest: Manifest, cache: BlockCache, ahead: int) -> None:
        self.manifest, self.cache, self.ahead = manifest, cache, ahead

    def low(self, topic: str, queue_id: int) -> int | None:
        """First unit of the queue the object store holds, None when none."""
        ranges = self.manifest.queue_ranges(topic, queue_id)
        return ranges[0].first if ranges else None

    def high(self, topic: str, queue_id: int) -> int | None:
        """One past the last unit of the queue the object store holds, None when none."""
        ranges = self.manifest.queue_ranges(topic, queue_id)
        return ranges[-1].end if ranges else None

    def read(self, topic: str, queue_id: int, offset: int, count: int) -> bytes:
        """Up to ``count`` units from ``offset``, stopping at the end of a range (b"" when none holds it)."""
        found = self.manifest.queue_range(topic, queue_id, offset)
        if found is None:
            return b""
        n = min(count, found.end - offset)
        return self.cache.read(found.obj, found.pos + (offset - found.first) * _UNIT, n * _UNIT, self.ahead)


class RemoteIndex:
    """Key lookups in IndexFiles that only the object store holds (``store.index_service.RemoteKeys``)."""

    def __init__(self, manifest: Manifest, cache: BlockCache) -> None:
        self.manifest, self.cache = manifest, cache

    def query(self, key_hash: int, begin_ms: int, end_ms: int, max_count: int, seen: set[int],
              skip: set[int]) -> list[int]:
        """Physical offsets under ``key_hash`` in the time range, newest first, from the remote IndexFiles
        whose begin offset is not in ``skip`` (those were read locally); ``seen`` as in IndexFile.query."""
        out: list[int] = []
        for info in reversed(self.manifest.indexes()):
            if len(out) >= max_count:
                break
            if info.begin_phy in skip or info.end_ts < begin_ms - 999 or info.begin_ts > end_ms:
                continue
            out += self._walk(info, key_hash & _INT32_MAX, begin_ms, end_ms, max_count - len(out), seen)
        return out

    def _walk(self, info: RemoteIndexInfo, key_hash: int, begin_ms: int, end_ms: int, max_count: int,
              seen: set[int]) -> list[int]:
        low = -((info.begin_ts - begin_ms + 999) // 1000)  # time_diff window, as IndexFile.query
        high = (end_ms - info.begin_ts) // 1000
        entries_at = HEADER.size + info.slots * SLOT.size
        index = SLOT.unpack(self.cache.read(info.obj, HEADER.size + (key_hash % info.slots) * SLOT.size, 4))[0]
        out: list[int] = []
        while 0 < index < info.count and len(out) < max_count:
            entry_hash, phy, diff, prev = ENTRY.unpack(self.cache.read(info.obj, entries_at + index * ENTRY.size,
                                                                       ENTRY.size))
            if entry_hash == key_hash and low <= diff <= high and phy not in seen:
                seen.add(phy)
                out.append(phy)
            if prev >= index:
                break  # links only go back
            index = prev
        return out
