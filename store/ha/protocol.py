"""The classic HA wire format and the master's frame cutter.

Two one-way streams on one TCP connection, all integers big-endian::

    slave -> master: an offset report, 8 bytes, nothing else
    +---------------------------+
    | max phy offset  int64     |   first report: where the slave's log ends;
    +---------------------------+   later ones: acks and heartbeats

    master -> slave: a frame, 12-byte header + body
    0               8          12                      12+size
    +---------------+----------+-----------------------+
    | phy offset    | size     | raw CommitLog bytes   |
    | int64         | int32    | [offset, offset+size) |
    +---------------+----------+-----------------------+
    size 0 = heartbeat; its offset is where the master's next bytes start.
    size < 0 = a quarantined record (see store.quarantine), -size bytes of body:
    +-------------+---------------------------+-------------------------+
    | meta length | meta: the master's        | the record's raw bytes  |
    | int32 = M   | QuarantinedRecord, JSON   | (damaged: not checked)  |
    +-------------+---------------------------+-------------------------+
    The slave writes the bytes as they are and quarantines the same span, so
    offsets stay identical on both and replication goes on after it.

The master cuts frames at record boundaries: whole records, at most
``transfer_batch_bytes`` of them, or one larger record alone; a frame never
crosses a segment.  A segment's BLANK travels as its own 8-byte frame and the
next frame starts at the next segment.  The slave still copes with records
split across frames (a raw byte stream, as RocketMQ cuts it): it writes whole
records only and keeps the partial tail until the rest arrives.
"""

from __future__ import annotations

import json
import socket
import struct
from dataclasses import dataclass

from .. import codec

__all__ = [
    "OFFSET",
    "FRAME_HEADER",
    "encode_frame",
    "encode_offset",
    "parse_frames",
    "whole_records",
    "first_record_size",
    "is_record_start",
    "FrameError",
    "QuarantinedSpan",
    "encode_quarantined",
    "no_delay",
]

OFFSET = struct.Struct(">q")
FRAME_HEADER = struct.Struct(">qi")
_SIZE_MAGIC = struct.Struct(">iI")
_PHY_AT = 28  # PHYSICAL_OFFSET inside a record (see store.codec)
_META_LEN = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class QuarantinedSpan:
    """A quarantined record as the master sends it: its QuarantinedRecord fields and its raw bytes."""

    meta: dict[str, object]
    data: bytes


class FrameError(ValueError):
    """Raised when bytes on the wire or in the log do not form what the protocol expects."""


def no_delay(sock: socket.socket) -> socket.socket:
    """Turn Nagle off on an HA connection (both ends; RocketMQ's HAConnection does too): a slave's
    8-byte acks and the master's heartbeats go out at once, not held back until the peer's delayed ACK."""
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def encode_offset(offset: int) -> bytes:
    return OFFSET.pack(offset)


def encode_frame(offset: int, body: bytes = b"") -> bytes:
    return FRAME_HEADER.pack(offset, len(body)) + body


def encode_quarantined(offset: int, meta: dict[str, object], data: bytes) -> bytes:
    raw = json.dumps(meta).encode()
    body = _META_LEN.pack(len(raw)) + raw + data
    return FRAME_HEADER.pack(offset, -len(body)) + body


def parse_frames(buf: bytes | bytearray, max_body: int) -> tuple[list[tuple[int, bytes | QuarantinedSpan]], int]:
    """Complete frames at the start of ``buf`` and how many bytes they take."""
    frames: list[tuple[int, bytes | QuarantinedSpan]] = []
    pos, n = 0, len(buf)
    while n - pos >= FRAME_HEADER.size:
        offset, size = FRAME_HEADER.unpack_from(buf, pos)
        if abs(size) > max_body + 4096 or (size > max_body) or offset < 0:
            raise FrameError(f"bad frame header: offset {offset}, size {size} (at most {max_body})")
        end = pos + FRAME_HEADER.size + abs(size)
        if end > n:
            break
        body = bytes(buf[pos + FRAME_HEADER.size : end])
        frames.append((offset, body if size >= 0 else _quarantined(body)))
        pos = end
    return frames, pos


def _quarantined(body: bytes) -> QuarantinedSpan:
    try:
        (m,) = _META_LEN.unpack_from(body, 0)
        meta = json.loads(body[4:4 + m])
    except (struct.error, ValueError) as exc:
        raise FrameError(f"bad quarantined-record frame: {exc}") from exc
    if not isinstance(meta, dict):
        raise FrameError("bad quarantined-record frame: its meta is not an object")
    return QuarantinedSpan(meta, body[4 + m:])


def whole_records(chunk: bytes) -> tuple[int, bool]:
    """Length of the whole records at the start of ``chunk``, and whether a BLANK follows them."""
    pos, n = 0, len(chunk)
    while pos + 8 <= n:
        total, magic = _SIZE_MAGIC.unpack_from(chunk, pos)
        if magic == codec.BLANK_MAGIC:
            return pos, True
        if magic != codec.MESSAGE_MAGIC or total < codec.HEADER_SIZE:
            raise FrameError(f"no record at log position +{pos}: magic {magic:#x}, size {total}")
        if pos + total > n:
            break
        pos += total
    return pos, False


def first_record_size(chunk: bytes) -> int:
    """TOTAL_SIZE of the record at the start of ``chunk`` (0 when fewer than 4 bytes)."""
    return int.from_bytes(chunk[:4], "big") if len(chunk) >= 4 else 0


def is_record_start(head: bytes, offset: int) -> bool:
    """Whether ``head`` (bytes read at log ``offset``) begins a record or a BLANK there."""
    if len(head) < 8:
        return False
    _total, magic = _SIZE_MAGIC.unpack_from(head, 0)
    if magic == codec.BLANK_MAGIC:
        return True
    if magic != codec.MESSAGE_MAGIC or len(head) < _PHY_AT + 8:
        return False
    return int.from_bytes(head[_PHY_AT : _PHY_AT + 8], "big", signed=True) == offset
