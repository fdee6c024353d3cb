"""ConsumeQueue ranges and IndexFiles of tiered segments: what is uploaded with a segment, and when the
local copies go.

With each CommitLog segment ``[start, end)`` goes one object ``consumequeue/<20-digit start>``: for
every queue, in (topic, queue id) order, the 20-byte units that point into the segment (a queue's
units are in log order, so they are one run, from where the queue's previous remote range ended)::

    +------------------------+------------------------+-----
    | units of queue (t1, 0) | units of queue (t1, 1) | ...      the manifest's "queues" list
    +------------------------+------------------------+-----     says which run is whose

An IndexFile goes whole (``index/<its name>``) once it is no longer written and its range ends
within the remote part of the log.  Once listed in the manifest, local copies go: a queue's oldest
ConsumeQueue file (never its last) when the remote ranges hold every unit of it still alive, an
IndexFile when it is remote.  Reads then go to :class:`~store.tiered.remote_reader.RemoteQueues` and
:class:`~store.tiered.remote_reader.RemoteIndex`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import numpy as np

from ..consume_queue import UNIT_DTYPE, UNIT_SIZE, ConsumeQueue
from ..consume_queue_store import ConsumeQueueStore
from ..errors import RemoteReadError
from ..index_file import HEADER, IndexFile
from ..index_service import IndexService
from ..mapped_file import MappedFile, segment_name
from .manifest import Manifest, RemoteIndexInfo, RemoteObject
from .remote_reader import RemoteQueues

__all__ = ["Logics", "PutVerified"]

_log = logging.getLogger(__name__)
_CHUNK_UNITS = 1 << 16  # units read at a time while cutting a segment's ranges
INDEX_BLOCK_BYTES = 64 << 10  # an index lookup reads a few entries here and there: small blocks

PutVerified = Callable[[str, Iterable[bytes], int], RemoteObject]  # key, blocks, block size -> the listed object


class Logics:
    def __init__(self, queues: ConsumeQueueStore, index: IndexService, manifest: Manifest, put: PutVerified,
                 block_bytes: int, remote: RemoteQueues) -> None:
        self.queues, self.index, self.manifest = queues, index, manifest
        self.put, self.block_bytes, self.remote = put, block_bytes, remote

    # -- with a segment ----------------------------------------------------
    def upload_ranges(self, start: int, end: int) -> tuple[list[list[object]], RemoteObject | None]:
        """Upload the ConsumeQueue units pointing into the segment ``[start, end)``; returns the manifest's
        ``queues`` list and the object (None when no queue has a unit there)."""
        listed: list[list[object]] = []
        parts: list[bytes] = []
        for (topic, qid), cq in sorted(self.queues.queues().items()):
            first, data = self._units_into(cq, start, end)
            if data:
                listed.append([topic, qid, first, len(data) // UNIT_SIZE])
                parts.append(data)
        if not parts:
            return listed, None
        blob, bb = b"".join(parts), self.block_bytes
        obj = self.put(f"consumequeue/{segment_name(start)}", (blob[i : i + bb] for i in range(0, len(blob), bb)), bb)
        return listed, obj

    def _units_into(self, cq: ConsumeQueue, start: int, end: int) -> tuple[int, bytes]:
        """(first unit, bytes) of the queue's units from its remote end (or first unit) that point below ``end``."""
        ranges = self.manifest.queue_ranges(cq.topic, cq.queue_id)
        first = ranges[-1].end if ranges else cq.min_offset()
        parts, pos, top = [], first, cq.max_offset()
        while pos < top:
            units = cq.read_units(pos, min(_CHUNK_UNITS, top - pos))
            if not len(units):
                break
            if not ranges and pos == first:  # a queue new to the manifest: skip units of older segments
                skip = int(np.argmax(units["phy"] >= start)) if (units["phy"] >= start).any() else len(units)
                units, first, pos = units[skip:], first + skip, pos + skip
            past = units["phy"] >= end
            take = int(np.argmax(past)) if past.any() else len(units)
            parts.append(units[:take].tobytes())
            pos += take
            if take < len(units):
                break
        return first, b"".join(parts)

    # -- after the segments ------------------------------------------------
    def upload_indexes(self) -> int:
        """Upload IndexFiles no longer written whose range ends within the remote log; returns how many."""
        end, done = self.manifest.end_offset(), {i.begin_phy for i in self.manifest.indexes()}
        moved = 0
        for f in self.index.files()[:-1]:
            if end is None or f.end_phy_offset > end:
                break
            if f.begin_phy_offset not in done:
                self._upload_index(f)
                moved += 1
        return moved

    def _upload_index(self, f: IndexFile) -> None:
        with f.path.open("rb") as fh:  # the header as uploaded (the file is no longer written)
            begin_ts, end_ts, begin_phy, end_phy, slots, count = HEADER.unpack(fh.read(HEADER.size))
        obj = self.put(f"index/{f.path.name}", _file_blocks(f.path, INDEX_BLOCK_BYTES), INDEX_BLOCK_BYTES)
        self.manifest.add_index(RemoteIndexInfo(begin_phy=begin_phy, end_phy=end_phy, begin_ts=begin_ts,
                                                end_ts=end_ts, slots=slots, count=count, obj=obj))
        _log.info("tiered storage: uploaded index file %s (%d bytes)", f.path.name, obj.size)

    def drop_local(self) -> list[MappedFile]:
        """Take the local ConsumeQueue files the object store holds out of their queues (returned, for the caller
        to destroy once readers are done) and delete the local IndexFiles it holds."""
        detached: list[MappedFile] = []
        for cq in self.queues.queues().values():
            while (f := self._droppable(cq)) is not None and (gone := cq.files.detach_first(f.start_offset)):
                detached.append(gone)
        remote, keep_below = {i.begin_phy for i in self.manifest.indexes()}, 0
        for f in self.index.files()[:-1]:
            if f.begin_phy_offset not in remote:
                break
            keep_below = f.end_phy_offset + 1
        if keep_below:
            self.index.delete_files_before(keep_below)
        return detached

    def _droppable(self, cq: ConsumeQueue) -> MappedFile | None:
        """The queue's oldest file if it is not the last and every live unit of it is in a remote range."""
        files, ranges = cq.files.files, self.manifest.queue_ranges(cq.topic, cq.queue_id)
        if len(files) < 2 or not ranges or not files[0].is_full:
            return None
        f = files[0]
        lo, hi = f.start_offset // UNIT_SIZE, f.end_offset // UNIT_SIZE
        if hi > ranges[-1].end:
            return None
        if lo < ranges[0].first:  # units before the remote ranges: only dead ones or of expired segments
            below = self.manifest.min_offset() or 0
            head = np.frombuffer(f.read(0, (ranges[0].first - lo) * UNIT_SIZE), UNIT_DTYPE)
            if (head["phy"] >= below).any():
                return None
        return f if self._same_remote(cq, f, max(lo, ranges[0].first), hi) else None

    def _same_remote(self, cq: ConsumeQueue, f: MappedFile, start: int, end: int) -> bool:
        """Whether the remote ranges hold exactly the file's units ``[start, end)`` (a topic deleted and created
        again starts its queues anew: the old remote ranges are not its units)."""
        parts, pos = [], start
        try:
            while pos < end and (got := self.remote.read(cq.topic, cq.queue_id, pos, end - pos)):
                parts.append(got)
                pos += len(got) // UNIT_SIZE
        except RemoteReadError as exc:  # the local file stays until its remote copy reads back intact
            _log.warning("tiered storage: %s/%d: %s; the local ConsumeQueue file stays", cq.topic, cq.queue_id, exc)
            return False
        local = f.read((start - f.start_offset // UNIT_SIZE) * UNIT_SIZE, (end - start) * UNIT_SIZE)
        if b"".join(parts) == local:
            return True
        _log.warning("tiered storage: %s/%d units %d-%d differ from the remote ranges; the local file stays",
                     cq.topic, cq.queue_id, start, end - 1)
        return False

    def expired(self, low: int) -> list[str]:
        """Take IndexFiles wholly below ``low`` (the remote log's new start) out of the manifest; their keys."""
        gone = [i for i in self.manifest.indexes() if i.end_phy <= low]
        for info in gone:
            self.manifest.remove_index(info.begin_phy)
        return [i.obj.key for i in gone]


def _file_blocks(path: Path, bb: int) -> Iterator[bytes]:
    with path.open("rb") as fh:
        while block := fh.read(bb):
            yield block
