"""A bounded cache of blocks read back from the object store, each checked against the manifest.

A remote segment is read in blocks of ``block_bytes`` (the last one shorter).  A block
is fetched with one ranged GET, its CRC32 compared with the one the manifest recorded at
upload, and kept in memory (least recently used leave first once ``max_bytes`` is
passed).  A miss also fetches the next ``readahead`` blocks of the segment in the same
call (obstore runs the ranges concurrently), so a sequential reader pays one round trip
per few blocks.  A block that is missing or fails its CRC raises RemoteReadError.
"""

from __future__ import annotations

import threading
import zlib
from collections import OrderedDict
from dataclasses import dataclass

import obstore

from ..errors import RemoteReadError
from .manifest import RemoteSegmentInfo
from .objects import OBJECT_ERRORS, ObjectStore

__all__ = ["BlockCache", "CacheStats"]

_Key = tuple[int, int]  # (segment start, block index)


@dataclass(slots=True)
class CacheStats:
    hits: int = 0
    misses: int = 0
    fetched_bytes: int = 0
    cached_bytes: int = 0


class BlockCache:
    def __init__(self, store: ObjectStore, max_bytes: int, readahead: int = 4) -> None:
        self.store, self.max_bytes, self.readahead = store, max_bytes, readahead
        self.stats = CacheStats()
        self._blocks: OrderedDict[_Key, bytes] = OrderedDict()
        self._lock = threading.Lock()

    def read(self, seg: RemoteSegmentInfo, pos: int, size: int) -> bytes:
        """``size`` bytes at ``pos`` of the remote segment ``seg`` (clamped to its end)."""
        size = max(0, min(size, seg.size - pos))
        if size == 0:
            return b""
        bb = seg.block_bytes
        first, last = pos // bb, (pos + size - 1) // bb
        parts = [self._block(seg, i) for i in range(first, last + 1)]
        data = parts[0] if len(parts) == 1 else b"".join(parts)
        off = pos - first * bb
        return data[off : off + size]

    def _block(self, seg: RemoteSegmentInfo, index: int) -> bytes:
        key = (seg.start, index)
        with self._lock:
            found = self._blocks.get(key)
            if found is not None:
                self._blocks.move_to_end(key)
                self.stats.hits += 1
                return found
            self.stats.misses += 1
        nblocks = len(seg.block_crcs)
        wanted = [i for i in range(index, min(nblocks, index + 1 + self.readahead))
                  if i == index or (seg.start, i) not in self._blocks]
        fetched = self._fetch(seg, wanted)
        with self._lock:
            for i, data in zip(wanted, fetched):
                self._put((seg.start, i), data)
        return fetched[0]

    def _fetch(self, seg: RemoteSegmentInfo, indexes: list[int]) -> list[bytes]:
        bb = seg.block_bytes
        starts = [i * bb for i in indexes]
        lengths = [min(bb, seg.size - s) for s in starts]
        try:
            got = obstore.get_ranges(self.store, seg.key, starts=starts, lengths=lengths)
        except OBJECT_ERRORS as exc:
            raise RemoteReadError(f"CommitLog segment {seg.start} could not be read from the object store "
                                  f"(object {seg.key!r}): {str(exc).splitlines()[0]}") from exc
        out = [bytes(b) for b in got]
        for i, data, want in zip(indexes, out, lengths):
            if len(data) != want or zlib.crc32(data) != seg.block_crcs[i]:
                raise RemoteReadError(f"block {i} of CommitLog segment {seg.start} in the object store (object "
                                      f"{seg.key!r}) is damaged: {len(data)} bytes, CRC {zlib.crc32(data):#x}; the "
                                      f"manifest recorded {want} bytes, CRC {seg.block_crcs[i]:#x}")
        with self._lock:
            self.stats.fetched_bytes += sum(lengths)
        return out

    def _put(self, key: _Key, data: bytes) -> None:
        old = self._blocks.pop(key, None)
        if old is not None:
            self.stats.cached_bytes -= len(old)
        self._blocks[key] = data
        self.stats.cached_bytes += len(data)
        while self.stats.cached_bytes > self.max_bytes and len(self._blocks) > 1:
            _, gone = self._blocks.popitem(last=False)
            self.stats.cached_bytes -= len(gone)

    def forget(self, start: int) -> None:
        """Drop the cached blocks of the segment starting at ``start`` (deleted by retention)."""
        with self._lock:
            for key in [k for k in self._blocks if k[0] == start]:
                self.stats.cached_bytes -= len(self._blocks.pop(key))
