"""The records of one RecordBatch v2 body as columns, with no Python object per record.

A record (records.py draws the batch) is ``len attrs ts_delta offset_delta klen key vlen value
hcount headers...``, every integer a zig-zag varint. Only the ``len`` varints chain the records
together, so they are found first (runs of records of one length by one numpy comparison each,
one short step per record where lengths keep changing); every other field is then read for all
records at once, one numpy step per field:
a varint is gathered byte by byte across the records until no record's byte has its continuation
bit set.

The columns are what the store's column append takes (:meth:`store.MessageStore.put_column_groups`):
the values packed into one buffer (:class:`store.PackedBodies`), one key per record or none, and
one born time per record. Records the column path cannot carry as they are (headers, an empty or
non-text key, null and non-null keys mixed) make :func:`decode_columns` answer None: the caller
takes the per-record path, which keeps such keys and headers in properties (mapping.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from store.packed import PackedBodies

from .codec import KafkaProtocolError

__all__ = ["RecordColumns", "decode_columns"]

_MAX_VARINT = 10
_CONTINUATION = 0x80
_PROBE = 256  # records compared at once for the length of the one before (doubled while they match)
_SHORT_RUN = 4  # a run shorter than this: ...
_STEP = 32  # ... the next this many records are walked one at a time
_SEGMENTS = 8  # values gathered as strided runs when a run holds this many on average


@dataclass(slots=True)
class RecordColumns:
    """One batch's records: ``bodies`` (a null value is an empty body), ``keys`` (None: every key
    null), ``born`` (int64 ms) and ``offset_deltas`` (int64), one entry per record."""

    bodies: PackedBodies
    keys: list[str] | None
    born: np.ndarray
    offset_deltas: np.ndarray

    def __len__(self) -> int:
        return len(self.born)


def decode_columns(body: bytes, count: int, base_ts: int) -> RecordColumns | None:
    """The ``count`` records of an uncompressed batch body as columns, or None when a record needs
    the per-record path; KafkaProtocolError when the records are truncated or garbled."""
    if count <= 0:
        return None
    u8 = np.frombuffer(body, np.uint8)
    starts, ends = _record_spans(body, u8, count)
    ts, k1 = _varints(u8, starts + 1, ends)  # + 1: the attributes byte
    at = starts + 1 + k1
    deltas, k2 = _varints(u8, at, ends)
    at += k2
    klen, k3 = _varints(u8, at, ends)
    key_at = at + k3
    at = key_at + np.maximum(klen, 0)
    vlen, k4 = _varints(u8, at, ends)
    value_at = at + k4
    at = value_at + np.maximum(vlen, 0)
    headers, k5 = _varints(u8, at, ends)
    if headers.any():  # their names and values are read one by one (records.py checks them)
        return None
    if (klen < -1).any() or (vlen < -1).any() or (at + k5 != ends).any():
        raise KafkaProtocolError("a record's length does not match its fields")
    keys = _keys(u8, key_at, klen)
    if keys is False:
        return None
    return RecordColumns(_values(u8, value_at, np.maximum(vlen, 0)), keys or None, ts + base_ts, deltas)


def _record_spans(body: bytes, u8: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    """Where each record's fields start (after its length varint) and where it ends.

    A producer's records come in runs of one length (they differ when a delta needs one more varint
    byte): each run is found by one numpy comparison of the next records' length bytes with the
    first's. Where runs are short, the next records are walked one at a time."""
    starts, ends = np.empty(count, np.int64), np.empty(count, np.int64)
    i = pos = 0
    probe = _PROBE
    while i < count:
        length, after = _length(body, pos)
        size, stride = after - pos, after - pos + length
        k = min(count - i, probe, (len(body) - pos) // stride)
        if k < 1:
            raise KafkaProtocolError(f"truncated or garbled record: record {i} passes the batch's end")
        heads = pos + np.arange(k, dtype=np.int64) * stride
        same = u8[heads] == body[pos]
        for j in range(1, size):
            same &= u8[heads + j] == body[pos + j]
        m = k if same.all() else int(np.argmin(same))
        starts[i:i + m], ends[i:i + m] = heads[:m] + size, heads[:m] + stride
        i, pos = i + m, pos + m * stride
        probe = probe * 2 if m == k else _PROBE
        if m < _SHORT_RUN and i < count:
            i, pos = _walk(body, i, min(count, i + _STEP), pos, starts, ends)
    return starts, ends


def _length(body: bytes, pos: int) -> tuple[int, int]:
    """The record length varint at ``pos`` and the position after it."""
    try:
        b = body[pos]
        length, after = ((b >> 1) ^ -(b & 1), pos + 1) if b < _CONTINUATION else _one_varint(body, pos)
    except IndexError as exc:
        raise KafkaProtocolError(f"truncated or garbled record: {exc}") from exc
    if length < 0:
        raise KafkaProtocolError(f"a record length of {length} bytes")
    return length, after


def _walk(body: bytes, i: int, stop: int, pos: int, starts: np.ndarray, ends: np.ndarray) -> tuple[int, int]:
    """Records ``i:stop`` one length varint at a time; returns (stop, the position after them)."""
    first, n = i, len(body)
    found_starts, found_ends = [], []
    for i in range(first, stop):
        length, pos = _length(body, pos)
        found_starts.append(pos)
        pos += length
        found_ends.append(pos)
        if pos > n:
            raise KafkaProtocolError(f"truncated or garbled record: record {i} passes the batch's end")
    starts[first:stop], ends[first:stop] = found_starts, found_ends
    return stop, pos


def _one_varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    for _ in range(_MAX_VARINT):
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < _CONTINUATION:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
    raise KafkaProtocolError("a record varint is too long")


def _varints(u8: np.ndarray, at: np.ndarray, limit: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The zig-zag varints that start at ``at`` (each must end before its ``limit``): (values, sizes)."""
    value = np.zeros(len(at), np.uint64)
    size = np.zeros(len(at), np.int64)
    live = np.arange(len(at))
    for j in range(_MAX_VARINT):
        pos = at[live] + j
        if (pos >= limit[live]).any():
            raise KafkaProtocolError("truncated or garbled record: a varint passes its record's end")
        b = u8[pos]
        value[live] |= (b & 0x7F).astype(np.uint64) << np.uint64(7 * j)
        size[live] += 1
        live = live[b >= _CONTINUATION]
        if not len(live):
            signed = (value >> np.uint64(1)).astype(np.int64) ^ -(value & np.uint64(1)).astype(np.int64)
            return signed, size
    raise KafkaProtocolError("a record varint is too long")


def _gather(u8: np.ndarray, at: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The spans ``u8[at[i]:at[i] + lengths[i]]`` (increasing, disjoint) copied into one buffer,
    and their offsets."""
    offsets = np.zeros(len(at) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if not offsets[-1]:
        return np.zeros(0, np.uint8), offsets
    width = int(lengths[0])
    if (lengths == width).all():
        rows = _strided_rows(u8, at, width)
        if rows is not None:
            return rows, offsets
    if offsets[-1] * 8 < len(u8):  # short spans (keys): an index per byte wanted
        return u8[np.arange(offsets[-1]) + np.repeat(at - offsets[:-1], lengths)], offsets
    edges = np.zeros(len(u8) + 1, np.int8)  # +1 where a span starts, -1 where it ends: a running sum marks them
    edges[at] = 1
    edges[at + lengths] -= 1
    return u8[np.cumsum(edges[:-1], dtype=np.int8).view(np.bool_)], offsets


def _strided_rows(u8: np.ndarray, at: np.ndarray, width: int) -> np.ndarray | None:
    """Spans of one width as a few strided copies (one per run of spans at one distance from each
    other), or None when the runs are too short for that to pay."""
    gaps = np.diff(at)
    cuts = np.flatnonzero(gaps[1:] != gaps[:-1]) + 2  # a run starts where the gap changes
    if len(cuts) * _SEGMENTS > len(at):
        return None
    bounds = [0, *cuts.tolist(), len(at)]
    parts = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        step = int(gaps[lo]) if hi - lo > 1 else width
        parts.append(np.lib.stride_tricks.as_strided(u8[int(at[lo]):], (hi - lo, width), (step, 1), writeable=False))
    return np.concatenate(parts).reshape(-1)


def _values(u8: np.ndarray, at: np.ndarray, lengths: np.ndarray) -> PackedBodies:
    data, offsets = _gather(u8, at, lengths)
    return PackedBodies(data, offsets)


def _keys(u8: np.ndarray, at: np.ndarray, lengths: np.ndarray) -> list[str] | None | bool:
    """The keys as text: None when every key is null, False when a key must take the per-record
    path (null mixed with non-null, empty, not UTF-8, or holding the store's separators)."""
    if (lengths == -1).all():
        return None
    if (lengths <= 0).any():
        return False
    data, offsets = _gather(u8, at, lengths)
    if (data <= 3).any():
        return False
    # the keys joined by \x03 (no key holds it, and an ASCII byte ends any UTF-8 sequence, so the
    # joined text decodes exactly when every key does): one decode, one split
    joined = np.empty(len(data) + len(lengths) - 1, np.uint8)
    seps = offsets[1:-1] + np.arange(len(lengths) - 1)
    mask = np.ones(len(joined), bool)
    mask[seps] = False
    joined[mask] = data
    joined[seps] = 3
    try:
        return joined.tobytes().decode("utf-8").split("\x03")
    except UnicodeDecodeError:
        return False
