"""Read-only access to a CommitLog for a process that does not own the store.

:class:`ReadOnlyCommitLog` opens the segment files of ``<store root>/commitlog``
with ``O_RDONLY`` and parses records with the same scanner the reput service
uses.  It never writes, truncates, locks or deletes anything, so it runs next
to the broker that owns the store (the Delta mirror's child process does).
The owner tells it how far it may read (``limit``: a record boundary the
owner has dispatched); past that the bytes may be half written.

Records the owner's recovery quarantined (``<store root>/quarantine``, see
:mod:`.quarantine`) are skipped like the owner's reput skips them: a batch
ends before one and the next read starts after it.  The list is read again
whenever the file changes.

Segments the owner deleted (retention) are skipped: a read below the oldest
segment on disk jumps to it.  A segment deleted while open stays readable
through its descriptor until :meth:`ReadOnlyCommitLog.forget_below` closes it.

:func:`raw_columns` exposes where each record's variable fields lie in the bytes
a :class:`DispatchBatch` was parsed from, so a caller can build Arrow columns
with one gather per column instead of a Python object per message::

    buf:  ... | header (88) | body | topic | props: [TAGS][KEYS] user pairs | header ...
                            ^ body_start   ^ body_end     ^ rest_start     ^ rest_end
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import codec
from .dispatch import DispatchBatch
from .errors import CorruptRecordError
from .mapped_file import segment_name
from .quarantine import Quarantine
from .record_columns import RecordColumns
from .scanner import ScanStop, scan_chunk

__all__ = ["RawColumns", "ReadOnlyCommitLog", "raw_columns"]

_HS = codec.HEADER_SIZE


class ReadOnlyCommitLog:
    """Parses records of a CommitLog another process writes, up to a limit it is given."""

    def __init__(self, directory: Path, segment_bytes: int, store_host: str) -> None:
        self._dir = Path(directory)
        self._segment_bytes = segment_bytes
        self._store_host = codec.encode_host(store_host)
        self._fds: dict[int, int] = {}
        self._quarantine_path = self._dir.parent / "quarantine"
        self._quarantine, self._quarantine_seen = Quarantine(None), (0, -1)

    def _quarantined(self) -> Quarantine:
        """The owner's quarantine list, read again when its file changed."""
        try:
            st = os.stat(self._quarantine_path)
            seen = (st.st_mtime_ns, st.st_size)
        except FileNotFoundError:
            seen = (0, -1)
        if seen != self._quarantine_seen:
            fresh = Quarantine(self._quarantine_path)
            fresh.load()
            self._quarantine, self._quarantine_seen = fresh, seen
        return self._quarantine

    def read_batch(self, start: int, limit: int, max_bytes: int) -> tuple[DispatchBatch | None, int]:
        """Records from ``start`` (a record boundary) before ``limit``; returns (batch or None, next offset).
        A quarantined record is jumped over (None, its end); a batch ends before one."""
        quarantine = self._quarantined()
        damaged = quarantine.covering(start)
        if damaged is not None:
            return None, min(damaged.end, max(limit, start))
        stop = quarantine.next_start(start)
        if stop is not None:
            max_bytes = min(max_bytes, stop - start)
        seg_start = start - start % self._segment_bytes
        fd = self._open(seg_start)
        if fd is None:
            oldest = self._oldest_segment()
            if oldest is not None and oldest > start:
                return None, min(oldest, limit)
            return None, start  # nothing on disk there yet
        size = min(max_bytes, limit - start, seg_start + self._segment_bytes - start)
        chunk = os.pread(fd, size, start - seg_start) if size > 0 else b""
        if not chunk:
            return None, start
        result = scan_chunk(chunk, start, check_crc=False, store_host=self._store_host)
        if result.stop is ScanStop.SHORT and result.consumed == 0:
            total = int.from_bytes(chunk[:4], "big")
            result = scan_chunk(os.pread(fd, total, start - seg_start), start, check_crc=False,
                                store_host=self._store_host)
        if result.stop is ScanStop.INVALID or (result.stop is ScanStop.SHORT and result.consumed == 0):
            raise CorruptRecordError(f"invalid CommitLog record at {start + result.consumed}: {result.reason}")
        nxt = seg_start + self._segment_bytes if result.stop is ScanStop.BLANK else start + result.consumed
        nxt = min(nxt, max(limit, start + result.consumed))
        result.batch.end_offset = nxt
        return (result.batch if len(result.batch) else None), nxt

    def forget_below(self, offset: int) -> None:
        """Close the segments that lie wholly before ``offset``."""
        for seg_start in [s for s in self._fds if s + self._segment_bytes <= offset]:
            os.close(self._fds.pop(seg_start))

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()

    def _open(self, seg_start: int) -> int | None:
        fd = self._fds.get(seg_start)
        if fd is None:
            try:
                fd = os.open(self._dir / segment_name(seg_start), os.O_RDONLY)
            except FileNotFoundError:
                return None
            self._fds[seg_start] = fd
        return fd

    def _oldest_segment(self) -> int | None:
        try:
            names = [p.name for p in self._dir.iterdir() if p.name.isdigit()]
        except FileNotFoundError:
            return None
        return min((int(n) for n in names), default=None)


@dataclass(slots=True)
class RawColumns:
    """Byte spans of a batch's variable fields in the buffer it was parsed from (one entry per record)."""

    buf: bytes
    body_start: np.ndarray
    body_end: np.ndarray
    key_start: np.ndarray  # the single key; -1 when the record has none
    key_end: np.ndarray
    rest_start: np.ndarray  # the user properties
    rest_end: np.ndarray
    tag_index: np.ndarray  # index into tag_names; 0 = no tag
    tag_names: list[str | None]
    hosts: np.ndarray  # STORE_HOST per record (uint64)
    has_slow: bool  # some record has several keys or odd properties: use the batch's lists for those fields


def raw_columns(batch: DispatchBatch) -> RawColumns | None:
    """The spans of ``batch``'s records, or None when it was not parsed from CommitLog bytes."""
    src = batch.source
    if not isinstance(src, RecordColumns) or len(src) != len(batch):
        return None
    try:
        h, sp = src.h, src.spans
        body_start = h.st + _HS
        return RawColumns(
            buf=src.buf, body_start=body_start, body_end=body_start + h.blen,
            key_start=sp.key_start, key_end=sp.key_end, rest_start=sp.rest_start, rest_end=src.p_end,
            tag_index=src.tag_index, tag_names=src.tag_names, hosts=h.hdr["store_host"], has_slow=bool(src.slow))
    except (AttributeError, KeyError, ValueError):  # RecordColumns changed shape: callers use the lists
        return None
