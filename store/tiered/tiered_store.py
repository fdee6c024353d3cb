"""TieredStorage: wires the tiered CommitLog into a MessageStore (create before ``store.start()``).

::

    store root/tiered/manifest.json        what is remote (see manifest.py)
    <uri>/commitlog/<20-digit start>       one object per uploaded segment
    <uri>/consumequeue/<20-digit start>    its ConsumeQueue units (logics.py)
    <uri>/index/<20-digit begin>           IndexFiles wholly in the remote log
    <uri>/manifest.json                    a copy of the manifest, for operators

Created before the store starts, it hands the CommitLog its remote segments, the
ConsumeQueues their remote units and the IndexService its remote files (so recovery and
every read see the whole log) and keeps the store's own retention from deleting a
segment that is not uploaded yet.  ``start()``/``stop()`` run the uploader.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ..message_store import MessageStore
from .cache import BlockCache
from .config import TieredConfig
from .logics import Logics
from .manifest import Manifest
from .objects import open_store
from .remote_reader import RemoteIndex, RemoteLog, RemoteQueues
from .uploader import UploaderService

__all__ = ["TieredStorage"]


class TieredStorage:
    def __init__(self, store: MessageStore, config: TieredConfig) -> None:
        self.config, self._store = config, store
        self.objects = open_store(config.uri)
        self.manifest = Manifest(store.config.root / "tiered" / "manifest.json")
        self.cache = BlockCache(self.objects, config.cache_max_bytes)
        self.remote = RemoteLog(self.manifest, self.cache, config.readahead_blocks)
        store.commitlog.remote = self.remote
        self.remote_queues = RemoteQueues(self.manifest, self.cache, config.readahead_blocks)
        store.queues.remote = self.remote_queues
        store.index.remote = RemoteIndex(self.manifest, self.cache)
        store.limit_retention(self._uploaded_end)
        self._holds: list[Callable[[], int]] = []
        self.uploader = UploaderService(config, store.commitlog.queue, self.objects, self.manifest, self.cache,
                                        self._safe_end, self._after_expire, self._logics)
        self.logics = self.uploader.logics

    def _logics(self, uploader: UploaderService) -> Logics:
        return Logics(self._store.queues, self._store.index, self.manifest, uploader.put_verified,
                      self.config.block_bytes, self.remote_queues)

    def start(self) -> None:
        self.uploader.start()

    def stop(self) -> None:
        self.uploader.stop()
        self.cache.close()

    def hold_below(self, offset: Callable[[], int]) -> None:
        """Move no segment reaching past ``offset()`` (a reader of the local files, such as the mirror
        child process, has not read it yet)."""
        self._holds.append(offset)

    def run_once(self) -> int:
        """One upload/expiry round now (operations and tests); returns how many segments moved."""
        return self.uploader.run_once()

    def _safe_end(self) -> int:
        """Segments wholly below this are dispatched (ConsumeQueues and index built) and flushed."""
        commitlog = self._store.commitlog
        return min([self._store.reput.reput_offset, commitlog.queue.flushed_offset(), *(h() for h in self._holds)])

    def _uploaded_end(self) -> int:
        """The store's retention may delete local segments only below this: what the manifest lists."""
        end = self.manifest.end_offset()
        return end if end is not None else 0

    def _after_expire(self, low: int) -> None:
        self._store.queues.correct_min_offsets(low)
        self._store.index.delete_files_before(low)

    def stats(self) -> dict[str, object]:
        """Local vs remote bytes, upload lag and cache use, for /v1/broker and /metrics."""
        queue = self._store.commitlog.queue
        files = queue.files
        local = sum(f.wrote for f in files)
        now, due = time.time(), self.config.local_retention_s
        waiting = [f for f in files[:-1] if self.manifest.find(f.start_offset) is None
                   and now - f.path.stat().st_mtime >= due]  # past local_retention_s and still local
        lag_s = now - waiting[0].path.stat().st_mtime - due if waiting else 0.0
        up, cache = self.uploader.stats, self.cache.stats
        return {
            "uri": self.config.uri, "local_bytes": local, "remote_bytes": self.manifest.total_bytes(),
            "remote_segments": len(self.manifest.segments()), "local_segments": len(files),
            "upload_lag_bytes": sum(f.wrote for f in waiting), "upload_lag_s": round(max(0.0, lag_s), 3),
            "uploaded_segments": up.uploaded_segments, "uploaded_bytes": up.uploaded_bytes,
            "failed_uploads": up.failed_uploads, "expired_segments": up.expired_segments,
            "last_error": up.last_error, "cache_hits": cache.hits, "cache_misses": cache.misses,
            "cache_bytes": cache.cached_bytes, "remote_read_bytes": cache.fetched_bytes,
            "readahead_blocks": cache.prefetched_blocks, "remote_index_files": len(self.manifest.indexes()),
        }
