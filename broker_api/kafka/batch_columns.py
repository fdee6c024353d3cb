"""Fetch's record batches built by numpy columns, with no Python object per record.

A page of records without headers (records.py draws a record) becomes one uncompressed batch. Every
record's length, time delta, offset delta, key length and value length are zig-zag varints of one
to ten bytes; records whose fields take as many bytes and whose values are as long (a producer's
records, between the points where a delta needs one more byte) lie in the batch as the rows of a
matrix: such a run is written a field at a time, each field's bytes for every row at once. Pages
whose records keep changing length (keys, mixed sizes) are written field by field over the whole
page, each varint byte scattered to its records.
"""

from __future__ import annotations

import struct

import crc32c
import numpy as np

from .records import _CRC_FROM, HEADER, uvarint

__all__ = ["plain_batch"]

_CRC = struct.Struct(">I")
_PER_RUN = (0, 3, 4)  # fields (of plain_batch's five) equal in every record of a run of one layout
_RUNS_PER_RECORD = 16  # the matrix path pays when a run holds this many records on average
_VARINT_LIMITS = np.array([1 << (7 * j) for j in range(1, 10)], np.uint64)  # the first value needing j + 1 bytes


def _varint_sizes(v: np.ndarray) -> np.ndarray:
    """Bytes each (already zig-zagged, unsigned) value takes as a varint."""
    return np.searchsorted(_VARINT_LIMITS, v, side="right") + 1


def _put_varints(out: np.ndarray, at: np.ndarray, v: np.ndarray, k: np.ndarray) -> None:
    """Write each value of ``v`` as the ``k``-byte varint at ``out[at:]``."""
    widest = int(k.max(initial=1))
    same = int(k.min(initial=1)) == widest  # the usual column: every value takes as many bytes
    for j in range(widest):
        m = slice(None) if same else k > j
        byte = ((v[m] >> np.uint64(7 * j)) & np.uint64(0x7F)).astype(np.uint8)
        if same:
            out[at + j] = byte | 0x80 if j + 1 < widest else byte
        else:
            out[at[m] + j] = byte | np.where(k[m] > j + 1, 0x80, 0).astype(np.uint8)


def _zigzag(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.int64)
    return ((x << 1) ^ (x >> 63)).astype(np.uint64)


def plain_batch(offsets: np.ndarray, born: np.ndarray, bodies: np.ndarray, body_offsets: np.ndarray,
                attributes: int = 0, keys: tuple[np.ndarray, np.ndarray] | None = None,
                limit: int | None = None, first_whole: bool = True) -> bytes:
    """One uncompressed batch of records without headers, built by columns (no Python object per
    record): the same bytes as :class:`BatchWriter` ``add(offset, born, key, body, [])``. ``keys``:
    (int64 lengths, -1 for a null key; the key bytes one after another), or None: every key null.
    With ``limit`` the batch holds the first records that fit in ``limit`` bytes: at least one
    (``first_whole``), or none (b"") when even the first does not fit."""
    base_offset, base_ts = int(offsets[0]), int(born[0])
    bo = body_offsets.astype(np.int64)
    vlen = np.diff(bo)
    klen = np.full(len(vlen), -1, np.int64) if keys is None else keys[0]
    kbytes = np.maximum(klen, 0)
    ts, od, kl, vl = _zigzag(born - base_ts), _zigzag(offsets - base_offset), _zigzag(klen), _zigzag(vlen)
    k_ts, k_od, k_kl, k_vl = _varint_sizes(ts), _varint_sizes(od), _varint_sizes(kl), _varint_sizes(vl)
    rec_len = 1 + k_ts + k_od + k_kl + kbytes + k_vl + vlen + 1
    rl = _zigzag(rec_len)
    k_rl = _varint_sizes(rl)
    size = k_rl + rec_len
    if limit is not None and HEADER.size + int(size.sum()) > limit:
        fit = int(np.searchsorted(np.cumsum(size), limit - HEADER.size, side="right"))
        if not fit and not first_whole:
            return b""
        n = max(1, fit)
        cut = None if keys is None else (keys[0][:n], keys[1][:int(kbytes[:n].sum())])
        return plain_batch(offsets[:n], born[:n], bodies, body_offsets[:n + 1], attributes, cut)
    start = np.zeros(len(size), np.int64)
    np.cumsum(size[:-1], out=start[1:])
    batch = np.zeros(HEADER.size + int(size.sum()), np.uint8)  # the batch header, then the records
    out = batch[HEADER.size:]  # the attributes byte and the header count stay 0
    fields = ((rl, k_rl), (ts, k_ts), (od, k_od), (kl, k_kl), (vl, k_vl))
    values = bodies[bo[0]:bo[-1]]
    if keys is not None or not _by_runs(out, start, size, fields, vlen, bo - bo[0], values):
        _put_varints(out, start, rl, k_rl)
        at = start + k_rl + 1
        for value, k in fields[1:4]:
            _put_varints(out, at, value, k)
            at = at + k
        if keys is not None:
            _place(out, at, kbytes, keys[1])
        at = at + kbytes
        _put_varints(out, at, vl, k_vl)
        _place(out, at + k_vl, vlen, values)
    last = int(offsets[-1]) - base_offset
    HEADER.pack_into(batch.data, 0, base_offset, len(batch) - 12, 0, 2, 0, attributes, last, base_ts, int(born.max()),
                     -1, -1, -1, len(offsets))
    _CRC.pack_into(batch.data, 17, crc32c.crc32c(batch[_CRC_FROM:].data))
    return batch.tobytes()


def _place(out: np.ndarray, at: np.ndarray, lengths: np.ndarray, data: np.ndarray) -> None:
    """Copy ``data`` into ``out`` as spans of ``lengths`` starting at ``at`` (increasing, disjoint)."""
    total = int(lengths.sum())
    if not total:
        return
    width = int(lengths[0])
    if (lengths == width).all() and _strided_place(out, at, width, data):
        return
    if total * 8 < len(out):  # short spans (keys): an index per byte
        out[np.arange(total) + np.repeat(at - (np.cumsum(lengths) - lengths), lengths)] = data
        return
    edges = np.zeros(len(out) + 1, np.int8)  # +1 where a span starts, -1 where it ends: a running sum marks them
    edges[at] = 1
    edges[at + lengths] -= 1
    out[np.cumsum(edges[:-1], dtype=np.int8).view(np.bool_)] = data


def _strided_place(out: np.ndarray, at: np.ndarray, width: int, data: np.ndarray) -> bool:
    """Spans of one width written as a few strided copies (one per run of spans at one distance);
    False (nothing written) when the runs are too short for that to pay."""
    gaps = np.diff(at)
    cuts = np.flatnonzero(gaps[1:] != gaps[:-1]) + 2  # a run starts where the gap changes
    if len(cuts) * 8 > len(at):
        return False
    rows = data.reshape(len(at), width)
    bounds = [0, *cuts.tolist(), len(at)]
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        step = int(gaps[lo]) if hi - lo > 1 else width
        view = np.lib.stride_tricks.as_strided(out[int(at[lo]):], (hi - lo, width), (step, 1))
        view[:] = rows[lo:hi]
    return True


def _by_runs(out: np.ndarray, start: np.ndarray, size: np.ndarray, fields: tuple[tuple[np.ndarray, np.ndarray], ...],
             vlen: np.ndarray, value_at: np.ndarray, values: np.ndarray) -> bool:
    """Write null-keyed records run by run of one layout (the module docstring), or nothing and
    False when the runs are too short for that to pay."""
    n = len(size)
    change = vlen[1:] != vlen[:-1]
    for _, k in fields:
        change |= k[1:] != k[:-1]
    cuts = np.flatnonzero(change) + 1
    if len(cuts) * _RUNS_PER_RECORD > n:
        return False
    bounds = [0, *cuts.tolist(), n]
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        width, m, first = int(size[lo]), hi - lo, int(start[lo])
        rows = out[first:first + m * width].reshape(m, width)
        col = 0
        for i, (value, k) in enumerate(fields):
            kk = int(k[lo])
            if i in _PER_RUN:  # the record length, key length and value length: one value per run
                rows[:, col:col + kk] = np.frombuffer(uvarint(int(value[lo])), np.uint8)
            else:
                _varint_columns(rows[:, col:col + kk], value[lo:hi])
            col += kk + (1 if i == 0 else 0)  # the attributes byte (0) follows the length
        vl, first_value = int(vlen[lo]), int(value_at[lo])
        rows[:, col:col + vl] = values[first_value:first_value + m * vl].reshape(m, vl)
    return True


def _varint_columns(cols: np.ndarray, v: np.ndarray) -> None:
    """Write values that each take ``cols.shape[1]`` varint bytes into the columns ``cols``."""
    k = cols.shape[1]
    for j in range(k):
        b = v >> np.uint64(7 * j) if j else v
        cols[:, j] = (b & np.uint64(0x7F)) | np.uint64(0x80) if j + 1 < k else b
