"""A bounded cache of blocks read back from the object store, each checked against the manifest.

A remote object (a CommitLog segment, a ConsumeQueue range object, an IndexFile) is read
in blocks of its ``block_bytes`` (the last one shorter).  A block is fetched with a ranged
GET, its CRC32 compared with the one the manifest recorded at upload, and kept in memory
(least recently used leave first once ``max_bytes`` is passed).

Blocks a read needs that are neither cached nor on their way are fetched in one
``get_ranges`` call (obstore turns adjacent ranges into one GET), and a reader that
needs a block another reader is fetching waits for that fetch instead of issuing its own.

Read-ahead: a sequential read (it starts near the previous read of the same object, at most
a block past its end or ``ahead`` blocks before it, but not where it started: a lookup that
reads a header, then the record at the same place, is not one) also fetches, in the background, the next ``ahead``
blocks of the object once at least half of them are missing, so each GET is large (an
S3 GET costs a round trip; moto's even reads the whole object) and a backfill such as
a Spark read finds the next blocks in memory, or on their way, when it gets there.  At
most ``max_inflight`` blocks are on their way at once.  A block that is missing or
fails its CRC raises RemoteReadError, in every reader that waited for it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

import obstore

from ..crc import crc32
from ..errors import RemoteReadError
from .objects import OBJECT_ERRORS, ObjectStore

__all__ = ["BlockCache", "Blocks", "CacheStats"]

_Key = tuple[str, int]  # (object key, block index)
Block = Any  # a block as obstore returns it (obstore.Bytes: a buffer, not copied)


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
    def __init__(self, store: ObjectStore, max_bytes: int, max_inflight: int = 128, workers: int = 4) -> None:
        self.store, self.max_bytes, self.max_inflight = store, max_bytes, max_inflight
        self.stats = CacheStats()
        self._blocks: OrderedDict[_Key, Block] = OrderedDict()
        self._inflight: dict[_Key, Future[Block]] = {}
        self._last_read: dict[str, tuple[int, int]] = {}  # object key -> (start, end) of the last read of it
        self._sequential: set[str] = set()  # objects whose last read was sequential
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="sparkmq-tiered-read")

    def close(self) -> None:
        """Stop the read-ahead threads (fetches under way finish first); safe twice."""
        self._pool.shutdown(wait=True, cancel_futures=True)

    def read(self, obj: Blocks, pos: int, size: int, ahead: int = 0) -> bytes:
        """``size`` bytes at ``pos`` of ``obj`` (clamped to its end).  A sequential read (see the module
        docstring) also starts reading ``ahead`` blocks on."""
        return bytes(self.view(obj, pos, size, ahead))

    def view(self, obj: Blocks, pos: int, size: int, ahead: int = 0) -> memoryview:
        """As :meth:`read`, without copying when the bytes lie in one block."""
        size = max(0, min(size, obj.size - pos))
        if size == 0:
            return memoryview(b"")
        bb = obj.block_bytes
        first, last = pos // bb, (pos + size - 1) // bb
        mine: dict[int, Future[Block]] = {}
        with self._lock:
            got = [self._claim(obj, i, mine) for i in range(first, last + 1)]
            prev_start, prev_end = self._last_read.get(obj.key, (pos, pos))
            # a scan (readers of several queues interleave, a little behind or ahead of each other), not a
            # lookup (a first read, or a header read and then the record at the same place)
            sequential = pos != prev_start and prev_start - ahead * bb <= pos <= prev_end + bb
            self._note_last(obj.key, pos, pos + size, sequential)
            if ahead and sequential:
                self._read_ahead(obj, last + 1, min(len(obj.block_crcs), last + 1 + ahead), ahead)
        if mine:
            self._run(obj, mine)
        parts = [g.result() if isinstance(g, Future) else g for g in got]
        data = parts[0] if len(parts) == 1 else b"".join(parts)
        off = pos - first * bb
        return memoryview(data)[off : off + size]

    def prefetch(self, obj: Blocks, lo: int, hi: int) -> None:
        """Start fetching blocks ``[lo, hi)`` of ``obj`` in the background (the next segment of a sequential
        reader nearing the end of this one), under the same rules as read-ahead."""
        with self._lock:
            self._read_ahead(obj, lo, min(hi, len(obj.block_crcs)), hi - lo)

    def _claim(self, obj: Blocks, index: int, mine: dict[int, Future[Block]]) -> Block | Future[Block]:
        """The block if cached, the fetch it is in, or a new fetch added to ``mine`` (caller holds the lock)."""
        key = (obj.key, index)
        found = self._blocks.get(key)
        if found is not None:
            self._blocks.move_to_end(key)
            self.stats.hits += 1
            return found
        pending = self._inflight.get(key)
        if pending is not None:
            self.stats.hits += 1  # read ahead: on its way already
            return pending
        self.stats.misses += 1
        mine[index] = self._inflight[key] = Future()
        return mine[index]

    def _note_last(self, key: str, start: int, end: int, sequential: bool) -> None:
        if len(self._last_read) > 4096:
            self._last_read.clear()
            self._sequential.clear()
        self._last_read[key] = (start, end)
        (self._sequential.add if sequential else self._sequential.discard)(key)

    def sequential(self, key: str) -> bool:
        """Whether the last read of the object ``key`` followed the one before (a scan, not a lookup)."""
        return key in self._sequential

    def _read_ahead(self, obj: Blocks, lo: int, hi: int, ahead: int) -> None:
        """Fetch the missing blocks of ``[lo, hi)`` in the background once they are at least half the window
        (so each GET is large), or reach the object's end (caller holds the lock)."""
        wanted = [i for i in range(lo, hi) if (obj.key, i) not in self._blocks and (obj.key, i) not in self._inflight]
        wanted = wanted[: max(0, self.max_inflight - len(self._inflight))]
        if not wanted or (len(wanted) < max(1, ahead // 2) and wanted[-1] != len(obj.block_crcs) - 1):
            return
        batch: dict[int, Future[Block]] = {}
        for i in wanted:
            batch[i] = self._inflight[(obj.key, i)] = Future()
        try:
            self._pool.submit(self._run, obj, batch, True)
        except RuntimeError:  # closed: no read-ahead any more
            for i, fut in batch.items():
                del self._inflight[(obj.key, i)]
                fut.set_exception(RemoteReadError("the tiered-storage cache is closed"))

    def _run(self, obj: Blocks, batch: dict[int, Future[Block]], ahead: bool = False) -> None:
        """Fetch the blocks of ``batch`` in one call, cache the good ones and resolve every future: a block that
        is missing or damaged fails only the readers of that block."""
        indexes = sorted(batch)
        try:
            got: list[Block | RemoteReadError] = self._fetch(obj, indexes)
        except Exception as exc:  # noqa: BLE001  (every waiting reader must hear of it)
            err = exc if isinstance(exc, RemoteReadError) else RemoteReadError(
                f"object {obj.key!r} could not be read: {type(exc).__name__}: {exc}")
            got = [err] * len(indexes)
        with self._lock:
            for i, data in zip(indexes, got):
                if not isinstance(data, RemoteReadError):
                    self._put((obj.key, i), data)
                self._inflight.pop((obj.key, i), None)
            if ahead:
                self.stats.prefetched_blocks += len(indexes)
        for i, data in zip(indexes, got):
            if isinstance(data, RemoteReadError):
                batch[i].set_exception(data)
            else:
                batch[i].set_result(data)

    def _fetch(self, obj: Blocks, indexes: list[int]) -> list[Block | RemoteReadError]:
        """The blocks, each checked against its CRC32 (a damaged one is its RemoteReadError)."""
        bb = obj.block_bytes
        starts = [i * bb for i in indexes]
        lengths = [min(bb, obj.size - s) for s in starts]
        try:
            got = obstore.get_ranges(self.store, obj.key, starts=starts, lengths=lengths)
        except OBJECT_ERRORS as exc:
            raise RemoteReadError(f"object {obj.key!r} could not be read from the object store: "
                                  f"{str(exc).splitlines()[0]}") from exc
        out: list[Block | RemoteReadError] = list(got)  # obstore.Bytes: buffers, not copied
        for n, (i, data, want) in enumerate(zip(indexes, got, lengths)):
            if len(data) != want or crc32(data) != obj.block_crcs[i]:
                out[n] = RemoteReadError(f"block {i} of object {obj.key!r} in the object store is damaged: "
                                         f"{len(data)} bytes, CRC {crc32(data):#x}; the manifest recorded {want} "
                                         f"bytes, CRC {obj.block_crcs[i]:#x}")
        with self._lock:
            self.stats.fetched_bytes += sum(lengths)
        return out

    def _put(self, key: _Key, data: Block) -> None:
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
