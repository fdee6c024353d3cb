"""What the reput service hands to dispatchers, and the dispatcher Protocol.

A :class:`DispatchBatch` is columnar: one entry per CommitLog record, in
CommitLog order.  Numeric columns are numpy arrays so that dispatchers (the
ConsumeQueue, the index, the Delta mirror) can work on a whole batch at once.
Only records that carry a message are included; BLANK tail records are not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

__all__ = ["DispatchBatch", "Dispatcher", "decode_properties"]


@dataclass(slots=True)
class DispatchBatch:
    """Columns of parsed CommitLog records, in CommitLog order."""

    topics: list[str]
    queue_ids: np.ndarray  # int32
    queue_offsets: np.ndarray  # int64
    phy_offsets: np.ndarray  # int64
    sizes: np.ndarray  # int32, whole record size
    tag_codes: np.ndarray  # int64, see codec.tag_code
    store_timestamps: np.ndarray  # int64 ms
    born_timestamps: np.ndarray  # int64 ms
    sys_flags: np.ndarray  # int32
    keys: list[tuple[str, ...]]
    tags: list[str | None]
    properties_raw: list[bytes]  # user properties, codec layout
    bodies: list[bytes]
    msg_ids: list[str]
    # CommitLog offset just past the last record this batch covers
    # (BLANK tail records included).
    end_offset: int

    def __len__(self) -> int:
        return len(self.topics)

    def properties(self, i: int) -> dict[str, str]:
        return decode_properties(self.properties_raw[i])

    def take(self, idx: np.ndarray) -> DispatchBatch:
        """The rows at positions ``idx`` (an int array), in that order."""
        rows = idx.tolist()
        columns: dict[str, Any] = {f: getattr(self, f)[idx] for f in _ARRAYS}
        columns.update({f: [getattr(self, f)[i] for i in rows] for f in _LISTS})
        return DispatchBatch(**columns, end_offset=self.end_offset)

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


_ARRAYS = ("queue_ids", "queue_offsets", "phy_offsets", "sizes", "tag_codes", "store_timestamps",
           "born_timestamps", "sys_flags")
_LISTS = ("topics", "keys", "tags", "properties_raw", "bodies", "msg_ids")
_DTYPES: dict[str, type] = {"queue_ids": np.int32, "sizes": np.int32, "sys_flags": np.int32}
_DTYPES.update({f: np.int64 for f in _ARRAYS if f not in _DTYPES})


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
