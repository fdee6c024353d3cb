"""Arrow pull pages from flat buffers (store.PullColumns): every column built per page.

A page's bodies and properties arrive as two byte buffers with offsets; the
properties are the codec's ``name\\x01value\\x02`` pairs, TAGS and KEYS first::

    properties  TAGS\x01a\x02KEYS\x01k1\x03k2\x02color\x01red\x02 | (next row) ...
    pairs       [TAGS=a] [KEYS=k1\x03k2] [color=red] ...   every \x01 and \x02, found with numpy
    columns     tags "a"   keys ["k1", "k2"]   properties {color: red}

No Python runs per message: the buffers are cut with numpy index arithmetic
and handed to Arrow as offsets, the keys are split by pyarrow compute, and
the message ids are hex-encoded in one call. A pull may name the ``fields``
it wants (the Spark source leaves out what its schema does not show); only
those are built and sent.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from store import PullColumns

from ..errors import BadRequestError
from .wire import PULL_SCHEMA, pull_schema

__all__ = ["columns_to_arrow", "parse_fields"]

_TS = pa.timestamp("ms", tz="UTC")
_PROPS = pa.map_(pa.string(), pa.string())


def _ranges(u8: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The byte ranges ``[start, start+length)`` back to back, and their int32 offsets (n + 1)."""
    offsets = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    idx = np.repeat(starts - offsets[:-1], lengths) + np.arange(int(offsets[-1]))
    return u8[idx], offsets.astype(np.int32)


def _strings(typ: pa.DataType, data: Any, offsets: np.ndarray, valid: np.ndarray | None = None) -> pa.Array:
    """A string/binary array over ``data`` (bytes or uint8) with ``offsets``; null where not ``valid``."""
    mask = None if valid is None or valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(typ, len(offsets) - 1, [mask, pa.py_buffer(offsets), pa.py_buffer(data)])


def _per_row(u8: np.ndarray, rows: np.ndarray, starts: np.ndarray, lengths: np.ndarray, n: int) -> pa.Array:
    """One string per row from the ranges of pairs at ``rows`` (at most one each); null elsewhere."""
    data, _ = _ranges(u8, starts, lengths)
    per_row = np.zeros(n, np.int64)
    per_row[rows] = lengths
    offsets = np.concatenate([[0], np.cumsum(per_row)]).astype(np.int32)
    valid = np.zeros(n, bool)
    valid[rows] = True
    return _strings(pa.string(), data, offsets, valid)


_TAGS, _KEYS = (int.from_bytes(name, "little") for name in (b"TAGS", b"KEYS"))


def _property_columns(raw: np.ndarray, offsets: np.ndarray) -> tuple[pa.Array, pa.Array, pa.Array]:
    """keys, tags and properties from the codec's ``name\\x01value\\x02`` blobs, per page (no per-row loop)."""
    n, u8 = len(offsets) - 1, raw
    ends, seps = np.flatnonzero(u8 == 2), np.flatnonzero(u8 == 1)
    starts = np.concatenate([[0], ends[:-1] + 1]).astype(np.int64) if len(ends) else ends
    rows = np.searchsorted(offsets, starts, side="right") - 1
    name4 = u8[np.minimum(starts[:, None] + np.arange(4), max(0, len(u8) - 1))].copy().view("<u4").ravel()
    short = (seps - starts) == 4
    is_tags, is_keys = short & (name4 == _TAGS), short & (name4 == _KEYS)
    other = ~(is_tags | is_keys)
    tags = _per_row(u8, rows[is_tags], seps[is_tags] + 1, ends[is_tags] - seps[is_tags] - 1, n)
    joined = _per_row(u8, rows[is_keys], seps[is_keys] + 1, ends[is_keys] - seps[is_keys] - 1, n)
    split = pc.split_pattern(joined.drop_null(), "\x03")
    counts = np.zeros(n, np.int64)
    counts[rows[is_keys]] = pc.list_value_length(split).to_numpy(zero_copy_only=False)
    key_offsets = pa.array(np.concatenate([[0], np.cumsum(counts)]).astype(np.int32))
    keys = pa.ListArray.from_arrays(key_offsets, split.flatten().cast(pa.string()), type=pa.list_(pa.string()))
    names = _strings(pa.string(), *_ranges(u8, starts[other], seps[other] - starts[other]))
    values = _strings(pa.string(), *_ranges(u8, seps[other] + 1, ends[other] - seps[other] - 1))
    per_row = np.bincount(rows[other], minlength=n)
    map_offsets = pa.array(np.concatenate([[0], np.cumsum(per_row)]).astype(np.int32))
    return keys, tags, pa.MapArray.from_arrays(map_offsets, names, values, type=_PROPS)


def parse_fields(raw: str | None) -> frozenset[str] | None:
    """An Arrow pull's ``fields=offset,body,...``: the columns to send (all when absent)."""
    if raw is None:
        return None
    names = frozenset(f.strip() for f in raw.split(",") if f.strip())
    unknown = sorted(names - set(PULL_SCHEMA.names))
    if unknown or not names:
        raise BadRequestError(f"fields={raw!r} names no column or unknown ones {unknown}; "
                              f"choose from {', '.join(PULL_SCHEMA.names)}")
    return names


def columns_to_arrow(page: PullColumns, fields: frozenset[str] | None = None) -> memoryview:
    """One Arrow IPC stream with :func:`pull_schema` ``(fields)`` from flat page buffers (a view of
    Arrow's buffer: the response is written from it without a copy)."""
    schema = pull_schema(fields)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema) as writer:
        if len(page):
            writer.write_batch(_page_batch(page, schema))
    return memoryview(sink.getvalue())


def _no_properties(n: int) -> tuple[pa.Array, pa.Array, pa.Array]:
    """keys, tags and properties of ``n`` rows that carry no properties (a bulk produce's page):
    empty key lists, null tags, empty maps, from constant buffers."""
    zeros = pa.py_buffer(np.zeros(n + 1, np.int32))
    keys = pa.ListArray.from_buffers(pa.list_(pa.string()), n, [None, zeros], children=[pa.array([], pa.string())])
    tags = pa.nulls(n, pa.string())
    props = pa.MapArray.from_arrays(pa.Array.from_buffers(pa.int32(), n + 1, [None, zeros]),
                                    pa.array([], pa.string()), pa.array([], pa.string()), type=_PROPS)
    return keys, tags, props


def _page_batch(page: PullColumns, schema: pa.Schema) -> pa.RecordBatch:
    n, topic = len(page), page.topic.encode()
    parsed: list[tuple[pa.Array, pa.Array, pa.Array]] = []

    def props(i: int) -> pa.Array:
        if not parsed:
            parsed.append(_property_columns(page.properties, page.property_offsets) if len(page.properties)
                          else _no_properties(n))
        return parsed[0][i]

    def msg_ids() -> pa.Array:
        ids = np.empty((n, 2), ">u8")
        ids[:, 0], ids[:, 1] = page.store_hosts, page.phy_offsets
        return _strings(pa.string(), ids.tobytes().hex().upper().encode(),
                        np.arange(0, 32 * n + 1, 32, dtype=np.int32))

    build: dict[str, Callable[[], pa.Array]] = {
        "topic": lambda: _strings(pa.string(), topic * n,
                                  np.arange(0, (n + 1) * len(topic), len(topic), dtype=np.int32)),
        "queue_id": lambda: pa.array(np.full(n, page.queue_id, np.int32)),
        "offset": lambda: pa.array(page.queue_offsets),
        "msg_id": msg_ids,
        "keys": lambda: props(0),
        "tags": lambda: props(1),
        "properties": lambda: props(2),
        "body": lambda: _strings(pa.binary(), page.bodies, page.body_offsets),
        "born_timestamp": lambda: pa.array(page.born_timestamps).view(_TS),
        "store_timestamp": lambda: pa.array(page.store_timestamps).view(_TS),
    }
    assert set(build) == set(PULL_SCHEMA.names)
    return pa.RecordBatch.from_arrays([build[name]() for name in schema.names], schema=schema)
