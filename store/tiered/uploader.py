"""The uploader: moves full, old CommitLog segments to the object store and expires remote ones.

One round (every ``interval_s``, and on demand through :meth:`UploaderService.run_once`)::

    for the oldest local segments that are full, dispatched, flushed, and older than
    local_retention_s (or while the local log is past local_max_bytes):
        read it in blocks: size, CRC32 of the whole and of each block
        PUT commitlog/<20-digit start>            (streamed, multipart when large)
        GET it back: same size and CRC32, else the round fails (retried next round)
        PUT consumequeue/<20-digit start>         its queues' units (logics.py), read back the same way
        manifest.add(...)                         (atomic; from now on the segment is remote)
        PUT manifest.json                         (a copy, for operators)
        take the segment out of the local log; its file is deleted on the next round
    PUT index/<name> for IndexFiles now wholly remote, read back, manifest.add_index(...)
    take ConsumeQueue files the remote ranges hold out of their queues; delete remote IndexFiles locally
    for remote segments older than retention_s (oldest first):
        manifest.remove(...), then DELETE its objects; ConsumeQueue minimums and index follow

A failure at any step leaves the local copy; a crash before ``manifest.add`` leaves an
object nobody reads, overwritten by the next attempt; a crash after it leaves a local
copy that the next round drops.
"""

from __future__ import annotations

import logging
import os
import time
import zlib
from collections.abc import Callable, Iterable, Iterator

import obstore

from ..mapped_file import MappedFile, segment_name
from ..mapped_file_queue import MappedFileQueue
from ..service_thread import ServiceThread
from .cache import BlockCache
from .config import TieredConfig
from .logics import Logics
from .manifest import Manifest, RemoteObject, RemoteSegmentInfo
from .objects import OBJECT_ERRORS, ObjectStore

__all__ = ["UploadStats", "UploaderService"]

_log = logging.getLogger(__name__)


class UploadStats:
    def __init__(self) -> None:
        self.uploaded_segments = 0
        self.uploaded_bytes = 0
        self.failed_uploads = 0
        self.expired_segments = 0
        self.last_error = ""


class UploaderService:
    def __init__(self, config: TieredConfig, queue: MappedFileQueue, store: ObjectStore, manifest: Manifest,
                 cache: BlockCache, safe_end: Callable[[], int], after_expire: Callable[[int], None],
                 logics: Callable[[UploaderService], Logics]) -> None:
        self.config, self.queue, self.store = config, queue, store
        self.manifest, self.cache = manifest, cache
        self.logics = logics(self)
        self.safe_end = safe_end  # only segments ending at or below this (dispatched and flushed) move
        self.after_expire = after_expire  # called with the log's new minimum after remote retention
        self.stats = UploadStats()
        self._doomed: list[MappedFile] = []
        self._worker = ServiceThread("sparkmq-tiered-upload", self._run)

    def start(self) -> None:
        self._worker.start()

    def stop(self) -> None:
        self._worker.stop()
        self._destroy_doomed()

    def _run(self) -> None:
        while not self._worker.wait(self.config.interval_s):
            self.run_once()

    def run_once(self, now: float | None = None) -> int:
        """One round; returns how many segments moved.  Errors are counted and retried next round."""
        self._destroy_doomed()
        now = time.time() if now is None else now
        moved = 0
        try:
            while (f := self._candidate(now)) is not None and not self._worker.stopping.is_set():
                self._move(f)
                moved += 1
            self.logics.upload_indexes()
            self._doomed += self.logics.drop_local()
            self._expire(now)
        except OBJECT_ERRORS as exc:  # the object store failed, or a read-back did not match (OSError)
            self.stats.failed_uploads += 1
            self.stats.last_error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            _log.warning("tiered storage round failed (local copies kept; retried in %.0f s): %s",
                         self.config.interval_s, self.stats.last_error)
        return moved

    def _candidate(self, now: float) -> MappedFile | None:
        files = self.queue.files
        if len(files) < 2:
            return None
        first = files[0]
        if first.end_offset > self.safe_end() or not first.is_full:
            return None
        if self.manifest.find(first.start_offset) is not None:  # uploaded before a crash: only the drop is left
            return first
        too_big = 0 < self.config.local_max_bytes < len(files) * self.queue.segment_size
        old = now - os.stat(first.path).st_mtime >= self.config.local_retention_s
        return first if too_big or old else None

    def _move(self, f: MappedFile) -> None:
        listed = self.manifest.find(f.start_offset)
        if listed is None or listed.start != f.start_offset or listed.size != f.size:
            self._upload(f)
        detached = self.queue.detach_first(f.start_offset)
        if detached is not None:
            self._doomed.append(detached)  # deleted next round: readers that found it finish first
            _log.info("tiered storage: segment %s is remote now; local copy dropped", f.path.name)

    def _upload(self, f: MappedFile) -> None:
        started, bb = time.monotonic(), self.config.block_bytes
        obj = self.put_verified(f"commitlog/{segment_name(f.start_offset)}",
                                (f.read(pos, min(bb, f.size - pos)) for pos in range(0, f.size, bb)), bb)
        queues, cq = self.logics.upload_ranges(f.start_offset, f.end_offset)
        info = RemoteSegmentInfo(start=f.start_offset, size=f.size, crc=obj.crc, block_bytes=bb,
                                 block_crcs=obj.block_crcs, newest_ms=int(os.stat(f.path).st_mtime * 1000),
                                 key=obj.key, queues=queues, cq=cq)
        self.manifest.add(info)
        self.stats.uploaded_segments += 1
        self.stats.uploaded_bytes += f.size
        _log.info("tiered storage: uploaded segment %s (%d bytes, CRC %#x) and %d ConsumeQueue ranges in %.2f s",
                  f.path.name, f.size, obj.crc, len(queues), time.monotonic() - started)
        self._publish_manifest()

    def put_verified(self, key: str, blocks: Iterable[bytes], block_bytes: int) -> RemoteObject:
        """PUT the blocks (each ``block_bytes`` but the last) as ``key``, read it back, compare size and CRC32."""
        crcs: list[int] = []
        whole, size = [0], [0]

        def counted() -> Iterator[bytes]:
            for block in blocks:
                crcs.append(zlib.crc32(block))
                whole[0] = zlib.crc32(block, whole[0])
                size[0] += len(block)
                yield block

        obstore.put(self.store, key, counted(), chunk_size=max(5 << 20, block_bytes))
        self._verify(key, size[0], whole[0])
        self.cache.forget(key)  # an object uploaded again (after a crash) is read afresh
        return RemoteObject(key=key, size=size[0], crc=whole[0], block_bytes=block_bytes, block_crcs=crcs)

    def _verify(self, key: str, size: int, crc: int) -> None:
        """Read the object back: it must have the size and CRC32 of the local bytes."""
        got, n = 0, 0
        for chunk in obstore.get(self.store, key).stream(min_chunk_size=8 << 20):
            got = zlib.crc32(chunk, got)
            n += len(chunk)
        if n != size or got != crc:
            raise OSError(f"object {key!r} read back as {n} bytes with CRC {got:#x}; the local copy has {size} bytes "
                          f"with CRC {crc:#x}; the local copy is kept and the upload retried")

    def _publish_manifest(self) -> None:
        try:
            obstore.put(self.store, "manifest.json", self.manifest.dumps())
        except OBJECT_ERRORS as exc:  # the local manifest is the truth; the copy is for operators
            _log.warning("tiered storage: could not copy the manifest to the object store: %s", exc)

    def _expire(self, now: float) -> None:
        if self.config.retention_s <= 0:
            return
        expired = False
        for seg in self.manifest.segments():
            if now * 1000 - seg.newest_ms < self.config.retention_s * 1000:
                break
            self.manifest.remove(seg.start)  # first: the manifest never names a missing object
            self.stats.expired_segments += 1
            expired = True
            self._delete([seg.key] + ([seg.cq.key] if seg.cq is not None else []))
            _log.info("tiered storage: remote segment %s expired (retention_s) and deleted", seg.key)
        if expired:
            low = self.manifest.min_offset()
            low = low if low is not None else self.queue.min_offset()
            self._delete(self.logics.expired(low))
            self.after_expire(low)
            self._publish_manifest()

    def _delete(self, keys: list[str]) -> None:
        for key in keys:
            self.cache.forget(key)
            try:
                obstore.delete(self.store, key)
            except FileNotFoundError:
                pass

    def _destroy_doomed(self) -> None:
        doomed, self._doomed = self._doomed, []
        for f in doomed:
            f.destroy()
