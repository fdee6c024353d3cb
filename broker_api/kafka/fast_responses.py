"""ListOffsets and Fetch responses packed by hand: the same bytes kio writes, at a fraction of its cost.

Spark's Kafka source asks ListOffsets twice per executor poll (earliest and latest), so these
answers are the listener's most frequent; kio's generic writer spends ~100 us on each. The layout
(Kafka's ``ListOffsetsResponse.json``, versions 1-7; v6+ are flexible: compact arrays and
strings, an empty tagged-field section after each struct)::

    response header   int32 correlation_id [+ tagged fields (flexible)]
    v2+  int32 throttle_time_ms
    topics: array of
        string name
        partitions: array of
            int32 partition_index   int16 error_code   int64 timestamp   int64 offset
            v4+  int32 leader_epoch
            [tagged fields]
        [tagged fields]
    [tagged fields]

A Fetch answer (``FetchResponse.json``, versions 4-12; v12 is flexible) carries the pages' record
batches, up to ``max_bytes`` (50 MiB) of them: kio copies them three times and spends ~1 ms per MiB.
:func:`fetch_response` packs the small fields and hands the record buffers on as they are (the
listener writes the pieces one after another, no join)::

    v4+  int32 throttle_time_ms   v7+  int16 error_code  int32 session_id
    responses: array of
        string topic
        partitions: array of
            int32 partition_index   int16 error_code   int64 high_watermark   int64 last_stable_offset
            v5+  int64 log_start_offset
            aborted_transactions: nullable array of (int64 producer_id, int64 first_offset [tags])
            v11+ int32 preferred_read_replica
            records: nullable bytes
            [tagged fields]
        [tagged fields]
    [tagged fields]

tests/kafka/test_fast_responses.py checks every version of both against kio's encoder.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sized
from typing import Any

from .records import uvarint

__all__ = ["FAST_RESPONSES", "fetch_response", "list_offsets_response"]

_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_PART = struct.Struct(">ihqq")
_FLEXIBLE_FROM = 6
_FETCH_FLEXIBLE_FROM = 12
_FETCH_PART = struct.Struct(">ihqq")  # partition_index, error_code, high_watermark, last_stable_offset
_I64 = struct.Struct(">q")
_ABORTED = struct.Struct(">qq")
_SEPARATE = 64 << 10  # a records buffer at least this long is written as its own piece, not copied
_NO_TAGS = b"\0"


def _count(n: int, flexible: bool) -> bytes:
    return uvarint(n + 1) if flexible else _I32.pack(n)


def _length(items: Sized | None, flexible: bool) -> bytes:
    """The length of a nullable array or bytes field (null: -1, or 0 as a compact length)."""
    if items is None:
        return b"\0" if flexible else _I32.pack(-1)
    return _count(len(items), flexible)


def _string(text: str, flexible: bool) -> bytes:
    raw = text.encode("utf-8")
    return (uvarint(len(raw) + 1) if flexible else _I16.pack(len(raw))) + raw


def list_offsets_response(version: int, correlation_id: int, body: dict[str, Any]) -> bytes:
    """The whole frame (size prefix included) of a ListOffsets v1-v7 answer built as handlers.py does."""
    flexible = version >= _FLEXIBLE_FROM
    tags = _NO_TAGS if flexible else b""
    out = [_I32.pack(correlation_id), tags]
    if version >= 2:
        out.append(_I32.pack(body["throttle_time"]))
    out.append(_count(len(body["topics"]), flexible))
    for topic in body["topics"]:
        out += [_string(topic["name"], flexible), _count(len(topic["partitions"]), flexible)]
        for p in topic["partitions"]:
            out.append(_PART.pack(p["partition_index"], int(p["error_code"]), p["timestamp"], p["offset"]))
            if version >= 4:
                out.append(_I32.pack(p["leader_epoch"]))
            out.append(tags)
        out.append(tags)
    out.append(tags)
    data = b"".join(out)
    return _I32.pack(len(data)) + data


def fetch_response(version: int, correlation_id: int, body: dict[str, Any]) -> list[bytes]:
    """The frame of a Fetch v4-v12 answer built as fetch.py does, as pieces to write in order (the
    first holds the size prefix; large record buffers are pieces of their own, not copied)."""
    flexible = version >= _FETCH_FLEXIBLE_FROM
    tags = _NO_TAGS if flexible else b""
    pieces: list[bytes] = []
    head = bytearray(_I32.pack(correlation_id) + tags)
    head += _I32.pack(body["throttle_time"])
    if version >= 7:
        head += _I16.pack(int(body["error_code"])) + _I32.pack(body["session_id"])
    head += _count(len(body["responses"]), flexible)
    for topic in body["responses"]:
        head += _string(topic["topic"], flexible) + _count(len(topic["partitions"]), flexible)
        for p in topic["partitions"]:
            head += _FETCH_PART.pack(p["partition_index"], int(p["error_code"]), p["high_watermark"],
                                     p["last_stable_offset"])
            if version >= 5:
                head += _I64.pack(p["log_start_offset"])
            aborted = p["aborted_transactions"]
            head += _length(aborted, flexible)
            for a in aborted or ():
                head += _ABORTED.pack(a["producer_id"], a["first_offset"]) + tags
            if version >= 11:
                head += _I32.pack(p["preferred_read_replica"])
            records = p["records"]
            head += _length(records, flexible)
            if records is not None:
                if len(records) >= _SEPARATE:
                    pieces += [bytes(head), records]
                    head = bytearray()
                else:
                    head += records
            head += tags
        head += tags
    head += tags
    pieces.append(bytes(head))
    size = sum(map(len, pieces))
    pieces[0] = _I32.pack(size) + pieces[0]
    return pieces


FAST_RESPONSES: dict[int, Callable[[int, int, dict[str, Any]], bytes | list[bytes]]] = {
    1: fetch_response, 2: list_offsets_response}
