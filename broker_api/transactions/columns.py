"""The exactly-once sink's commit by columns: staged rows appended with no object per row.

The Spark sink stages Arrow bodies unparsed (see :mod:`tx_sinks`). At commit,
a body whose shape the store's column put takes (a ``body`` column, no
per-row properties, delay or timer, one tag for every row, keys absent or
one per row) becomes a :class:`ColumnFrame`: its bodies, keys and tag, and the
queue of every row, chosen once, as a produce chooses them. The frames are
written to the spool (temp file, fsync, rename) before the commit is decided,
so a publish after a crash appends exactly the rows and queues the commit
chose, in the same order.

Publishing appends each frame queue by queue (ascending queue id, rows in
their order) with the ``sparkmq.tx_id`` property and the TRANSACTION_COMMIT
sys flag. Recovery counts the rows a crash already appended and skips that
many in the same order. Any other body takes the per-message path.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from store import MessageStore, SysFlag
from store.packed import PackedBodies

__all__ = ["ColumnFrame", "ColumnParser", "publish_frames", "read_frames", "write_frames"]

_FRAME = struct.Struct("<I")
_COMMIT = int(SysFlag.TRANSACTION_COMMIT)
_SCHEMA_KEYS = (b"sparkmq.topic", b"sparkmq.tags")


@dataclass(slots=True)
class ColumnFrame:
    """One staged body as columns, with every row's queue decided."""

    topic: str
    bodies: PackedBodies
    keys: list[str] | None  # one per row, or None
    tags: str | None  # the same for every row
    queues: np.ndarray  # int64, one per row

    def __len__(self) -> int:
        return len(self.bodies)


ColumnParser = Callable[[str, bytes], "ColumnFrame | None"]  # (topic, Arrow body) -> frame, or None


def _to_ipc(frame: ColumnFrame) -> bytes:
    bodies = pa.Array.from_buffers(pa.binary(), len(frame), [
        None, pa.py_buffer(frame.bodies.offsets.astype(np.int32)), pa.py_buffer(frame.bodies.data)])
    columns = {"body": bodies, "queue_id": pa.array(frame.queues, pa.int32())}
    if frame.keys is not None:
        columns["keys"] = pa.array(frame.keys, pa.string())
    meta = {_SCHEMA_KEYS[0]: frame.topic.encode(), _SCHEMA_KEYS[1]: (frame.tags or "").encode()}
    table = pa.table(columns).replace_schema_metadata(meta)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue())


def _from_ipc(raw: bytes) -> ColumnFrame:
    table = pa.ipc.open_stream(pa.py_buffer(raw)).read_all()
    meta = table.schema.metadata or {}
    body = table.column("body").combine_chunks()
    _, offsets, data = body.buffers()
    offs = np.frombuffer(offsets, np.int32)[body.offset:body.offset + len(body) + 1].astype(np.int64)
    keys = table.column("keys").to_pylist() if "keys" in table.column_names else None
    tags = meta.get(_SCHEMA_KEYS[1], b"").decode() or None
    return ColumnFrame(meta[_SCHEMA_KEYS[0]].decode(), PackedBodies(np.frombuffer(data, np.uint8), offs), keys, tags,
                       table.column("queue_id").to_numpy().astype(np.int64))


def write_frames(path: Path, frames: list[ColumnFrame]) -> None:
    """Write ``frames`` to ``path`` whole or not at all: temp file, fsync, rename."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as fh:
        for frame in frames:
            data = _to_ipc(frame)
            fh.write(_FRAME.pack(len(data)) + data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def read_frames(path: Path) -> list[ColumnFrame]:
    """The frames :func:`write_frames` wrote (the file is never torn: it was renamed into place)."""
    raw = path.read_bytes()
    frames, pos = [], 0
    while pos + _FRAME.size <= len(raw):
        (size,) = _FRAME.unpack_from(raw, pos)
        frames.append(_from_ipc(raw[pos + _FRAME.size:pos + _FRAME.size + size]))
        pos += _FRAME.size + size
    return frames


def publish_frames(store: MessageStore, frames: list[ColumnFrame], properties: dict[str, str], skip: int = 0) -> int:
    """Append the rows of ``frames`` with ``properties`` and the commit sys flag, leaving out the
    first ``skip`` rows in publish order (appended before a crash); returns the rows appended."""
    appended = 0
    for frame in frames:
        groups = []
        for q in np.unique(frame.queues).tolist():
            rows = np.flatnonzero(frame.queues == q)
            if skip >= len(rows):
                skip -= len(rows)
                continue
            rows, skip = rows[skip:], 0
            whole = len(rows) == len(frame)
            keys = frame.keys if whole or frame.keys is None else [frame.keys[i] for i in rows.tolist()]
            groups.append((int(q), frame.bodies if whole else frame.bodies.take(rows), keys))
            appended += len(rows)
        if groups:
            store.put_column_groups(frame.topic, groups, frame.tags, (properties, _COMMIT))
    return appended
