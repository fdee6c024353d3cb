"""A bounded cache of blocks read back from the object store, each checked against the manifest.

A remote object (a CommitLog segment, a ConsumeQueue range object, an IndexFile) is read
in blocks of its ``block_bytes`` (the last one shorter).  A block is fetched with a ranged
GET, its CRC32 compared with the one the manifest recorded at upload, and kept in memory
(least recently used leave first once ``max_bytes`` is passed).

Read-ahead: a read that asks for ``ahead`` blocks queues a background fetch of the
next ``ahead`` blocks of the object that are neither cached nor already on their way
(adjacent ranges go out as one ``get_ranges`` call), so a sequential reader such as a
Spark backfill finds the next blocks in memory, or in flight, when it gets there.  At
most ``max_inflight`` blocks are on their way at once; a reader that needs a block in
flight waits for that fetch instead of issuing its own.  A block that is missing or
fails its CRC raises RemoteReadError (a background fetch that fails is forgotten, and
the reader's own fetch reports it).
"""

from __future__ import annotations

import threading
import zlib
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol

import obstore

from ..errors import RemoteReadError
from .objects import OBJECT_ERRORS, ObjectStore

__all__ = ["BlockCache", "Blocks", "CacheStats"]

_Key = tuple[str, int]  # (object key, block index)


class Blocks(Protocol):
    """An object the manifest lists: RemoteObject, or RemoteSegmentInfo (a CommitLog segment)."""

    @property
    def key(self) -> str: ...
    @property
    def size(self) -> int: ...
    @property
    def block_bytes(self) -> int: ...
    @property
    def block_crcs(self) -> list[int]: ...


@dataclass(slots=True)
class CacheStats:
    hits: int = 0
    misses: int = 0
    fetched_bytes: int = 0
    cached_bytes: int = 0
    prefetched_blocks: int = 0


class BlockCache:
    def __init__(self, store: ObjectStore, max_bytes: int, max_inflight: int = 16, workers: int = 4) -> None:
        self.store, self.max_bytes, self.max_inflight = store, max_bytes, max_inflight
        self.stats = CacheStats()
        self._blocks: OrderedDict[_Key, bytes] = OrderedDict()
        self._inflight: dict[_Key, Future[bytes]] = {}
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="sparkmq-tiered-read")

    def close(self) -> None:
        """Stop the read-ahead threads (fetches under way finish first); safe twice."""
        self._pool.shutdown(wait=True, cancel_futures=True)

    def read(self, obj: Blocks, pos: int, size: int, ahead: int = 0) -> bytes:
        """``size`` bytes at ``pos`` of ``obj`` (clamped to its end); then read ``ahead`` blocks ahead."""
        size = max(0, min(size, obj.size - pos))
        if size == 0:
            return b""
        bb = obj.block_bytes
        first, last = pos // bb, (pos + size - 1) // bb
        parts = [self._block(obj, i) for i in range(first, last + 1)]
        if ahead:
            self._read_ahead(obj, last + 1, min(len(obj.block_crcs), last + 1 + ahead))
        data = parts[0] if len(parts) == 1 else b"".join(parts)
        off = pos - first * bb
        return data[off : off + size]

    def _block(self, obj: Blocks, index: int) -> bytes:
        key = (obj.key, index)
        with self._lock:
            found = self._blocks.get(key)
            if found is not None:
                self._blocks.move_to_end(key)
                self.stats.hits += 1
                return found
            pending = self._inflight.get(key)
            if pending is None:
                self.stats.misses += 1
            else:
                self.stats.hits += 1  # read ahead: on its way already
        if pending is not None:
            try:
                return pending.result()
            except RemoteReadError:
                pass  # fetched again below: the error names this reader's block
        data = self._fetch(obj, [index])[0]
        with self._lock:
            self._put(key, data)
        return data

    def _read_ahead(self, obj: Blocks, lo: int, hi: int) -> None:
        with self._lock:
            room = self.max_inflight - len(self._inflight)
            wanted = [i for i in range(lo, hi) if (obj.key, i) not in self._blocks
                      and (obj.key, i) not in self._inflight][: max(0, room)]
            if not wanted:
                return
            try:
                batch: Future[list[bytes]] = self._pool.submit(self._fetch_ahead, obj, wanted)
            except RuntimeError:  # closed: no read-ahead any more
                return
            for n, i in enumerate(wanted):
                self._inflight[(obj.key, i)] = _nth(batch, n)

    def _fetch_ahead(self, obj: Blocks, indexes: list[int]) -> list[bytes]:
        try:
            got = self._fetch(obj, indexes)
            with self._lock:
                for i, data in zip(indexes, got):
                    self._put((obj.key, i), data)
                self.stats.prefetched_blocks += len(indexes)
            return got
        finally:
            with self._lock:
                for i in indexes:
                    self._inflight.pop((obj.key, i), None)

    def _fetch(self, obj: Blocks, indexes: list[int]) -> list[bytes]:
        bb = obj.block_bytes
        starts = [i * bb for i in indexes]
        lengths = [min(bb, obj.size - s) for s in starts]
        try:
            got = obstore.get_ranges(self.store, obj.key, starts=starts, lengths=lengths)
        except OBJECT_ERRORS as exc:
            raise RemoteReadError(f"object {obj.key!r} could not be read from the object store: "
                                  f"{str(exc).splitlines()[0]}") from exc
        out = [bytes(b) for b in got]
        for i, data, want in zip(indexes, out, lengths):
            if len(data) != want or zlib.crc32(data) != obj.block_crcs[i]:
                raise RemoteReadError(f"block {i} of object {obj.key!r} in the object store is damaged: {len(data)} "
                                      f"bytes, CRC {zlib.crc32(data):#x}; the manifest recorded {want} bytes, "
                                      f"CRC {obj.block_crcs[i]:#x}")
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

    def forget(self, key: str) -> None:
        """Drop the cached blocks of the object ``key`` (deleted by retention, or replaced)."""
        with self._lock:
            for k in [k for k in self._blocks if k[0] == key]:
                self.stats.cached_bytes -= len(self._blocks.pop(k))


def _nth(batch: Future[list[bytes]], n: int) -> Future[bytes]:
    """A future for the ``n``-th block of a read-ahead batch."""
    one: Future[bytes] = Future()

    def done(f: Future[list[bytes]]) -> None:
        if f.cancelled():
            one.set_exception(RemoteReadError("read-ahead cancelled"))
        elif (exc := f.exception()) is not None:
            one.set_exception(exc)
        else:
            one.set_result(f.result()[n])

    batch.add_done_callback(done)
    return one
