"""Kafka RecordBatch v2 (magic 2): decode what producers send, encode what Fetch returns.

A batch (Kafka docs, implementation §5.3), big-endian::

    +0   int64  base_offset         +8   int32 batch_length (bytes after this field)
    +12  int32  partition_leader_epoch                     +16  int8  magic = 2
    +17  uint32 crc  CRC-32C (Castagnoli) of bytes +21 .. end
    +21  int16  attributes  bits 0-2 codec (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd), bit 3 timestamp
                            type (1 = LogAppendTime), bit 4 transactional, bit 5 control batch
    +23  int32  last_offset_delta   +27 int64 base_timestamp   +35 int64 max_timestamp
    +43  int64  producer_id         +51 int16 producer_epoch   +53 int32 base_sequence
    +57  int32  records_count       +61 records (compressed as a whole when the codec says so)

A record: varint length, int8 attributes, varlong timestamp_delta, varint offset_delta, varint key
length (-1 = null) + key, varint value length + value, varint header count, then per header varint
key length + utf-8 key, varint value length + value. Record varints are zig-zag signed.
"""

from __future__ import annotations

import gzip
import struct
from dataclasses import dataclass

import cramjam
import crc32c

from .codec import KafkaProtocolError

__all__ = ["Batch", "Record", "decode_batches", "BatchWriter", "HEADER", "LOG_APPEND_TIME"]

HEADER = struct.Struct(">qiibIhiqqqhii")
LOG_APPEND_TIME = 0x08  # the attributes bit: record times are the broker's append times
_CRC_FROM = 21
_XERIAL = b"\x82SNAPPY\x00"


@dataclass(slots=True)
class Record:
    """One decoded record (key/value None when null)."""

    offset_delta: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


@dataclass(slots=True)
class Batch:
    """One checked batch: the fields the broker acts on, and its uncompressed records' bytes
    (read as :class:`Record` objects by ``records``, or by columns: record_columns.py)."""

    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    count: int
    body: bytes

    @property
    def records(self) -> list[Record]:
        """The records, one object each; KafkaProtocolError when they are truncated or garbled."""
        return _decode_records(self.body, self.count, self.base_timestamp)

    @property
    def transactional(self) -> bool:
        return bool(self.attributes & 0x10)

    @property
    def control(self) -> bool:
        return bool(self.attributes & 0x20)


def decode_batches(data: bytes) -> list[Batch]:
    """Every batch in a produce request's records field, its CRC-32C checked and its records
    decompressed (not yet decoded); KafkaProtocolError on a bad one."""
    out, pos = [], 0
    view = memoryview(data)
    while pos < len(data):
        if len(data) - pos < HEADER.size:
            raise KafkaProtocolError(f"a record batch of {len(data) - pos} bytes is shorter than its header")
        f = HEADER.unpack_from(data, pos)
        end = pos + 12 + f[1]
        if f[3] != 2:
            raise KafkaProtocolError(f"record batch magic {f[3]} is not supported (only v2, Kafka 0.11+)")
        if end > len(data) or f[1] < HEADER.size - 12:
            raise KafkaProtocolError("a record batch is longer than the request")
        if crc32c.crc32c(view[pos + _CRC_FROM:end]) != f[4]:
            raise KafkaProtocolError("record batch CRC-32C does not match (CORRUPT_MESSAGE)")
        body = _decompress(f[5] & 0x7, bytes(view[pos + HEADER.size:end]))
        out.append(Batch(f[5], f[6], f[7], f[8], f[9], f[10], f[11], f[12], body))
        pos = end
    return out


def _decompress(codec: int, body: bytes) -> bytes:
    try:
        if codec == 0:
            return body
        if codec == 1:
            return gzip.decompress(body)
        if codec == 2:
            return _snappy(body)
        if codec == 3:
            return bytes(cramjam.lz4.decompress(body))
        if codec == 4:
            return bytes(cramjam.zstd.decompress(body))
    except Exception as exc:  # every codec raises its own error class
        raise KafkaProtocolError(f"record batch does not decompress (codec {codec}): {exc}") from exc
    raise KafkaProtocolError(f"unknown compression codec {codec}")


def _snappy(body: bytes) -> bytes:
    """Raw snappy (librdkafka) or xerial's framing (the Java client): 16-byte header, [int32 len, block]*."""
    if not body.startswith(_XERIAL):
        return bytes(cramjam.snappy.decompress_raw(body))
    parts, pos = [], 16
    while pos < len(body):
        (n,) = struct.unpack_from(">i", body, pos)
        parts.append(bytes(cramjam.snappy.decompress_raw(body[pos + 4:pos + 4 + n])))
        pos += 4 + n
    return b"".join(parts)


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    """A zig-zag varint at ``pos``: (value, next position)."""
    shift = result = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise KafkaProtocolError("a record varint is too long")


def _decode_records(buf: bytes, count: int, base_ts: int) -> list[Record]:
    """The records of an uncompressed body. Varints of one or two bytes (lengths up to 8 KiB,
    small deltas) are read inline: a call per varint was most of a produce's time."""
    out, pos, vi = [], 0, _varint
    try:
        for _ in range(count):
            b = buf[pos]
            if b < 0x80:
                length, pos = (b >> 1) ^ -(b & 1), pos + 1
            elif buf[pos + 1] < 0x80:
                r = (b & 0x7F) | (buf[pos + 1] << 7)
                length, pos = (r >> 1) ^ -(r & 1), pos + 2
            else:
                length, pos = vi(buf, pos)
            end = pos + length
            pos += 1  # attributes
            b = buf[pos]
            if b < 0x80:
                ts, pos = (b >> 1) ^ -(b & 1), pos + 1
            else:
                ts, pos = vi(buf, pos)
            b = buf[pos]
            if b < 0x80:
                delta, pos = (b >> 1) ^ -(b & 1), pos + 1
            else:
                delta, pos = vi(buf, pos)
            b = buf[pos]
            if b < 0x80:
                klen, pos = (b >> 1) ^ -(b & 1), pos + 1
            else:
                klen, pos = vi(buf, pos)
            key = None if klen < 0 else buf[pos:pos + klen]
            pos += max(klen, 0)
            b = buf[pos]
            if b < 0x80:
                vlen, pos = (b >> 1) ^ -(b & 1), pos + 1
            elif buf[pos + 1] < 0x80:
                r = (b & 0x7F) | (buf[pos + 1] << 7)
                vlen, pos = (r >> 1) ^ -(r & 1), pos + 2
            else:
                vlen, pos = vi(buf, pos)
            value = None if vlen < 0 else buf[pos:pos + vlen]
            pos += max(vlen, 0)
            headers: list[tuple[str, bytes | None]] = []
            if buf[pos]:  # a header count other than zero
                pos = _headers(buf, pos, headers)
            else:
                pos += 1
            if pos != end:
                raise KafkaProtocolError("a record's length does not match its fields")
            out.append(Record(delta, base_ts + ts, key, value, headers))
    except (IndexError, UnicodeDecodeError) as exc:
        raise KafkaProtocolError(f"truncated or garbled record: {exc}") from exc
    return out


def _headers(buf: bytes, pos: int, headers: list[tuple[str, bytes | None]]) -> int:
    nh, pos = _varint(buf, pos)
    for _ in range(nh):
        hk, pos = _varint(buf, pos)
        name = buf[pos:pos + hk].decode()
        pos += hk
        hv, pos = _varint(buf, pos)
        headers.append((name, None if hv < 0 else buf[pos:pos + hv]))
        pos += max(hv, 0)
    return pos


def uvarint(value: int) -> bytes:
    """``value`` (>= 0) as an unsigned varint."""
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def zigzag(value: int) -> bytes:
    """``value`` as a zig-zag varint."""
    return uvarint((value << 1) ^ (value >> 63))


_SMALL = [zigzag(i) for i in range(-1, 4096)]


def _zz(value: int) -> bytes:
    return _SMALL[value + 1] if -1 <= value < 4095 else zigzag(value)


class BatchWriter:
    """Builds one uncompressed batch record by record (what Fetch returns)."""

    def __init__(self, base_offset: int, base_timestamp: int) -> None:
        self.base_offset = base_offset
        self.base_timestamp = base_timestamp
        self.max_timestamp = base_timestamp
        self.last_delta = 0
        self.count = 0
        self.size = HEADER.size  # the batch's bytes so far
        self._parts: list[bytes] = []

    def add(self, offset: int, timestamp: int, key: bytes | None, value: bytes,
            headers: list[tuple[bytes, bytes | None]], limit: int | None = None) -> bool:
        """Append one record; with ``limit``, only if the batch stays within ``limit`` bytes (the
        first record always goes in): False when it did not."""
        delta = offset - self.base_offset
        parts = [b"\0", _zz(timestamp - self.base_timestamp), _zz(delta)]
        parts += [b"\x01"] if key is None else [_zz(len(key)), key]
        parts += [_zz(len(value)), value, _zz(len(headers))]
        for name, hv in headers:
            parts += [_zz(len(name)), name]
            parts += [b"\x01"] if hv is None else [_zz(len(hv)), hv]
        rec = b"".join(parts)
        head = _zz(len(rec))
        if limit is not None and self.count and self.size + len(head) + len(rec) > limit:
            return False
        self._parts.append(head)
        self._parts.append(rec)
        self.size += len(head) + len(rec)
        self.last_delta = delta
        self.count += 1
        if timestamp > self.max_timestamp:
            self.max_timestamp = timestamp
        return True

    def finish(self, leader_epoch: int = 0, producer: tuple[int, int, int] = (-1, -1, -1),
               attributes: int = 0) -> bytes:
        """The batch bytes with its length and CRC-32C; ``producer`` = (id, epoch, base sequence);
        ``attributes`` LOG_APPEND_TIME when the timestamps are the broker's append times."""
        body = b"".join(self._parts)
        head = HEADER.pack(self.base_offset, HEADER.size - 12 + len(body), leader_epoch, 2, 0, attributes,
                           self.last_delta, self.base_timestamp, self.max_timestamp, *producer, self.count)
        crc = crc32c.crc32c(body, crc32c.crc32c(head[_CRC_FROM:]))
        return head[:17] + struct.pack(">I", crc) + head[_CRC_FROM:] + body
