"""CommitLog record codec: bytes only, no I/O.

Every record uses RocketMQ's CommitLog layout (v1), big-endian::

    offset  size  field
    ------  ----  ------------------------------------------------------
         0     4  TOTAL_SIZE        whole record, this field included
         4     4  MAGIC             MESSAGE_MAGIC, or BLANK_MAGIC for the
                                    filler at the end of a segment
         8     4  BODY_CRC          zlib.crc32(body)
        12     4  QUEUE_ID
        16     4  FLAG              user flag
        20     8  QUEUE_OFFSET      index of the unit in its ConsumeQueue
        28     8  PHYSICAL_OFFSET   where this record starts in the log
        36     4  SYS_FLAG          see message.SysFlag
        40     8  BORN_TIMESTAMP    ms since the epoch, producer clock
        48     8  BORN_HOST         IPv4 (4 bytes) + port (4 bytes)
        56     8  STORE_TIMESTAMP   ms since the epoch, broker clock
        64     8  STORE_HOST        IPv4 (4 bytes) + port (4 bytes)
        72     4  RECONSUME_TIMES
        76     8  PREPARED_TX_OFFSET
        84     4  BODY_LENGTH = B
        88     B  BODY
      88+B     1  TOPIC_LENGTH = T
      89+B     T  TOPIC             utf-8
    89+B+T     2  PROPERTIES_LENGTH = P
    91+B+T     P  PROPERTIES        name \\x01 value \\x02 ... WCRC \\x01 8 hex digits \\x02

The closing ``WCRC`` pair is the whole-record CRC (:mod:`.wcrc`, sys flag
bit 16): every byte of the record is checked, not only the body.

A BLANK record is just TOTAL_SIZE + BLANK_MAGIC (8 bytes) followed by
whatever the segment held; it tells readers to jump to the next segment.

Tags and keys travel as reserved properties ``TAGS`` and ``KEYS`` (keys are
joined with \\x03), written first so that parsing them is cheap.

Message id = STORE_HOST (8 bytes) + PHYSICAL_OFFSET (8 bytes) as 32 hex
characters, so a lookup by id is a direct read.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from itertools import chain
from typing import Mapping, Sequence

import numpy as np

from . import wcrc
from .crc import crc32
from .dispatch import decode_properties
from .ids import decode_host, encode_host, make_msg_id, make_msg_ids, parse_msg_id
from .errors import CorruptRecordError, InvalidMessageError, MessageTooLargeError
from .message import Message, StoredMessage

__all__ = [
    "HEADER",
    "HEADER_DTYPE",
    "HEADER_SIZE",
    "MESSAGE_MAGIC",
    "BLANK_MAGIC",
    "MIN_BLANK",
    "PreparedBatch",
    "prepare_batch",
    "encode_batch",
    "encode_blank",
    "decode_record",
    "encode_host",
    "decode_host",
    "make_msg_id",
    "make_msg_ids",
    "parse_msg_id",
    "tag_code",
    "split_properties",
]

MESSAGE_MAGIC = 0xDAA320A7
BLANK_MAGIC = 0xCBD43194
MIN_BLANK = 8

HEADER = struct.Struct(">iIIiiqqiqQqQiqi")
HEADER_SIZE = HEADER.size  # 88
HEADER_DTYPE = np.dtype(
    [
        ("total", ">i4"),
        ("magic", ">u4"),
        ("crc", ">u4"),
        ("queue_id", ">i4"),
        ("flag", ">i4"),
        ("queue_offset", ">i8"),
        ("phy_offset", ">i8"),
        ("sys_flag", ">i4"),
        ("born_ts", ">i8"),
        ("born_host", ">u8"),
        ("store_ts", ">i8"),
        ("store_host", ">u8"),
        ("reconsume", ">i4"),
        ("prepared_tx", ">i8"),
        ("body_len", ">i4"),
    ]
)
assert HEADER_DTYPE.itemsize == HEADER_SIZE == 88
_SIZE_MAGIC = struct.Struct(">iI")
_U16 = struct.Struct(">H")

_RESERVED = ("TAGS", "KEYS", "WCRC")
_FORBIDDEN = ("\x00", "\x01", "\x02", "\x03")
MAX_TOPIC_BYTES = 127
MAX_PROPERTIES_BYTES = 32767
MAX_USER_PROPERTIES = MAX_PROPERTIES_BYTES - wcrc.LEN  # the WCRC pair takes the rest


def tag_code(tags: str | None) -> int:
    """Stable hash of a tag stored in ConsumeQueue units (0 = no tag)."""
    return zlib.crc32(tags.encode("utf-8")) if tags else 0


def _check_text(kind: str, value: str) -> None:
    if not value or any(c in value for c in _FORBIDDEN):
        raise InvalidMessageError(f"{kind} {value!r} must be non-empty and free of control characters \\x00-\\x03")


def encode_properties(keys: Sequence[str], tags: str | None, props: Mapping[str, str]) -> bytes:
    """Reserved TAGS/KEYS first, then user properties, as ``n\\x01v\\x02``."""
    parts: list[str] = []
    if tags:
        _check_text("tag", tags)
        parts.append(f"TAGS\x01{tags}\x02")
    if keys:
        for k in keys:
            _check_text("key", k)
        parts.append("KEYS\x01" + "\x03".join(keys) + "\x02")
    for name, value in props.items():
        if name in _RESERVED:
            raise InvalidMessageError(f"property name {name!r} is reserved; use the keys/tags fields")
        _check_text("property name", name)
        if any(c in value for c in _FORBIDDEN):
            raise InvalidMessageError(f"property {name!r} value holds control characters \\x00-\\x03")
        parts.append(f"{name}\x01{value}\x02")
    raw = "".join(parts).encode("utf-8")
    if len(raw) > MAX_USER_PROPERTIES:
        raise InvalidMessageError(f"properties take {len(raw)} bytes; the limit is {MAX_USER_PROPERTIES}")
    return raw


def split_properties(raw: bytes) -> tuple[tuple[str, ...], str | None, bytes]:
    """Properties bytes → (keys, tags, user properties bytes)."""
    keys: tuple[str, ...] = ()
    tags: str | None = None
    rest = raw
    if rest.startswith(b"TAGS\x01"):
        end = rest.index(b"\x02")
        tags = rest[5:end].decode("utf-8")
        rest = rest[end + 1 :]
    if rest.startswith(b"KEYS\x01"):
        end = rest.index(b"\x02")
        keys = tuple(rest[5:end].decode("utf-8").split("\x03"))
        rest = rest[end + 1 :]
    return keys, tags, rest


@dataclass(slots=True)
class PreparedBatch:
    """Per-message parts computed before the writer lock is taken (plain lists:
    small batches never pay numpy's fixed costs)."""

    topics: list[str]
    bodies: list[bytes]
    tails: list[bytes]  # TOPIC_LENGTH .. PROPERTIES
    sizes: list[int]
    crcs: list[int]
    # (queue id, flag, sys flag, born ts, reconsume times, prepared tx offset) per message
    rows: list[tuple[int, int, int, int, int, int]]
    born_hosts: list[int]
    # one (topic, queue) and no hidden half messages: queue offsets are a range
    uniform: bool

    def __len__(self) -> int:
        return len(self.bodies)

    @property
    def queue_ids(self) -> list[int]:
        return [r[0] for r in self.rows]

    @property
    def sys_flags(self) -> list[int]:
        return [r[2] for r in self.rows]


def _topic_head(topic: str, cache: dict[str, bytes]) -> bytes:
    tb = topic.encode("utf-8")
    if not tb or len(tb) > MAX_TOPIC_BYTES or any(c in topic for c in _FORBIDDEN):
        raise InvalidMessageError(f"topic {topic!r} must be 1-{MAX_TOPIC_BYTES} bytes without control characters")
    cache[topic] = head = bytes((len(tb),)) + tb
    return head


def _find_bad_properties(messages: Sequence[Message]) -> None:
    """Slow path: re-check message by message to name the culprit."""
    for i, m in enumerate(messages):
        try:
            encode_properties(m.keys, m.tags, m.properties)
        except InvalidMessageError as exc:
            raise InvalidMessageError(f"message {i}: {exc}") from None
    raise InvalidMessageError("a key, tag or property holds control characters \\x00-\\x03")


def prepare_batch(messages: Sequence[Message], now_ms: int, default_born_host: int, max_size: int) -> PreparedBatch:
    """Validate and pre-encode messages; raises before anything is written.

    Separators are validated for the whole batch at once: the joined
    properties text must hold exactly the \\x01/\\x02/\\x03 the encoder wrote.
    """
    heads: dict[str, bytes] = {}
    tails: list[bytes] = []
    bodies: list[bytes] = []
    texts: list[str] = []
    rows: list[tuple[int, int, int, int, int, int]] = []
    pairs = seps = 0
    odd = False  # empty keys/names, reserved names, oversized properties
    hosts = False  # a message names its own born host
    pack = _U16.pack
    for m in messages:
        head = heads.get(m.topic) or _topic_head(m.topic, heads)
        body = m.body if type(m.body) is bytes else bytes(m.body)
        tags, keys, props = m.tags, m.keys, m.properties
        text = "TAGS\x01" + tags + "\x02" if tags else ""
        if keys:
            text += "KEYS\x01" + "\x03".join(keys) + "\x02"
            pairs += 1
            seps += len(keys) - 1
            odd = odd or "" in keys
        if props:
            text += "".join([f"{k}\x01{v}\x02" for k, v in props.items()])
            pairs += len(props)
            odd = odd or "" in props or "TAGS" in props or "KEYS" in props or "WCRC" in props
        pairs += 1 if tags else 0
        raw = text.encode("utf-8")
        if len(raw) > MAX_USER_PROPERTIES:
            odd = True
        bodies.append(body)
        texts.append(text)
        tails.append(head + pack((len(raw) + wcrc.LEN) & 0xFFFF) + raw + wcrc.PLACEHOLDER)
        rows.append((m.queue_id, m.flag, m.sys_flag | wcrc.FLAG, m.born_timestamp or now_ms, m.reconsume_times,
                     m.prepared_transaction_offset))
        hosts = hosts or m.born_host is not None
    joined = "".join(texts)
    if odd or joined.count("\x01") != pairs or joined.count("\x02") != pairs or joined.count("\x03") != seps \
            or "\x00" in joined:
        _find_bad_properties(messages)
    return _finish(messages, bodies, tails, rows, default_born_host, hosts, max_size)


def _finish(messages: Sequence[Message], bodies: list[bytes], tails: list[bytes], rows: list, default_born_host: int,
            custom_hosts: bool, max_size: int) -> PreparedBatch:
    sizes = [HEADER_SIZE + len(b) + len(t) for b, t in zip(bodies, tails)]
    if max(sizes) > max_size:
        i = next(k for k, z in enumerate(sizes) if z > max_size)
        raise MessageTooLargeError(f"message {i} encodes to {sizes[i]} bytes; the limit is {max_size} bytes")
    born_hosts = [default_born_host] * len(bodies)
    if custom_hosts:
        born_hosts = [encode_host(m.born_host) if m.born_host else default_born_host for m in messages]
    topics = [m.topic for m in messages]
    first = rows[0][0]
    uniform = topics.count(topics[0]) == len(topics) and all(r[0] == first and not r[2] & 0xC for r in rows) \
        if len(rows) > 1 else not rows[0][2] & 0xC
    return PreparedBatch(topics, bodies, tails, sizes, list(map(crc32, bodies)), rows, born_hosts, uniform)


def encode_batch(
    batch: PreparedBatch,
    lo: int,
    hi: int,
    phy_offsets: list[int],
    queue_offsets: list[int],
    store_ts: int,
    store_host: int,
) -> bytearray:
    """Encode messages ``lo:hi`` of a prepared batch into one byte string.

    ``phy_offsets``/``queue_offsets`` hold the values of messages ``lo:hi``.
    Each record's WCRC digits are written last (:func:`.wcrc.seal`).
    """
    if hi - lo <= 8:  # numpy's fixed cost outweighs its speed on tiny batches
        pack = HEADER.pack
        return wcrc.seal(bytearray().join(
            pack(batch.sizes[i], MESSAGE_MAGIC, batch.crcs[i], r[0], r[1], queue_offsets[i - lo],
                 phy_offsets[i - lo], r[2], r[3], batch.born_hosts[i], store_ts, store_host, r[4], r[5],
                 len(batch.bodies[i])) + batch.bodies[i] + batch.tails[i]
            for i, r in zip(range(lo, hi), batch.rows[lo:hi])
        ), batch.sizes[lo:hi])
    n = hi - lo
    cols = np.array(batch.rows[lo:hi], np.int64).reshape(n, 6)
    hdr = np.empty(n, HEADER_DTYPE)
    hdr["total"] = batch.sizes[lo:hi]
    hdr["magic"] = MESSAGE_MAGIC
    hdr["crc"] = batch.crcs[lo:hi]
    hdr["queue_id"] = cols[:, 0]
    hdr["flag"] = cols[:, 1]
    hdr["queue_offset"] = queue_offsets
    hdr["phy_offset"] = phy_offsets
    hdr["sys_flag"] = cols[:, 2]
    hdr["born_ts"] = cols[:, 3]
    hdr["born_host"] = batch.born_hosts[lo:hi]
    hdr["store_ts"] = store_ts
    hdr["store_host"] = store_host
    hdr["reconsume"] = cols[:, 4]
    hdr["prepared_tx"] = cols[:, 5]
    hdr["body_len"] = list(map(len, batch.bodies[lo:hi]))
    raw = hdr.tobytes()
    heads = [raw[i : i + HEADER_SIZE] for i in range(0, n * HEADER_SIZE, HEADER_SIZE)]
    return wcrc.seal(bytearray().join(chain.from_iterable(zip(heads, batch.bodies[lo:hi], batch.tails[lo:hi]))),
                     batch.sizes[lo:hi])


def encode_blank(size: int) -> bytes:
    """The BLANK filler record for the last ``size`` bytes of a segment."""
    return _SIZE_MAGIC.pack(size, BLANK_MAGIC)


def decode_record(buf: bytes | memoryview, pos: int, expect_phy: int | None = None, *,
                  check_crc: bool = True) -> StoredMessage:
    """Decode and verify the record at ``buf[pos:]``.

    Raises CorruptRecordError, and nothing else, when the magic code, lengths,
    physical offset, text fields or (with ``check_crc``) the whole-record CRC
    (:mod:`.wcrc`; the body CRC for a record written without it) do not hold.
    """
    try:
        return _decode(buf, pos, expect_phy, check_crc)
    except (struct.error, IndexError, ValueError) as exc:  # UnicodeDecodeError is a ValueError
        where = expect_phy if expect_phy is not None else pos
        raise CorruptRecordError(f"record at {where} cannot be parsed: {exc}") from exc


def _decode(buf: bytes | memoryview, pos: int, expect_phy: int | None, check_crc: bool) -> StoredMessage:
    if pos < 0 or len(buf) - pos < HEADER_SIZE:
        raise CorruptRecordError(f"record at {pos} is shorter than its header")
    (total, magic, crc, qid, flag, qoff, phy, sysflag, born_ts, born_host, store_ts, store_host, reconsume,
     prep, blen) = HEADER.unpack_from(buf, pos)
    if magic != MESSAGE_MAGIC:
        raise CorruptRecordError(f"record at {pos} has magic {magic:#x}, not a message")
    if expect_phy is not None and phy != expect_phy:
        raise CorruptRecordError(f"record claims offset {phy} but lies at {expect_phy}")
    if total < HEADER_SIZE + 3 or blen < 0 or HEADER_SIZE + blen + 3 > total or pos + total > len(buf):
        raise CorruptRecordError(f"record at {phy} has impossible size {total} (body {blen})")
    b0 = pos + HEADER_SIZE
    body = bytes(buf[b0 : b0 + blen])
    tlen = buf[b0 + blen]
    t0 = b0 + blen + 1
    topic_b = bytes(buf[t0 : t0 + tlen])
    (plen,) = _U16.unpack_from(buf, t0 + tlen)
    p0 = t0 + tlen + 2
    if HEADER_SIZE + blen + 3 + tlen + plen != total:
        raise CorruptRecordError(f"record at {phy}: lengths do not add up to {total}")
    sealed = bool(sysflag & wcrc.FLAG)
    if sealed and plen < wcrc.LEN:
        raise CorruptRecordError(f"record at {phy}: the sys flag says WCRC but the properties are too short for it")
    if check_crc:
        _check_crcs(buf, pos, total, sealed, crc32(body) == crc, phy)
    keys, tags, user = split_properties(bytes(buf[p0 : p0 + plen - (wcrc.LEN if sealed else 0)]))
    return StoredMessage(
        topic=topic_b.decode("utf-8"), queue_id=qid, queue_offset=qoff, phy_offset=phy,
        msg_id=make_msg_id(store_host, phy), body=body, keys=keys, tags=tags,
        properties=decode_properties(user), born_timestamp=born_ts, store_timestamp=store_ts,
        size=total, flag=flag, sys_flag=sysflag & ~wcrc.FLAG, reconsume_times=reconsume,
        prepared_transaction_offset=prep, born_host=decode_host(born_host), store_host=decode_host(store_host),
    )


def _check_crcs(buf: bytes | memoryview, pos: int, total: int, sealed: bool, body_ok: bool, phy: int) -> None:
    if sealed and not wcrc.trailer_ok(buf, pos + total, pos):
        raise CorruptRecordError(f"record at {phy}: whole-record CRC (WCRC) mismatch")
    if not sealed and wcrc.looks_sealed(buf, pos + total, pos):
        raise CorruptRecordError(f"record at {phy}: it ends with a WCRC pair but its sys flag does not say so")
    if not body_ok:
        raise CorruptRecordError(f"record at {phy}: body CRC mismatch")
