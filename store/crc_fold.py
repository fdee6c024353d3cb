"""Check the body CRCs of a run of equal records with one zlib call.

zlib's CRC-32 composes: for byte strings ``A`` and ``B``::

    crc32(A + B) == shift(crc32(A), len(B)) ^ crc32(B)

where ``shift(x, n)`` runs the CRC register ``x`` over ``n`` zero bytes, a
linear map on 32 bits (zlib's ``crc32_combine``).  So for ``n`` bodies of one
length ``L`` the stored CRCs ``c[0..n)`` fold into the CRC their
concatenation must have; the fold takes 64 values at a time (one lookup in a
table of their places and one XOR reduction), then 64 of those, and so on.
:func:`run_ok` copies the bodies next to each other (one strided numpy copy),
computes their CRC with one ``zlib.crc32`` call and compares it with the
fold; :func:`spans_ok` does the same for strings of one length that start
anywhere (one gather).

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

__all__ = ["crc32_at", "crc32_rows", "run_ok", "shift", "spans_ok"]

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


_RADIX = 64  # CRC values folded at once: one table lookup and one XOR reduction per 64 values
_SLOTS = (np.arange(_RADIX, dtype=np.int32)[:, None] * 1024 + np.arange(4, dtype=np.int32) * 256)  # [k, j]


@functools.lru_cache(maxsize=32)
def _radix_table(length: int) -> np.ndarray:
    """Flat (64 * 4 * 256) uint32: entry [k, j, b] is the value whose byte ``j`` is ``b`` (the others
    0) run over ``(63 - k) * length`` zero bytes: the place of value ``k`` of 64 strings of
    ``length`` bytes each, in their concatenation."""
    step = _zero_run_tables(length)
    rows = [(_BYTES[None, :] << (8 * np.arange(4, dtype=np.uint32))[:, None]).astype(np.uint32)]  # 0 zero bytes
    for _ in range(_RADIX - 1):
        rows.append(_apply(step, rows[-1].reshape(-1)).reshape(4, 256))
    return np.ascontiguousarray(np.stack(rows[::-1])).reshape(-1)


def shift(x: np.ndarray, nbytes: int) -> np.ndarray:
    """``x`` (CRC values) run over ``nbytes`` zero bytes."""
    return _apply(_tables(_power(_one_zero_byte(), nbytes)), x)


def _fold(crcs: np.ndarray, length: int) -> int:
    """The CRC of the concatenation of ``len(crcs)`` bodies of ``length`` bytes with these CRCs:
    ``XOR_i shift(crcs[i], (n - 1 - i) * length)`` (zlib's crc32_combine, which is linear), 64 values
    at a time: their bytes index one table (:func:`_radix_table`), and an XOR reduction gives one
    value per 64. The next level folds those, with strings 64 times as long."""
    vals = crcs.astype("<u4")
    while len(vals) > 1:
        groups = -(-len(vals) // _RADIX)
        padded = np.zeros(groups * _RADIX, "<u4")
        padded[len(padded) - len(vals):] = vals  # zeros in front: an empty prefix (crc 0) changes nothing
        picks = _radix_table(length).take(padded.view(np.uint8).reshape(groups, _RADIX, 4) + _SLOTS)
        vals = np.bitwise_xor.reduce(picks.reshape(groups, -1), axis=1)
        length *= _RADIX
    return int(vals[0]) if len(vals) else 0


def run_ok(u8: np.ndarray, first: int, stride: int, count: int, length: int, crcs: np.ndarray) -> bool:
    """Whether the ``count`` bodies of ``length`` bytes at ``first``, ``first + stride``, ... all
    match their stored ``crcs`` (see the module docstring for the one caveat)."""
    bodies = np.lib.stride_tricks.as_strided(u8[first:], shape=(count, length), strides=(stride, 1))
    return crc32(np.ascontiguousarray(bodies).data) == _fold(crcs.astype(np.uint32), length)


def spans_ok(u8: np.ndarray, starts: np.ndarray, length: int, crcs: np.ndarray) -> bool:
    """Whether the strings ``u8[s:s + length]`` (every one inside ``u8``) all match their ``crcs``:
    one gather of them side by side, one zlib call, one fold (the module docstring's caveat holds)."""
    if not len(starts):
        return True
    if length <= 0 or int(starts.max()) + length > len(u8) or int(starts.min()) < 0:
        return False
    windows = np.lib.stride_tricks.as_strided(u8, shape=(len(u8) - length + 1, length), strides=(u8.strides[0], 1),
                                              writeable=False)
    return crc32(windows[starts].data) == _fold(crcs.astype(np.uint32), length)


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
