"""Check the body CRCs of a run of equal records with one zlib call.

zlib's CRC-32 composes: for byte strings ``A`` and ``B``::

    crc32(A + B) == shift(crc32(A), len(B)) ^ crc32(B)

where ``shift(x, n)`` runs the CRC register ``x`` over ``n`` zero bytes, a
linear map on 32 bits (zlib's ``crc32_combine``).  So for ``n`` bodies of one
length ``L`` the stored CRCs ``c[0..n)`` fold into the CRC their
concatenation must have; the fold is a tree of vectorised steps (pairs, then
pairs of pairs, ...), each a 4-table lookup per value.  :func:`run_ok`
copies the bodies next to each other (one strided numpy copy), computes
their CRC with one ``zlib.crc32`` call and compares it with the fold.

A mismatch says only that some record of the run is bad: the caller then
checks those records one by one to name the first.  A single damaged body or
stored CRC always changes the comparison (every shift is invertible), so
this catches exactly what per-record checks catch, except that two damaged
records could cancel out with probability 2**-32.

The same linearity gives :func:`crc32_rows`: the CRCs of many short byte
strings of one length ``L`` at once.  Without zlib's pre- and
post-inversion, the CRC of ``b[0] .. b[L-1]`` is the XOR over positions ``j``
of ``shift(T[b[j]], L - 1 - j)`` (``T`` the byte table) plus the start value
shifted over ``L`` bytes: one table lookup per byte, done for every string at
once by numpy (for keys of a few bytes, cheaper than one zlib call each).
"""

from __future__ import annotations

import functools

import numpy as np

from .crc import crc32

__all__ = ["crc32_at", "crc32_rows", "run_ok", "shift"]

_POLY = 0xEDB88320  # reflected CRC-32 polynomial (zlib)
_BYTES = np.arange(256, dtype=np.uint32)


def _apply(tables: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The linear map given by its 4 x 256 byte tables, applied to every value of ``x``."""
    x = x.astype(np.uint32, copy=False)
    return (tables[0].take(x & 0xFF) ^ tables[1].take((x >> 8) & 0xFF)
            ^ tables[2].take((x >> 16) & 0xFF) ^ tables[3].take(x >> 24))


_BITS = ((_BYTES[:, None] >> np.arange(8, dtype=np.uint32)) & 1).astype(bool)  # 256 x 8


def _tables(columns: np.ndarray) -> np.ndarray:
    """Byte tables of the linear map whose image of bit j is ``columns[j]``."""
    return np.stack([np.bitwise_xor.reduce(np.where(_BITS, columns[8 * k:8 * k + 8], np.uint32(0)), axis=1)
                     for k in range(4)]).astype(np.uint32)


def _one_zero_byte() -> np.ndarray:
    cols = np.uint64(1) << np.arange(32, dtype=np.uint64)
    for _ in range(8):
        cols = (cols >> np.uint64(1)) ^ np.where(cols & np.uint64(1), np.uint64(_POLY), np.uint64(0))
    return cols.astype(np.uint32)


def _power(columns: np.ndarray, n: int) -> np.ndarray:
    """Columns of the map applied ``n`` times (by squaring)."""
    result = np.uint32(1) << np.arange(32, dtype=np.uint32)  # identity
    while n:
        if n & 1:
            result = _apply(_tables(columns), result)
        n >>= 1
        if n:
            columns = _apply(_tables(columns), columns)
    return result


@functools.lru_cache(maxsize=16)
def _level_tables(length: int, levels: int) -> tuple[np.ndarray, ...]:
    """Tables of "run over ``length * 2**k`` zero bytes" for k < ``levels``: one squaring per level."""
    columns = _power(_one_zero_byte(), length)
    out = []
    for _ in range(levels):
        out.append(_tables(columns))
        columns = _apply(out[-1], columns)
    return tuple(out)


def shift(x: np.ndarray, nbytes: int) -> np.ndarray:
    """``x`` (CRC values) run over ``nbytes`` zero bytes."""
    return _apply(_tables(_power(_one_zero_byte(), nbytes)), x)


def _fold(crcs: np.ndarray, length: int) -> int:
    """The CRC of the concatenation of ``len(crcs)`` bodies of ``length`` bytes with these CRCs."""
    n = len(crcs)
    levels = max(0, (n - 1).bit_length())
    vals = np.zeros(1 << levels, np.uint32)
    vals[len(vals) - n:] = crcs  # zeros in front: an empty prefix (crc 0) leaves the rest unchanged
    for tables in _level_tables(length, 24)[:levels]:
        pairs = vals.reshape(-1, 2)
        vals = _apply(tables, pairs[:, 0]) ^ pairs[:, 1]
    return int(vals[0])


def run_ok(u8: np.ndarray, first: int, stride: int, count: int, length: int, crcs: np.ndarray) -> bool:
    """Whether the ``count`` bodies of ``length`` bytes at ``first``, ``first + stride``, ... all
    match their stored ``crcs`` (see the module docstring for the one caveat)."""
    bodies = np.lib.stride_tricks.as_strided(u8[first:], shape=(count, length), strides=(stride, 1))
    return crc32(np.ascontiguousarray(bodies).data) == _fold(crcs.astype(np.uint32), length)


@functools.lru_cache(maxsize=64)
def _position_tables(length: int) -> np.ndarray:
    """(length x 256) uint32: entry [j, b] is the CRC register after byte ``b`` at position ``j`` of a
    ``length``-byte string that starts from register 0."""
    one = _tables(_one_zero_byte())  # a byte of value b from register 0 gives T[b] = shift(b) (reflected)
    table = _apply(one, _BYTES)  # the classic 256-entry table
    rows = [table]
    for _ in range(length - 1):
        rows.append(_apply(one, rows[-1]))  # one more zero byte after it
    return np.ascontiguousarray(np.stack(rows[::-1]))


@functools.lru_cache(maxsize=64)
def _zero_run_tables(length: int) -> np.ndarray:
    """Tables of "run over ``length`` zero bytes"."""
    return _tables(_power(_one_zero_byte(), length))


def crc32_rows(mat: np.ndarray, start: int = 0) -> np.ndarray:
    """``zlib.crc32(row, start)`` for every row of the (n x L) uint8 array ``mat`` (uint32)."""
    n, length = mat.shape
    flat = np.ascontiguousarray(mat).reshape(-1)
    return crc32_at(flat, np.arange(n, dtype=np.int64) * length, length, start)


def crc32_at(u8: np.ndarray, starts: np.ndarray, length: int, start: int = 0) -> np.ndarray:
    """``zlib.crc32(u8[s:s + length], start)`` for every ``s`` of ``starts`` (uint32)."""
    reg = _apply(_zero_run_tables(length), np.array([start ^ 0xFFFFFFFF], np.uint32))[0] if length else \
        np.uint32(start ^ 0xFFFFFFFF)
    acc = np.full(len(starts), reg ^ np.uint32(0xFFFFFFFF), np.uint32)
    if length:
        tables = _position_tables(length)
        for j in range(length):  # one byte column at a time: L vector steps, no n x L temporaries
            acc ^= tables[j].take(u8.take(starts + j))
    return acc
