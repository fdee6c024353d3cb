"""Column-wise batch append: many messages of one topic and queue, built per batch.

:func:`prepare_columns` takes the bodies (and optional per-message keys) of
messages that share a topic, a queue, a tag and a born time, and builds the
same CommitLog records as :mod:`.codec` (layout drawn there), column by column:

* the 88-byte headers are one numpy structured array (``HEADER_DTYPE``),
  filled field by field for the whole batch;
* body CRC32s come from one ``map(crc32, bodies)`` pass (:mod:`.crc`);
* the part after the body (topic, properties) is one constant byte string
  when there are no keys, otherwise built from the keys in one pass;
* when every record has the same size (same body and key lengths) the
  records are assembled in a 2-D ``uint8`` array (n rows x record size) by
  three strided copies, else by one ``bytes.join`` of header, body and tail;
* each tail ends with the WCRC pair, whose digits are written once the
  record is whole, computed from the body CRCs and the few header and tail
  bytes that differ between records (:mod:`.record_crc`).

The result is copied into the mapped segment once.  Nothing in the on-disk
format differs from :func:`.codec.encode_batch`: the same bytes for the same
messages.
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass
from itertools import chain, repeat
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

import numpy as np

from . import wcrc
from .codec import (HEADER_DTYPE, HEADER_SIZE, MAX_PROPERTIES_BYTES, MAX_TOPIC_BYTES, MAX_USER_PROPERTIES,
                    MESSAGE_MAGIC, make_msg_ids)
from .crc import crc32
from .errors import FlushTimeoutError, InvalidMessageError, MessageTooLargeError
from .packed import PackedBodies
from .record_crc import fixed_record_crcs, record_crcs, tail_crcs

if TYPE_CHECKING:
    from .commitlog import CommitLog

__all__ = ["ColumnBatch", "ColumnExtra", "ColumnGroup", "ColumnPutResult", "ColumnRows", "GroupRows", "check_columns",
           "prepare_columns", "put_groups"]

# (queue id, bodies, one key per message or None): one queue's part of a column put
ColumnGroup = tuple[int, "Sequence[bytes] | PackedBodies", "Sequence[str] | None"]
# properties and sys flag every message of a column put has (a committed transaction's), or None
ColumnExtra = tuple[Mapping[str, str], int] | None



@dataclass(frozen=True, slots=True)
class GroupRows:
    """What one column group's messages carry beyond bodies and keys: ``born_ts`` (int64 ms, one per
    message; default: the put's time) and ``first_properties`` (properties its first message alone
    has, e.g. a Kafka producer's batch stamp)."""

    born_ts: np.ndarray | None = None
    first_properties: Mapping[str, str] | None = None


# one GroupRows (or None) per group of a column put, or None
ColumnRows = Sequence[GroupRows | None] | None

_U16 = struct.Struct(">H")
_FORBIDDEN = ("\x00", "\x01", "\x02", "\x03")


@dataclass(slots=True)
class ColumnBatch:
    """Messages of one (topic, queue), validated and pre-encoded except their offsets."""

    topic: str
    queue_id: int
    bodies: Sequence[bytes] | PackedBodies
    # TOPIC_LENGTH .. PROPERTIES: one shared, one per message, or n rows of equal length
    tails: bytes | list[bytes] | np.ndarray
    sizes: np.ndarray  # int64, whole record sizes
    ends: np.ndarray  # int64, cumulative sizes: record i ends ends[i] bytes after the batch's start
    crcs: np.ndarray  # uint32
    born_ts: int | np.ndarray  # one for all, or int64 one per message
    born_host: int
    fixed: bool  # every record has the same size
    sys_flag: int = 0  # e.g. TRANSACTION_COMMIT for a committed transaction's messages
    key_span: tuple[int, int] | None = None  # where the key bytes lie in every row of an ndarray ``tails``

    def __len__(self) -> int:
        return len(self.bodies)

    def encode(self, lo: int, hi: int, phys: np.ndarray, qoffs: np.ndarray, store_ts: int,
               store_host: int, scratch: np.ndarray | None = None) -> bytes | memoryview:
        """Records ``lo:hi`` as one buffer (offsets as in codec.encode_batch).  ``scratch``: a uint8
        buffer the caller reuses (the result may lie in it: copy it before the next call), so that
        equal-size records take no fresh pages per batch."""
        n = hi - lo
        bodies = self.bodies[lo:hi]
        if self.fixed:
            size = int(self.sizes[0])
            out = scratch[:n * size].reshape(n, size) if scratch is not None and len(scratch) >= n * size else \
                np.empty((n, size), np.uint8)
            # the headers are written in place: a structured view of each row's first 88 bytes
            hdr = np.ndarray((n,), HEADER_DTYPE, out, 0, (size,))
            blen = size - HEADER_SIZE - self._tail_len(lo)
            self._fill_header(hdr, lo, hi, phys, qoffs, store_ts, store_host)
            hdr["body_len"] = blen
            out[:, HEADER_SIZE:HEADER_SIZE + blen] = bodies.matrix() if isinstance(bodies, PackedBodies) else \
                np.frombuffer(b"".join(bodies), np.uint8).reshape(n, blen)
            tails = self.tails
            if isinstance(tails, list):
                tails = np.frombuffer(b"".join(tails[lo:hi]), np.uint8).reshape(n, -1)
            elif isinstance(tails, np.ndarray):
                tails = tails[lo:hi]
            out[:, HEADER_SIZE + blen:] = np.frombuffer(tails, np.uint8) if isinstance(tails, bytes) else tails
            wcrc.seal_rows(out, _fixed_crcs(out, blen, self.crcs[lo:hi], (0, 0) if isinstance(tails, bytes) else
                                            self.key_span if isinstance(self.tails, np.ndarray) else None))
            return memoryview(out.reshape(-1).data)
        hdr = np.empty(n, HEADER_DTYPE)
        self._fill_header(hdr, lo, hi, phys, qoffs, store_ts, store_host)
        parts: Sequence[bytes | memoryview] = bodies.views() if isinstance(bodies, PackedBodies) else bodies
        hdr["body_len"] = blens = np.fromiter(map(len, parts), np.int64, n)
        raw = hdr.tobytes()
        heads = [raw[i:i + HEADER_SIZE] for i in range(0, n * HEADER_SIZE, HEADER_SIZE)]
        tails = self.tails
        tails_it = repeat(tails) if isinstance(tails, bytes) else (
            list(tails) if isinstance(tails, list) else [r.tobytes() for r in tails])[lo:hi]
        sizes = self.sizes[lo:hi]
        crcs = record_crcs(np.frombuffer(raw, np.uint8).reshape(n, HEADER_SIZE), self.crcs[lo:hi], blens,
                           tail_crcs(tails if isinstance(tails, bytes) else tails_it, n, 9),  # type: ignore[arg-type]
                           sizes - blens - (HEADER_SIZE + 9))
        return wcrc.seal(bytearray().join(chain.from_iterable(zip(heads, parts, tails_it))), sizes, crcs)

    def _fill_header(self, hdr: np.ndarray, lo: int, hi: int, phys: np.ndarray, qoffs: np.ndarray, store_ts: int,
                     store_host: int) -> None:
        """Every header field but BODY_LENGTH; flag, reconsume times and prepared offset are 0."""
        hdr["total"] = self.sizes[lo:hi]
        hdr["magic"] = MESSAGE_MAGIC
        hdr["crc"] = self.crcs[lo:hi]
        hdr["queue_id"] = self.queue_id
        hdr["queue_offset"] = qoffs
        hdr["phy_offset"] = phys
        hdr["born_ts"] = self.born_ts if isinstance(self.born_ts, int) else self.born_ts[lo:hi]
        hdr["born_host"] = self.born_host
        hdr["store_ts"] = store_ts
        hdr["store_host"] = store_host
        for name in _ZERO_FIELDS:
            hdr[name] = 0
        hdr["sys_flag"] = self.sys_flag | wcrc.FLAG

    def _tail_len(self, i: int) -> int:
        tails = self.tails
        return len(tails) if isinstance(tails, bytes) else len(tails[i])


# header columns that may differ within a column batch: body CRC, queue and physical offsets, born time
_VARYING = np.r_[8:12, 20:36, 40:48]


def _fixed_crcs(out: np.ndarray, blen: int, crcs: np.ndarray, key_span: tuple[int, int] | None) -> np.ndarray:
    """The WCRCs of the equal-size records that are the rows of ``out`` (:mod:`.record_crc`):
    one zlib call for the first, then only what differs: body CRCs, offsets, key bytes."""
    size = out.shape[1]
    end = HEADER_SIZE + blen
    tail = np.arange(end, size - 9) if key_span is None else np.arange(end + key_span[0], end + key_span[1])
    return fixed_record_crcs(out, size - 9, np.concatenate([_VARYING, tail]), crcs, end)


_ZERO_FIELDS = [f for f in HEADER_DTYPE.names or () if f not in (
    "total", "magic", "crc", "queue_id", "queue_offset", "phy_offset", "born_ts", "born_host", "store_ts",
    "store_host", "body_len")]


@dataclass(slots=True)
class ColumnPutResult:
    """Where a column batch landed: message i is at ``phy_offsets[i]`` (int64 array) with queue
    offset ``first_queue_offset + i`` and ``sizes[i]`` bytes long."""

    topic: str
    queue_id: int
    phy_offsets: np.ndarray
    first_queue_offset: int
    sizes: np.ndarray
    store_timestamp: int
    store_host: int

    def __len__(self) -> int:
        return len(self.phy_offsets)

    def msg_ids(self) -> list[str]:
        return make_msg_ids(self.store_host, self.phy_offsets)


def _check(kind: str, text: str, count: int = 0) -> None:
    """``text`` holds no control separators (``count`` of them are allowed as joins)."""
    if any(text.count(c) for c in _FORBIDDEN[:3]) or text.count("\x03") != count:
        raise InvalidMessageError(f"a {kind} holds control characters \\x00-\\x03")


def _topic_head(topic: str) -> bytes:
    tb = topic.encode("utf-8")
    if not tb or len(tb) > MAX_TOPIC_BYTES or any(c in topic for c in _FORBIDDEN):
        raise InvalidMessageError(f"topic {topic!r} must be 1-{MAX_TOPIC_BYTES} bytes without control characters")
    return bytes((len(tb),)) + tb


def _tails(head: bytes, tags: str | None, keys: Sequence[str] | None, extra: Mapping[str, str] | None = None,
           ) -> tuple[bytes | list[bytes] | np.ndarray, np.ndarray | int]:
    """The part after each body: one shared tail without keys, else one per message; and the key
    lengths (one for all when they are equal; 0 without keys). ``extra``: properties every message
    has, after TAGS and KEYS as the codec orders them (readers find those two first)."""
    tag_part = b""
    if tags:
        _check("tag", tags)
        tag_part = b"TAGS\x01" + tags.encode("utf-8") + b"\x02"
    user = b""
    for name, value in (extra or {}).items():
        _check("property name", name)
        _check("property value", value)
        if name in ("TAGS", "KEYS", "WCRC"):
            raise InvalidMessageError(f"property name {name!r} is reserved")
        user += name.encode("utf-8") + b"\x01" + value.encode("utf-8") + b"\x02"
    if keys is None:
        if len(tag_part) + len(user) > MAX_USER_PROPERTIES:
            raise InvalidMessageError(f"the tag and properties take {len(tag_part) + len(user)} bytes; the limit "
                                      f"is {MAX_USER_PROPERTIES}")
        return head + _U16.pack(len(tag_part) + len(user) + wcrc.LEN) + tag_part + user + wcrc.PLACEHOLDER, 0
    n = len(keys)
    # every key, UTF-8, each followed by \x03: separators found by byte comparisons, no object per key
    raw = np.frombuffer(("\x03".join(keys) + "\x03").encode("utf-8"), np.uint8)
    width = len(raw) // n  # when every key has the same length: key bytes + separator per row
    if width > 1 and len(raw) == n * width and np.count_nonzero(raw <= 3) == n and (raw[width - 1::width] == 3).all():
        return _key_rows(head, tag_part, raw.reshape(n, width), user), width - 1  # (the n separators, in place)
    seps = np.flatnonzero(raw == 3)
    if len(seps) != n or np.count_nonzero(raw < 3):
        raise InvalidMessageError("a key holds control characters \\x00-\\x03")
    lens = np.diff(seps, prepend=-1) - 1
    if not lens.all():
        raise InvalidMessageError("a key is empty; every key must be non-empty")
    fixed = len(tag_part) + 6 + len(user) + wcrc.LEN  # "KEYS\x01" ... "\x02", the user pairs, the WCRC pair
    klen, top = int(lens[0]), int(lens.max())
    if top + fixed > MAX_PROPERTIES_BYTES:
        raise InvalidMessageError(f"a key makes properties longer than {MAX_USER_PROPERTIES} bytes")
    if top != int(lens.min()):
        pre = {k: head + _U16.pack(k + fixed) + tag_part + b"KEYS\x01" for k in np.unique(lens).tolist()}
        encoded = raw.tobytes().split(b"\x03")[:n]
        return [pre[len(k)] + k + b"\x02" + user + wcrc.PLACEHOLDER for k in encoded], lens
    return _key_rows(head, tag_part, raw.reshape(n, klen + 1), user), klen


def _key_rows(head: bytes, tag_part: bytes, keys: np.ndarray, user: bytes = b"") -> np.ndarray:
    """One tail per message, built by columns from ``keys`` (n rows: the key's bytes, then one spare
    byte), then the ``user`` properties every message has."""
    n, width = keys.shape
    user += wcrc.PLACEHOLDER  # the WCRC pair closes every tail
    fixed = len(tag_part) + 6 + len(user)  # "KEYS\x01" ... "\x02"
    if width - 1 + fixed > MAX_PROPERTIES_BYTES:
        raise InvalidMessageError(f"a key makes properties longer than {MAX_USER_PROPERTIES} bytes")
    start = head + _U16.pack(width - 1 + fixed) + tag_part + b"KEYS\x01"
    rows = np.empty((n, len(start) + width + len(user)), np.uint8)
    rows[:, :len(start)] = np.frombuffer(start, np.uint8)
    rows[:, len(start):len(start) + width] = keys
    rows[:, len(start) + width - 1] = 2
    if user:
        rows[:, len(start) + width:] = np.frombuffer(user, np.uint8)
    return rows


def _sized(topic: str, bodies: Sequence[bytes] | PackedBodies, keys: Sequence[str] | None, tags: str | None,
           props: Mapping[str, str], max_size: int) -> tuple[bytes | list[bytes] | np.ndarray, np.ndarray | int,
                                                             np.ndarray, np.ndarray]:
    """(tails, key lengths, body lengths, record sizes) of a column batch; raises what the store refuses."""
    n = len(bodies)
    if not n:
        raise InvalidMessageError("a column batch needs at least one message")
    if keys is not None and len(keys) != n:
        raise InvalidMessageError(f"{len(keys)} keys for {n} bodies; give one key per message")
    tails, key_lens = _tails(_topic_head(topic), tags, keys, props)
    blens = bodies.lengths() if isinstance(bodies, PackedBodies) else np.fromiter(map(len, bodies), np.int64, n)
    if isinstance(tails, bytes):
        sizes = blens + (HEADER_SIZE + len(tails))
    else:  # the first tail holds the first key: the others differ by their key's length
        first_key = key_lens if isinstance(key_lens, int) else int(key_lens[0])
        sizes = blens + key_lens + (HEADER_SIZE + len(tails[0]) - first_key)
    if int(sizes.max()) > max_size:
        i = int(np.argmax(sizes > max_size))
        raise MessageTooLargeError(f"message {i} encodes to {int(sizes[i])} bytes; the limit is {max_size} bytes")
    return tails, key_lens, blens, sizes


def check_columns(topic: str, bodies: Sequence[bytes] | PackedBodies, *, keys: Sequence[str] | None = None,
                  tags: str | None = None, max_size: int, extra: ColumnExtra = None) -> None:
    """Raise what :func:`prepare_columns` would raise for these columns, without their CRCs (a
    transaction checks its rows before its commit is decided and appends them after)."""
    _sized(topic, bodies, keys, tags, (extra or ({}, 0))[0], max_size)


def prepare_columns(topic: str, queue_id: int, bodies: Sequence[bytes] | PackedBodies, *,
                    keys: Sequence[str] | None = None, tags: str | None = None, born_ts: int | np.ndarray,
                    born_host: int, max_size: int, extra: ColumnExtra = None,
                    first_properties: Mapping[str, str] | None = None) -> ColumnBatch:
    """Validate and pre-encode a column batch; raises before anything is written.

    ``keys`` holds one key per message (or None); ``tags`` applies to every message, and so do
    ``extra``'s properties and sys flag; ``born_ts`` is one time or one per message, and
    ``first_properties`` are added to the first message's properties only.
    ``bodies`` may be packed (one buffer and offsets, see :mod:`.packed`): no object per body.
    """
    if not 0 <= queue_id < 1 << 31:
        raise InvalidMessageError(f"queue id {queue_id} is out of range")
    props, sys_flag = extra or ({}, 0)
    tails, key_lens, blens, sizes = _sized(topic, bodies, keys, tags, props, max_size)
    if not isinstance(born_ts, int) and len(born_ts) != len(bodies):
        raise InvalidMessageError(f"{len(born_ts)} born times for {len(bodies)} bodies; give one per message")
    if first_properties:
        tails, sizes = _first_apart(topic, keys, tags, {**props, **first_properties}, tails, blens, sizes, max_size)
    top, low = int(sizes.max()), int(sizes.min())
    crcs = bodies.crcs() if isinstance(bodies, PackedBodies) else \
        np.fromiter(map(crc32, bodies), np.uint32, len(bodies))
    fixed = low == top and (isinstance(key_lens, int) or int(blens.min()) == int(blens.max()))
    span = None
    if isinstance(tails, np.ndarray):  # key rows: only the key bytes differ (no \x01 before the KEYS pair's)
        at = tails[0].tobytes().find(b"KEYS\x01") + 5
        span = (at, at + int(key_lens))  # type: ignore[arg-type]
    return ColumnBatch(topic, queue_id, bodies, tails, sizes, np.cumsum(sizes), crcs, born_ts, born_host, fixed,
                       sys_flag, span)


def _first_apart(topic: str, keys: Sequence[str] | None, tags: str | None, first: Mapping[str, str],
                 tails: bytes | list[bytes] | np.ndarray, blens: np.ndarray, sizes: np.ndarray,
                 max_size: int) -> tuple[list[bytes], np.ndarray]:
    """One tail per message, the first one carrying the properties ``first``; and the sizes."""
    own, _ = _tails(_topic_head(topic), tags, None if keys is None else keys[:1], first)
    head = own if isinstance(own, bytes) else own[0] if isinstance(own, list) else own[0].tobytes()
    n = len(blens)
    rest = [tails] * (n - 1) if isinstance(tails, bytes) else \
        tails[1:] if isinstance(tails, list) else [row.tobytes() for row in tails[1:]]
    sizes = sizes.copy()
    sizes[0] = HEADER_SIZE + int(blens[0]) + len(head)
    if int(sizes[0]) > max_size:
        raise MessageTooLargeError(f"message 0 encodes to {int(sizes[0])} bytes; the limit is {max_size} bytes")
    return [head, *rest], sizes


def put_groups(commitlog: CommitLog, wait_for: Callable[[int], None], topic: str, groups: Sequence[ColumnGroup],
               tags: str | None, born_host: int, max_size: int, extra: ColumnExtra = None,
               rows: ColumnRows = None) -> list[ColumnPutResult]:
    """Prepare every group (raising before anything is written), append each, then wait for the flush."""
    now = int(time.time() * 1000)
    each = rows or [None] * len(groups)
    batches = [prepare_columns(topic, qid, bodies, keys=keys, tags=tags, born_host=born_host, max_size=max_size,
                               born_ts=now if r is None or r.born_ts is None else r.born_ts, extra=extra,
                               first_properties=None if r is None else r.first_properties)
               for (qid, bodies, keys), r in zip(groups, each, strict=True)]
    done = [(b, commitlog.append(b)) for b in batches]
    results = [ColumnPutResult(topic, b.queue_id, np.asarray(r.phy_offsets), int(r.queue_offsets[0]), b.sizes,
                               r.store_timestamp, commitlog.store_host) for b, r in done]
    try:
        wait_for(max(r.end_offset for _, r in done))
    except FlushTimeoutError as exc:  # stored, not confirmed on disk in time
        exc.results = results
        raise
    return results
