"""IndexService: the key index dispatcher over a directory of IndexFiles.

Every record that carries keys is indexed once per key under the hash of
``"{topic}#{key}"`` (CRC32 of the UTF-8 bytes, top bit cleared: stable across
processes).  Transaction half messages (PREPARED) and ROLLBACK records are
not indexed.

Files live in one directory and are named by their begin physical offset,
zero-padded to 20 digits (``00000000000012345678``), so name order is
CommitLog order.  When the newest file is full the service rolls to a new one
starting at the first record that did not fit.  A file that fails to open is
renamed aside to ``<name>.corrupt`` and the service carries on without it (the
store's recovery re-dispatches from :meth:`IndexService.max_phy_offset`).

Threads: :meth:`dispatch` runs on the reput thread; :meth:`query` may run on
many threads at once.  Writers take the service lock; readers take a
snapshot of the (copy-on-write) file list and each file's own lock.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from itertools import chain, repeat
from operator import itemgetter
from pathlib import Path
from typing import Protocol

import numpy as np

from .consume_queue_store import is_visible
from .crc import crc32
from .dispatch import DispatchBatch
from .errors import CorruptRecordError, StoreClosedError
from .index_file import IndexFile

__all__ = ["IndexService", "RemoteKeys", "key_hash"]

_log = logging.getLogger(__name__)
_HASH_MASK = 0x7FFFFFFF
_NAME_DIGITS = 20
_TOPIC_CACHE_LIMIT = 100_000


def key_hash(topic: str, key: str) -> int:
    """Stable non-negative 31-bit hash of an index key."""
    return crc32(f"{topic}#{key}".encode("utf-8", "surrogatepass")) & _HASH_MASK


class RemoteKeys(Protocol):
    """IndexFiles of tiered CommitLog segments (``store.tiered.RemoteIndex``): ``skip`` names (by begin offset)
    the files already read locally."""

    def query(self, key_hash: int, begin_ms: int, end_ms: int, max_count: int, seen: set[int],
              skip: set[int]) -> list[int]: ...


class IndexService:
    """Indexes dispatched records by (topic, key) and answers key queries."""

    def __init__(self, directory: Path, slots: int, entries: int) -> None:
        if slots < 1 or entries < 2:
            raise ValueError(f"index geometry needs slots >= 1 and entries >= 2, got {slots}, {entries}")
        self.directory = Path(directory)
        self.slots = slots
        self.entries = entries
        self._files: list[IndexFile] = []  # replaced, never mutated in place
        self._lock = threading.Lock()
        self._closed = False
        self._topic_crc: dict[str, int] = {}
        self.remote: RemoteKeys | None = None  # set by tiered storage before the store starts

    # ------------------------------------------------------------ lifecycle
    def load(self) -> None:
        """Open the directory's index files in order, renaming unusable ones aside."""
        with self._lock:
            for old in self._files:
                old.close()
            self.directory.mkdir(parents=True, exist_ok=True)
            for tmp in self.directory.glob("*.tmp"):
                tmp.unlink()
            files: list[IndexFile] = []
            for path in sorted(self.directory.iterdir()):
                if len(path.name) != _NAME_DIGITS or not path.name.isdigit():
                    continue
                try:
                    files.append(IndexFile.open(path))
                except (CorruptRecordError, OSError, ValueError) as exc:
                    aside = path.with_name(path.name + ".corrupt")
                    _log.warning("index file %s is unusable (%s); renamed to %s", path, exc, aside.name)
                    path.rename(aside)
            self._files = files
            self._closed = False

    def flush(self) -> None:
        """msync every index file."""
        for index_file in self._files:
            index_file.flush()  # a file closed meanwhile (retention) is skipped

    def close(self) -> None:
        """Flush and unmap every file; safe to call twice."""
        with self._lock:
            files, self._files = self._files, []
            self._closed = True
        for index_file in files:
            index_file.close()

    # --------------------------------------------------------------- writes
    def dispatch(self, batch: DispatchBatch) -> None:
        """Index every key of every committed record of ``batch``."""
        hashes, rows = self._hash_keys(batch)
        with self._lock:
            self._check_open()
            if hashes.size:
                self._put(hashes, batch.phy_offsets[rows], batch.store_timestamps[rows])
            if not len(batch):
                if self._files:
                    self._files[-1].mark_covered(batch.end_offset)
                return
            if not self._files:  # a first batch without keys still opens a file to record coverage
                self._roll(int(batch.phy_offsets[0]), int(batch.store_timestamps.min()))
            self._files[-1].mark_covered(batch.end_offset, int(batch.store_timestamps.max()))

    def _hash_keys(self, batch: DispatchBatch) -> tuple[np.ndarray, np.ndarray]:
        """Hash every key of every indexable record; return (hashes, record rows).

        Built from C-level iterators (no Python bytecode per key): the CRC of
        ``"{topic}#"`` is cached per topic and continued over the key bytes.
        """
        n = len(batch)
        if batch.source is not None:  # straight from the records' bytes
            if not n:
                return np.empty(0, np.int64), np.empty(0, np.int64)
            crcs, rows = batch.source.key_crcs(self._topic_prefixes(batch.topics))
            hashes = crcs & _HASH_MASK
        else:
            hashes, rows = self._hash_key_lists(batch)
        if not len(rows):
            return hashes, rows
        keep = is_visible(np.asarray(batch.sys_flags, dtype=np.int64)[rows])
        if not keep.all():
            hashes, rows = hashes[keep], rows[keep]
        return hashes, rows

    def _hash_key_lists(self, batch: DispatchBatch) -> tuple[np.ndarray, np.ndarray]:
        n = len(batch)
        counts = np.fromiter(map(len, batch.keys), dtype=np.int64, count=n)
        total = int(counts.sum())
        if total == 0:
            return np.empty(0, np.int64), np.empty(0, np.int64)
        prefix_of = self._topic_prefixes(batch.topics)
        if total == n and counts.all():  # one key per record: the common case
            flat_keys: Iterable[str] = map(itemgetter(0), batch.keys)
            prefixes: Iterable[int] = map(prefix_of.__getitem__, batch.topics)
            rows = np.arange(n, dtype=np.int64)
        else:
            flat_keys = chain.from_iterable(batch.keys)
            per_key_topics = chain.from_iterable(map(repeat, batch.topics, counts.tolist()))
            prefixes = map(prefix_of.__getitem__, per_key_topics)
            rows = np.repeat(np.arange(n, dtype=np.int64), counts)
        crcs = map(crc32, map(str.encode, flat_keys), prefixes)
        return np.fromiter(crcs, dtype=np.int64, count=total) & _HASH_MASK, rows

    def _topic_prefixes(self, topics: list[str]) -> dict[str, int]:
        """CRC32 of ``"{topic}#"`` per topic, cached: crc32(key, it) == crc32(topic#key)."""
        cache = self._topic_crc
        one = bool(topics) and topics.count(topics[0]) == len(topics)  # (a batch of one topic: no set of rows)
        missing = ({topics[0]} if one else set(topics)).difference(cache)
        if missing:
            if len(cache) + len(missing) > _TOPIC_CACHE_LIMIT:
                cache.clear()
                missing = set(topics)
            cache.update((topic, crc32(f"{topic}#".encode())) for topic in missing)
        return cache

    def _put(self, hashes: np.ndarray, phys: np.ndarray, stamps: np.ndarray) -> None:
        """Append entries to the newest file, rolling as files fill up."""
        done = 0
        while done < len(hashes):
            if not self._files or self._files[-1].is_full:
                self._roll(int(phys[done]), int(stamps[done:].min()))
            done += self._files[-1].put_batch(hashes[done:], phys[done:], stamps[done:])

    def _roll(self, begin_phy: int, begin_ts: int) -> None:
        """Start a new index file at ``begin_phy`` (caller holds the lock)."""
        if self._files:
            begin_phy = max(begin_phy, self._files[-1].begin_phy_offset + 1)
        path = self.directory / f"{begin_phy:0{_NAME_DIGITS}d}"
        new = IndexFile.create(path, self.slots, self.entries, begin_phy, begin_ts)
        self._files = [*self._files, new]

    # ---------------------------------------------------------------- reads
    def query(self, topic: str, key: str, begin_ms: int, end_ms: int, max_count: int) -> list[int]:
        """Physical offsets indexed under (topic, key) in the time range, newest first."""
        self._check_open()
        wanted = key_hash(topic, key)
        seen: set[int] = set()
        out: list[int] = []
        local: set[int] = set()
        for index_file in reversed(self._files):
            if len(out) >= max_count:
                break
            if index_file.end_timestamp < begin_ms - 999 or index_file.begin_timestamp > end_ms:
                local.add(index_file.begin_phy_offset)
                continue
            try:
                out += index_file.query(wanted, begin_ms, end_ms, max_count - len(out), seen)
                local.add(index_file.begin_phy_offset)
            except StoreClosedError:
                continue  # deleted by retention (or moved to the object store) while we looked
        if self.remote is not None and len(out) < max_count:
            out += self.remote.query(wanted, begin_ms, end_ms, max_count - len(out), seen, local)
        return out

    def max_phy_offset(self) -> int:
        """CommitLog offset up to which records have been indexed (0 if none)."""
        files = self._files
        return files[-1].end_phy_offset if files else 0

    def files(self) -> list[IndexFile]:
        """The index files, oldest first (a snapshot)."""
        return list(self._files)

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError("the index service is closed")

    # ------------------------------------------------------------ retention
    def delete_files_before(self, phy_offset: int) -> int:
        """Delete files wholly before ``phy_offset`` (never the newest); return how many."""
        with self._lock:
            files = self._files
            doomed = [f for f in files[:-1] if f.end_phy_offset < phy_offset]
            self._files = [f for f in files if f not in doomed]
        return self._delete(doomed)

    def delete_files_after(self, phy_offset: int) -> int:
        """Delete files that begin at or past ``phy_offset`` (CommitLog truncated there)."""
        with self._lock:
            files = self._files
            doomed = [f for f in files if f.begin_phy_offset >= phy_offset]
            self._files = [f for f in files if f not in doomed]
            if self._files:
                self._files[-1].truncate_coverage(phy_offset)
        return self._delete(doomed)

    def _delete(self, doomed: list[IndexFile]) -> int:
        for index_file in doomed:
            index_file.close()
            index_file.path.unlink(missing_ok=True)
            _log.info("deleted index file %s", index_file.path.name)
        return len(doomed)
