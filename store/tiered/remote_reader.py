"""Reads of CommitLog offsets that are no longer on the local disk.

The CommitLog asks :meth:`RemoteLog.find` for the segment holding an offset when no
local segment does; the answer reads like a local ``MappedFile`` (``start_offset``,
``wrote``, ``read``, ``view``), so pulls, lookups by id, key or time, the dispatcher
and a slave catching up all read remote bytes through the same code, from the bounded
:class:`~store.tiered.cache.BlockCache`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from .cache import BlockCache
from .manifest import Manifest, RemoteSegmentInfo

__all__ = ["RemoteLog", "RemoteSegment"]


class RemoteSegment:
    """One uploaded segment, read through the cache (never written)."""

    __slots__ = ("info", "_cache")

    def __init__(self, info: RemoteSegmentInfo, cache: BlockCache) -> None:
        self.info, self._cache = info, cache

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
        return self._cache.read(self.info, pos, size)

    @contextlib.contextmanager
    def view(self, pos: int, size: int) -> Iterator[memoryview]:
        with memoryview(self.read(pos, size)) as mv:
            yield mv


class RemoteLog:
    """The remote part of the CommitLog, as the manifest lists it."""

    def __init__(self, manifest: Manifest, cache: BlockCache) -> None:
        self.manifest, self.cache = manifest, cache

    def find(self, offset: int) -> RemoteSegment | None:
        info = self.manifest.find(offset)
        return RemoteSegment(info, self.cache) if info is not None else None

    def min_offset(self) -> int | None:
        """Start of the oldest remote segment, None when nothing is remote."""
        return self.manifest.min_offset()
