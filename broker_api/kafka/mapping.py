"""How a Kafka record and a sparkmq message map onto each other.

* partition = queue id, offset = queue offset, timestamp = born timestamp (CreateTime);
* key = the message's keys (``KEYS``; several keys are joined by one space). A key that is not
  UTF-8 text free of ``\\x00``-``\\x03`` (or is empty) is kept verbatim, base64-encoded, in the
  property ``KAFKA_KEY_B64``, and comes back as the same bytes;
* headers = properties. The message's tag travels as the header ``TAGS``. A header whose value is
  not clean UTF-8 text is stored as the property ``KAFKA_B64.<name>`` (base64) and comes back under
  its own name; a null header value as the property ``KAFKA_NULL.<name>``. Headers repeating a name
  keep the last value (properties are a map).
"""

from __future__ import annotations

import base64
import re

import numpy as np

from store import Message

from .records import Record

__all__ = ["KAFKA_TOPIC", "to_message", "split_properties", "kafka_topic_ok", "keys_only", "without_seq"]

KAFKA_TOPIC = re.compile(r"[a-zA-Z0-9._-]{1,249}")
_KEY_B64 = "KAFKA_KEY_B64"
_B64 = "KAFKA_B64."
_NULL = "KAFKA_NULL."
_BAD = re.compile(r"[\x00-\x03]")


def kafka_topic_ok(name: str) -> bool:
    """Whether Kafka clients accept ``name`` as a topic name."""
    return name not in (".", "..") and KAFKA_TOPIC.fullmatch(name) is not None


def _text(raw: bytes) -> str | None:
    """``raw`` as text the store can keep as is, or None."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text if text and not _BAD.search(text) else None


def to_message(topic: str, partition: int, rec: Record, born_host: str | None = None) -> Message:
    """A stored message for one produced record."""
    props: dict[str, str] = {}
    keys: tuple[str, ...] = ()
    tags = None
    if rec.key is not None:
        text = _text(rec.key)
        if text is not None:
            keys = (text,)
        else:
            props[_KEY_B64] = base64.b64encode(rec.key).decode()
    for name, value in rec.headers:
        if value is None:
            props[_NULL + name] = ""
            continue
        text = _text(value)
        if name == "TAGS" and text is not None:
            tags = text
        elif text is not None and name not in ("KEYS", "WCRC"):
            props[name] = text
        else:
            props[_B64 + name] = base64.b64encode(value).decode()
    return Message(topic, rec.value or b"", partition, keys, tags, props, born_timestamp=rec.timestamp)


def split_properties(raw: bytes) -> tuple[bytes | None, list[tuple[bytes, bytes | None]]]:
    """A stored message's properties (``name\\x01value\\x02``...) as a Kafka (key, headers)."""
    key: bytes | None = None
    headers: list[tuple[bytes, bytes | None]] = []
    if not raw:
        return key, headers
    for pair in raw.split(b"\x02"):
        if not pair:
            continue
        name, _, value = pair.partition(b"\x01")
        if name == b"KEYS":
            key = value.replace(b"\x03", b" ")
        elif name in (b"WCRC", b"KAFKA_SEQ"):
            continue
        elif name == b"KAFKA_KEY_B64":
            key = base64.b64decode(value)
        elif name.startswith(b"KAFKA_B64."):
            headers.append((name[10:], base64.b64decode(value)))
        elif name.startswith(b"KAFKA_NULL."):
            headers.append((name[11:], None))
        else:
            headers.append((name, value))
    return key, headers


_KEYS = np.frombuffer(b"KEYS\x01", np.uint8)
_WCRC = np.frombuffer(b"WCRC\x01", np.uint8)
_WCRC_PAIR = 14  # "WCRC\x01" + 8 digits + "\x02"


def keys_only(props: bytes, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """When every record's properties (``props[offsets[i]:offsets[i + 1]]``) are a key and the
    store's checksum, or the checksum alone: (key lengths, -1 for none; the key bytes, several keys
    joined by a space) by columns, as :func:`split_properties` reads them; else None."""
    u8 = np.frombuffer(props, np.uint8)
    start, end = offsets[:-1], offsets[1:]
    lens = end - start
    if not len(lens) or int(lens.min()) < _WCRC_PAIR:
        return None
    keyed = lens > _WCRC_PAIR
    if not _at(u8, end - _WCRC_PAIR, _WCRC).all() or (u8[end - 1] != 2).any() \
            or not _at(u8, start[keyed], _KEYS).all() or (u8[end[keyed] - _WCRC_PAIR - 1] != 2).any():
        return None
    if props.count(b"\x01") != len(lens) + int(keyed.sum()) or props.count(b"\x02") != props.count(b"\x01"):
        return None  # a key holding a separator, or another property
    klen = np.where(keyed, lens - _WCRC_PAIR - 1 - len(_KEYS), -1)
    if (klen == 0).any():
        return None
    width = np.maximum(klen, 0)
    total = int(width.sum())
    at = start + len(_KEYS)
    data = u8[np.arange(total) + np.repeat(at - (np.cumsum(width) - width), width)] if total else np.zeros(0, np.uint8)
    return klen, np.where(data == 3, np.uint8(0x20), data)


def _at(u8: np.ndarray, at: np.ndarray, pattern: np.ndarray) -> np.ndarray:
    """Whether ``pattern`` lies at each position of ``at``."""
    return (u8[at[:, None] + np.arange(len(pattern))] == pattern).all(axis=1)


_SEQ_PAIR = re.compile(rb"(?:(?<=\x02)|^)KAFKA_SEQ\x01[^\x02]*\x02")  # an idempotent batch's stamp (producer_state.py)


def without_seq(props: bytes, offsets: np.ndarray) -> tuple[bytes, np.ndarray]:
    """The records' properties without the producer stamps that the first record of each
    idempotent batch carries (not returned as headers), and their new offsets."""
    if b"KAFKA_SEQ\x01" not in props:
        return props, offsets
    spans = [m.span() for m in _SEQ_PAIR.finditer(props)]
    if not spans:
        return props, offsets
    starts = np.array([a for a, _ in spans], np.int64)
    removed = np.cumsum([b - a for a, b in spans])
    before = np.searchsorted(starts, offsets, side="left")  # stamps lying wholly before each offset
    shift = np.where(before > 0, removed[np.maximum(before - 1, 0)], 0)
    return _SEQ_PAIR.sub(b"", props), offsets - shift
