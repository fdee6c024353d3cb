"""ListOffsets responses packed by hand: the same bytes kio writes, at a fraction of its cost.

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

tests/kafka/test_fast_responses.py checks every version against kio's encoder.
"""

from __future__ import annotations

import struct
from typing import Any

from .records import uvarint

__all__ = ["FAST_RESPONSES", "list_offsets_response"]

_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_PART = struct.Struct(">ihqq")
_FLEXIBLE_FROM = 6
_NO_TAGS = b"\0"


def _count(n: int, flexible: bool) -> bytes:
    return uvarint(n + 1) if flexible else _I32.pack(n)


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


FAST_RESPONSES = {2: list_offsets_response}
