"""Arrow columns straight from the CommitLog bytes a batch was parsed from.

No Python object per message: each variable-length column (bodies, keys,
user properties) is one zero-copy Arrow binary array over the whole buffer
whose offsets alternate ``start_0, end_0, start_1, end_1, ...``; its even
entries are the fields, the odd ones the bytes between them, and one
``take`` of the even entries copies the fields into a compact array (C++,
no Python per row).  Message ids are hex-encoded by numpy.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from store.readonly import RawColumns

__all__ = ["span_binary", "msg_id_column", "tag_column", "key_column", "topic_column"]

_HEX = np.frombuffer(b"0123456789ABCDEF", np.uint8)


def span_binary(buf: bytes, start: np.ndarray, end: np.ndarray) -> pa.BinaryArray:
    """``buf[start[i]:end[i]]`` for every i (spans in ascending, non-overlapping order)."""
    n = len(start)
    if n == 0:
        return pa.array([], pa.binary())
    bounds = np.empty(2 * n + 1, np.int64)
    bounds[0:-1:2] = start
    bounds[1::2] = end
    bounds[-1] = end[-1]
    if len(buf) >= 1 << 31:
        return pa.array([buf[s:e] for s, e in zip(start.tolist(), end.tolist())], pa.binary())
    spans = pa.BinaryArray.from_buffers(pa.binary(), 2 * n, [None, pa.py_buffer(bounds.astype(np.int32)),
                                                              pa.py_buffer(buf)])
    return spans.take(pa.array(np.arange(0, 2 * n, 2, dtype=np.int32)))  # type: ignore[return-value]


def msg_id_column(hosts: np.ndarray, phys: np.ndarray) -> pa.StringArray:
    """32 upper-case hex digits per record: STORE_HOST then the physical offset (codec.make_msg_id)."""
    n = len(phys)
    raw = np.empty((n, 16), np.uint8)
    raw[:, :8] = np.asarray(hosts, ">u8").reshape(n, 1).view(np.uint8)
    raw[:, 8:] = np.asarray(phys, ">u8").reshape(n, 1).view(np.uint8)
    digits = np.empty((n, 32), np.uint8)
    digits[:, 0::2] = _HEX[raw >> 4]
    digits[:, 1::2] = _HEX[raw & 15]
    offsets = np.arange(0, 32 * n + 1, 32, dtype=np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(digits.tobytes()))


def tag_column(raw: RawColumns) -> pa.Array:
    names = pa.array(raw.tag_names, pa.string())
    return names.take(pa.array(np.asarray(raw.tag_index, np.int32)))


def key_column(raw: RawColumns) -> pa.ListArray:
    """list<string>: one key where the record has one, an empty list where it has none."""
    has = np.asarray(raw.key_start) >= 0
    values = span_binary(raw.buf, raw.key_start[has], raw.key_end[has]).cast(pa.string())
    offsets = np.zeros(len(has) + 1, np.int32)
    np.cumsum(has, out=offsets[1:])
    return pa.ListArray.from_arrays(pa.array(offsets), values)


def topic_column(topics: list[str]) -> pa.Array:
    n = len(topics)
    if n and topics.count(topics[0]) == n:
        return pa.array(topics[:1], pa.string()).take(pa.array(np.zeros(n, np.int32)))
    return pa.array(topics, pa.string())
