"""Recovery's way past a damaged record: find where records start again.

A record start is recognised by its own bytes, never by file sizes::

    message:  TOTAL_SIZE >= 91 | MESSAGE_MAGIC | ... | PHYSICAL_OFFSET (at 28) = its own log offset
    filler:   TOTAL_SIZE = the rest of the segment | BLANK_MAGIC

A stray position passes this only if 12 given bytes happen to match, so the
first start after a damaged record is where the next record begins (its own
checks, CRC included, come when recovery scans it).  The damaged record's
TOTAL_SIZE is tried first; when it does not lead to a start, the segment is
searched for the magic codes.  :func:`describe` reads what the damaged
record's header still tells (topic, queue, queue offset) for the quarantine.
"""

from __future__ import annotations

import struct

from . import codec
from .mapped_file import MappedFile
from .quarantine import QuarantinedRecord

__all__ = ["describe", "next_start", "segment_has_start"]

_HS = codec.HEADER_SIZE
_MIN_RECORD = _HS + 3
_SIZE_MAGIC = struct.Struct(">iI")
_PHY = struct.Struct(">q")
_MAGICS = (codec.MESSAGE_MAGIC.to_bytes(4, "big"), codec.BLANK_MAGIC.to_bytes(4, "big"))
_CHUNK = 16 << 20
_TOPIC_READ = 1 << 20  # describe() reads at most this much of a damaged span


def _is_start(buf: bytes, at: int, pos: int, seg: MappedFile) -> bool:
    """Whether a record (or the segment's BLANK filler) starts at segment position ``pos``; ``buf``
    holds the segment's bytes from position ``at`` (and 36 bytes past ``pos`` where it can)."""
    i = pos - at
    if i < 0 or i + 8 > len(buf):
        return False
    total, magic = _SIZE_MAGIC.unpack_from(buf, i)
    if magic == codec.BLANK_MAGIC:
        return total == seg.size - pos
    if magic != codec.MESSAGE_MAGIC or total < _MIN_RECORD or pos + total > seg.size or i + 36 > len(buf):
        return False
    return bool(_PHY.unpack_from(buf, i + 28)[0] == seg.start_offset + pos)


def next_start(seg: MappedFile, pos: int) -> int | None:
    """The first record start after the damaged record at segment position ``pos``, or None."""
    head = seg.read(pos, 8)
    if len(head) == 8:
        total = _SIZE_MAGIC.unpack_from(head)[0]
        if _MIN_RECORD <= total <= seg.size - pos and _is_start(seg.read(pos + total, 36), pos + total,
                                                                pos + total, seg):
            return pos + total
    at: int | None = pos + 1
    while at is not None and at < seg.size:
        data = seg.next_data(at)  # holes (never written) hold no record: not read at all
        if data is None:
            return None
        at = max(at, data - data % 4096 - 64)  # a record may start just before the data region
        buf = seg.read(at, _CHUNK + 36)
        found = [p for p in (_first_match(buf, m, at, seg) for m in _MAGICS) if p is not None]
        if found:
            return min(found)
        at += _CHUNK
    return None


def _first_match(buf: bytes, magic: bytes, at: int, seg: MappedFile) -> int | None:
    """The first start in ``buf`` (segment bytes from ``at``) whose magic code is ``magic``."""
    i = buf.find(magic, 4)
    while 0 <= i < _CHUNK + 4:
        if _is_start(buf, at, at + i - 4, seg):
            return at + i - 4
        i = buf.find(magic, i + 1)
    return None


def segment_has_start(seg: MappedFile) -> bool:
    """Whether the segment holds any record start (its first position counts)."""
    return _is_start(seg.read(0, 36), 0, 0, seg) or next_start(seg, 0) is not None


def describe(seg: MappedFile, pos: int, size: int, reason: str) -> QuarantinedRecord:
    """The quarantine entry for the damaged span ``[pos, pos + size)`` of ``seg``, with the topic, queue and
    queue offset its header names when the header is a message's at this very offset."""
    phy = seg.start_offset + pos
    buf = seg.read(pos, min(size, _TOPIC_READ))
    if len(buf) < _HS:
        return QuarantinedRecord(phy, size, reason)
    (_total, magic, _crc, qid, _flag, qoff, claimed, *_rest, blen) = codec.HEADER.unpack_from(buf, 0)
    if magic != codec.MESSAGE_MAGIC or claimed != phy or qid < 0 or qoff < 0:
        return QuarantinedRecord(phy, size, reason)
    t_at = _HS + blen
    if blen < 0 or t_at + 1 > len(buf) or t_at + 1 + buf[t_at] > len(buf):
        return QuarantinedRecord(phy, size, reason, None, qid, qoff)
    try:
        topic = buf[t_at + 1:t_at + 1 + buf[t_at]].decode("utf-8")
    except UnicodeDecodeError:
        return QuarantinedRecord(phy, size, reason, None, qid, qoff)
    if not topic or any(c in topic for c in "\x00\x01\x02\x03/"):
        return QuarantinedRecord(phy, size, reason, None, qid, qoff)
    return QuarantinedRecord(phy, size, reason, topic, qid, qoff)
