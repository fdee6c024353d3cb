"""The records of one RecordBatch v2 body as columns, with no Python object per record.

A record (records.py draws the batch) is ``len attrs ts_delta offset_delta klen key vlen value
hcount headers...``, every integer a zig-zag varint. Only the ``len`` varints chain the records
together, so they are walked first (one short step per record, or none when every record has the
same length); every other field is then read for all records at once, one numpy step per field:
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
    """Where each record's fields start (after its length varint) and where it ends."""
    length, size = _varints(u8, np.zeros(1, np.int64), np.array([len(body)], np.int64))
    stride = int(length[0]) + int(size[0])
    if stride * count == len(body) and int(length[0]) > 0:  # every record the same length?
        heads = np.arange(count, dtype=np.int64) * stride
        lengths, sizes = _varints(u8, heads, heads + stride)
        if (lengths == lengths[0]).all() and (sizes == sizes[0]).all():
            return heads + sizes, heads + stride
    return _walk(body, count)


def _walk(body: bytes, count: int) -> tuple[np.ndarray, np.ndarray]:
    """The record spans found one length varint at a time (records of several lengths)."""
    starts, ends = [0] * count, [0] * count
    pos, n = 0, len(body)
    try:
        for i in range(count):
            b = body[pos]
            if b < _CONTINUATION:
                length, pos = (b >> 1) ^ -(b & 1), pos + 1
            else:
                length, pos = _one_varint(body, pos)
            starts[i] = pos
            pos += length
            ends[i] = pos
            if length < 0 or pos > n:
                raise IndexError(f"record {i} of length {length} passes the batch's end")
    except IndexError as exc:
        raise KafkaProtocolError(f"truncated or garbled record: {exc}") from exc
    return np.array(starts, np.int64), np.array(ends, np.int64)


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
    """The spans ``u8[at[i]:at[i] + lengths[i]]`` copied into one buffer, and their offsets."""
    offsets = np.zeros(len(at) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    total = int(offsets[-1])
    if not total:
        return np.zeros(0, np.uint8), offsets
    width = int(lengths[0])
    if (lengths == width).all():  # one length: rows of a 2-D gather
        return u8[at[:, None] + np.arange(width)].reshape(-1), offsets
    return u8[np.arange(total) + np.repeat(at - offsets[:-1], lengths)], offsets


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
