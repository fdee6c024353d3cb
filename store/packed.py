"""PackedBodies: message bodies as one byte buffer and offsets (Arrow's binary layout).

Body ``i`` is ``data[offsets[i]:offsets[i + 1]]``.  A produce request that
arrives as an Arrow IPC stream hands its ``body`` column to the store in this
form, so no Python object is made per body: lengths come from
``numpy.diff(offsets)``, equal-length bodies are a 2-D view of ``data``, and
CRCs are one C-level pass over memoryviews.
"""

from __future__ import annotations


import numpy as np

from .crc import crc32

__all__ = ["PackedBodies"]


class PackedBodies:
    """``n`` bodies: ``data`` (uint8) and ``offsets`` (n + 1 non-decreasing int64)."""

    __slots__ = ("data", "offsets")

    def __init__(self, data: np.ndarray, offsets: np.ndarray) -> None:
        self.data = data
        self.offsets = offsets

    @classmethod
    def from_bytes(cls, bodies: list[bytes]) -> PackedBodies:
        offsets = np.zeros(len(bodies) + 1, np.int64)
        np.cumsum(np.fromiter(map(len, bodies), np.int64, len(bodies)), out=offsets[1:])
        return cls(np.frombuffer(b"".join(bodies), np.uint8), offsets)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def nbytes(self) -> int:
        return int(self.offsets[-1] - self.offsets[0])

    def __getitem__(self, part: slice) -> PackedBodies:
        """Bodies ``lo:hi`` (no copy)."""
        lo, hi, _ = part.indices(len(self))
        return PackedBodies(self.data, self.offsets[lo:hi + 1])

    def take(self, rows: np.ndarray) -> PackedBodies:
        """The bodies at ``rows``, copied into a new buffer."""
        lengths = self.lengths()[rows]
        offsets = np.zeros(len(rows) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        every = self.lengths()
        if len(rows) and (every == every[0]).all():  # matrix() needs every body, not only these, of one length
            return PackedBodies(self.matrix()[rows].reshape(-1), offsets)
        return PackedBodies(np.frombuffer(b"".join([self.views()[i] for i in rows.tolist()]), np.uint8), offsets)

    def matrix(self) -> np.ndarray:
        """The bodies as rows of one 2-D array (all bodies must have the same length)."""
        n = len(self)
        width = int(self.offsets[1] - self.offsets[0]) if n else 0
        start = int(self.offsets[0])
        return self.data[start:start + n * width].reshape(n, width)

    def views(self) -> list[memoryview]:
        mv = memoryview(self.data)  # type: ignore[arg-type]
        return list(map(mv.__getitem__, map(slice, self.offsets[:-1].tolist(), self.offsets[1:].tolist())))

    def crcs(self) -> np.ndarray:
        """zlib.crc32 of every body (uint32), one C-level pass."""
        return np.fromiter(map(crc32, self.views()), np.uint32, len(self))
