"""What the reput service hands to dispatchers, and the dispatcher Protocol.

A :class:`DispatchBatch` is columnar: one entry per CommitLog record, in
CommitLog order.  Numeric columns are numpy arrays so that dispatchers (the
ConsumeQueue, the index, the Delta mirror) can work on a whole batch at once.
Only records that carry a message are included; BLANK tail records are not.

The Python-object columns (keys, tags, user properties, bodies, message ids)
may be *lazy*: a batch parsed from CommitLog bytes holds a
:class:`ColumnSource` and builds each such list the first time a dispatcher
asks for it.  Dispatch into ConsumeQueues and the index never asks for bodies
or ids, so it never pays for them; the Delta mirror and pulls do.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np

__all__ = ["ColumnSource", "DispatchBatch", "Dispatcher", "decode_properties"]

_ARRAYS = ("queue_ids", "queue_offsets", "phy_offsets", "sizes", "tag_codes", "store_timestamps",
           "born_timestamps", "sys_flags")
_LAZY = ("keys", "tags", "properties_raw", "bodies", "msg_ids")
_LISTS = ("topics", *_LAZY)
_DTYPES: dict[str, type] = {"queue_ids": np.int32, "sizes": np.int32, "sys_flags": np.int32}
_DTYPES.update({f: np.int64 for f in _ARRAYS if f not in _DTYPES})


class ColumnSource(Protocol):
    """Builds a batch's lazy columns from the bytes it was parsed from."""

    def column(self, name: str) -> list[Any]: ...

    def take(self, idx: np.ndarray) -> ColumnSource: ...

    def key_crcs(self, prefix_of: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
        """(crc32 of "topic#key" per key, its record row) for every key, in CommitLog order."""
        ...


class DispatchBatch:
    """Columns of parsed CommitLog records, in CommitLog order."""

    __slots__ = ("topics", *_ARRAYS, "end_offset", "_lists", "source")

    def __init__(self, topics: list[str], queue_ids: np.ndarray, queue_offsets: np.ndarray, phy_offsets: np.ndarray,
                 sizes: np.ndarray, tag_codes: np.ndarray, store_timestamps: np.ndarray,
                 born_timestamps: np.ndarray, sys_flags: np.ndarray, keys: list[tuple[str, ...]] | None = None,
                 tags: list[str | None] | None = None, properties_raw: list[bytes] | None = None,
                 bodies: list[bytes] | None = None, msg_ids: list[str] | None = None, end_offset: int = 0,
                 source: ColumnSource | None = None) -> None:
        self.topics = topics
        self.queue_ids = queue_ids  # int32
        self.queue_offsets = queue_offsets  # int64
        self.phy_offsets = phy_offsets  # int64
        self.sizes = sizes  # int32, whole record size
        self.tag_codes = tag_codes  # int64, see codec.tag_code
        self.store_timestamps = store_timestamps  # int64 ms
        self.born_timestamps = born_timestamps  # int64 ms
        self.sys_flags = sys_flags  # int32
        # CommitLog offset just past the last record this batch covers (BLANK tail records included).
        self.end_offset = end_offset
        given = dict(keys=keys, tags=tags, properties_raw=properties_raw, bodies=bodies, msg_ids=msg_ids)
        self._lists: dict[str, list[Any]] = {k: v for k, v in given.items() if v is not None}
        if source is None and len(self._lists) != len(_LAZY):
            raise ValueError(f"a DispatchBatch without a source needs every column of {_LAZY}")
        self.source = source

    def _list(self, name: str) -> list[Any]:
        got = self._lists.get(name)
        if got is None:
            assert self.source is not None
            got = self._lists[name] = self.source.column(name)
        return got

    @property
    def keys(self) -> list[tuple[str, ...]]:
        return self._list("keys")

    @property
    def tags(self) -> list[str | None]:
        return self._list("tags")

    @property
    def properties_raw(self) -> list[bytes]:
        """User properties, codec layout."""
        return self._list("properties_raw")

    @property
    def bodies(self) -> list[bytes]:
        return self._list("bodies")

    @property
    def msg_ids(self) -> list[str]:
        return self._list("msg_ids")

    def __len__(self) -> int:
        return len(self.topics)

    def __repr__(self) -> str:
        return f"DispatchBatch({len(self)} records, end_offset={self.end_offset})"

    def properties(self, i: int) -> dict[str, str]:
        return decode_properties(self.properties_raw[i])

    def take(self, idx: np.ndarray) -> DispatchBatch:
        """The rows at positions ``idx`` (an int array), in that order."""
        rows = idx.tolist()
        columns: dict[str, Any] = {f: getattr(self, f)[idx] for f in _ARRAYS}
        source = self.source.take(idx) if self.source is not None else None
        columns.update({f: [v[i] for i in rows] for f, v in self._lists.items()})
        return DispatchBatch(topics=[self.topics[i] for i in rows], **columns, end_offset=self.end_offset,
                             source=source)

    @staticmethod
    def concat(parts: list[DispatchBatch], end_offset: int) -> DispatchBatch:
        """One batch holding the rows of ``parts`` in order."""
        if len(parts) == 1:
            parts[0].end_offset = end_offset
            return parts[0]
        columns: dict[str, Any] = {
            f: np.concatenate([getattr(p, f) for p in parts]) if parts else np.empty(0, _DTYPES[f]) for f in _ARRAYS
        }
        columns.update({f: [x for p in parts for x in getattr(p, f)] for f in _LISTS})
        return DispatchBatch(**columns, end_offset=end_offset)


def decode_properties(raw: bytes) -> dict[str, str]:
    """Decode ``name\\x01value\\x02`` pairs (see codec); bytes that are not UTF-8 become U+FFFD."""
    if not raw:
        return {}
    out: dict[str, str] = {}
    for pair in raw.decode("utf-8", "replace").split("\x02"):
        if pair:
            name, _, value = pair.partition("\x01")
            out[name] = value
    return out


@runtime_checkable
class Dispatcher(Protocol):
    """Receives every batch the reput service parses, in CommitLog order.

    ``dispatch`` runs on the reput thread: an external dispatcher (the Delta
    mirror) must hand the batch to its own thread and return quickly.
    """

    def dispatch(self, batch: DispatchBatch) -> None: ...
