"""Whole-record CRCs of a batch from its pieces: the body CRCs are reused, not recomputed.

A record sealed by :mod:`.wcrc` is ``H | B | T`` (the 88-byte header, the
body, the tail up to the WCRC digits).  zlib's CRC-32 composes
(:mod:`.crc_fold`)::

    crc32(H + B + T) == Z(|T|)( Z(|B|)(crc32(H)) ^ crc32(B) ) ^ crc32(T)

with ``Z(n)`` the linear map "run the register over ``n`` zero bytes".  The
body CRCs are already known (they go into the header).  The headers of one
batch differ in a few byte columns only (body CRC, offsets, sizes), and so
do the tails (the key bytes), and for two strings of one length::

    crc32(X_i) == crc32(X_0) ^ raw(X_i ^ X_0)

where ``raw`` is the CRC register without zlib's pre- and post-inversion:
one table lookup per differing byte column, for every record at once.  For
records of one size (:func:`fixed_record_crcs`) the whole record is ``X``:
one zlib call for the first record, the bodies' part from their CRCs
(``Z(|T|)(crc32(B_i) ^ crc32(B_0))``), and a lookup per differing header or
key byte (tables of the byte's position, cached per record length).  Records
of several sizes (:func:`record_crcs`) compose header, body and tail CRCs.
Either way a batch of ``n`` records costs one or two zlib calls and a few
dozen numpy steps over ``n`` values, instead of ``n`` zlib calls.  ``Z`` of
per-record lengths is applied bit by bit of the lengths (``Z(a + b) ==
Z(a) Z(b)``), a masked step per bit.

Nothing on disk depends on this module: the values equal ``zlib.crc32`` of
the same bytes (tests/store/test_record_crc.py checks it on random batches).
"""

from __future__ import annotations

from collections.abc import Sequence

import functools

import numpy as np

from .crc import crc32
from .crc_fold import _apply, _position_tables, _zero_run_tables

__all__ = ["fixed_record_crcs", "record_crcs", "row_crcs", "tail_crcs", "zero_shift"]

HEADER = 88


@functools.lru_cache(maxsize=64)
def _header_tables(length: int) -> np.ndarray:
    """(88 x 256): entry [j, b] is byte ``b`` at header position ``j`` run to the end of a
    ``length``-byte string (the position tables of 88 bytes, then ``length - 88`` zero bytes)."""
    return _apply(_zero_run_tables(length - HEADER), _position_tables(HEADER))


def fixed_record_crcs(rows: np.ndarray, length: int, cols: np.ndarray, body_crcs: np.ndarray,
                      body_end: int) -> np.ndarray:
    """``crc32(row[:length])`` of every row of ``rows`` (n records of one size, uint8): one zlib
    call for row 0, then only what differs from it: the bodies (from their CRCs; they end at
    ``body_end``) and the columns ``cols`` (header columns, then tail columns at ``body_end`` or
    later: every other column must be equal in all rows), one table lookup per row and column."""
    n = len(rows)
    acc = np.full(n, crc32(rows[0, :length].data), np.uint32)
    if n < 2:
        return acc
    body = body_crcs.astype(np.uint32, copy=False)
    if (body != body[0]).any():
        acc ^= _apply(_zero_run_tables(length - body_end), body ^ body[0])
    sub = rows[:, cols]
    diff = sub ^ sub[0]
    heads, tails = _header_tables(length), _position_tables(length - body_end)
    for k in np.flatnonzero(diff.any(axis=0)).tolist():
        col = int(cols[k])
        acc ^= (heads[col] if col < HEADER else tails[col - body_end]).take(diff[:, k])
    return acc


def row_crcs(mat: np.ndarray) -> np.ndarray:
    """``crc32(row)`` of every row of the (n x L) uint8 matrix ``mat`` (rows may be strided):
    one zlib call for row 0, one table lookup per row for each column that differs from row 0."""
    if not len(mat):
        return np.zeros(0, np.uint32)
    return _row_diffs(mat) ^ np.uint32(crc32(np.ascontiguousarray(mat[0]).data))


def _row_diffs(mat: np.ndarray) -> np.ndarray:
    """``crc32(row) ^ crc32(mat[0])`` of every row: the register over the XOR of the two rows."""
    n, length = mat.shape
    acc = np.zeros(n, np.uint32)
    if n > 1 and length:
        first = mat[0]
        cols = np.flatnonzero((mat != first).any(axis=0))
        if len(cols):
            tables = _position_tables(length)
            for j in cols.tolist():
                acc ^= tables[j].take(mat[:, j] ^ first[j])
    return acc


def zero_shift(x: np.ndarray, lengths: np.ndarray | int) -> np.ndarray:
    """Every CRC value of ``x`` run over ``lengths`` zero bytes (one length, or one per value)."""
    if isinstance(lengths, int) or np.ndim(lengths) == 0:
        return _apply(_zero_run_tables(int(lengths)), x) if int(lengths) else x.astype(np.uint32)
    lengths = np.asarray(lengths, np.int64)
    low, top = int(lengths.min()), int(lengths.max())
    if low == top:
        return zero_shift(x, low)
    out = x.astype(np.uint32, copy=True)
    for bit in range(top.bit_length()):
        mask = (lengths >> bit) & 1 == 1
        if mask.any():
            out[mask] = _apply(_zero_run_tables(1 << bit), out[mask])
    return out


def tail_crcs(tails: bytes | Sequence[bytes] | np.ndarray, n: int, cut: int) -> np.ndarray | int:
    """``crc32(tail[:-cut])`` of the tails: one value for one shared tail, else one per tail."""
    if isinstance(tails, bytes):
        return crc32(tails[:len(tails) - cut])
    if isinstance(tails, np.ndarray):
        return row_crcs(tails[:, :tails.shape[1] - cut])
    return np.fromiter((crc32(t[:len(t) - cut]) for t in tails), np.uint32, n)


def record_crcs(heads: np.ndarray, body_crcs: np.ndarray, body_lens: np.ndarray | int,
                tail_part: np.ndarray | int, tail_lens: np.ndarray | int) -> np.ndarray:
    """``crc32(header + body + tail)`` per record, from the (n x 88) header bytes, the body CRCs
    and lengths, and the tails' CRCs (:func:`tail_crcs`) and lengths."""
    acc = zero_shift(row_crcs(heads), body_lens) ^ body_crcs.astype(np.uint32, copy=False)
    return zero_shift(acc, tail_lens) ^ np.uint32(tail_part) if np.ndim(tail_part) == 0 else \
        zero_shift(acc, tail_lens) ^ tail_part
