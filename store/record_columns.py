"""RecordColumns: the columns of a run of parsed records, built from its bytes on demand.

The scanner hands each :class:`~.dispatch.DispatchBatch` one of these as its
``source``.  Built at once (every dispatch needs them): topics and tag codes,
from per-batch numpy work on the headers and the property spans
(:mod:`.props_scan`).  Built only when asked: keys, tags, user properties,
bodies and message ids, the Python objects that the ConsumeQueue and the
index never need.  The index hashes keys straight from their bytes
(:meth:`RecordColumns.key_crcs`).
"""

from __future__ import annotations

import zlib
from itertools import repeat
from typing import TYPE_CHECKING, Any, Iterable

import numpy as np

from . import codec
from .crc import crc32
from .crc_fold import crc32_at
from .props_scan import all_same, parse_spans, unique_spans

if TYPE_CHECKING:
    from .scanner import _Headers

__all__ = ["RecordColumns"]

_HS = codec.HEADER_SIZE
_SHORT_KEY = 48  # keys up to this many bytes are hashed by byte columns (numpy), longer ones by zlib per key
_KEY_LENGTHS = 8  # ... when they come in at most this many lengths


def _split_one(raw: bytes) -> tuple[str | None, tuple[str, ...], bytes]:
    keys, tags, rest = codec.split_properties(raw)
    return tags or None, (keys if keys != ("",) else ()), rest


class RecordColumns:
    """Columns of the records ``h`` describes, which lie in ``buf``."""

    def __init__(self, buf: bytes, h: _Headers, store_host: int) -> None:
        self.buf, self.h, self.store_host = buf, h, store_host
        self.u8 = np.frombuffer(buf, np.uint8)
        p0 = h.p_at + 2
        self.p_end = p0 + h.ulen  # the WCRC pair is not a property readers see
        self.spans = parse_spans(self.u8, p0, self.p_end)
        self.slow: dict[int, tuple[str | None, tuple[str, ...], bytes]] = {
            r: _split_one(buf[p:e]) for r, p, e in zip(np.flatnonzero(self.spans.slow).tolist(),
                                                     p0[self.spans.slow].tolist(),
                                                     self.p_end[self.spans.slow].tolist())}
        self.topics = self._topics()
        self.tag_index, self.tag_names = self._unique_tags()  # per record an index into the distinct tags
        self.tag_codes = self._tag_codes()

    def __len__(self) -> int:
        return len(self.h.st)

    # -- built at once ---------------------------------------------------
    def _topics(self) -> list[str]:
        h, n = self.h, len(self)
        if n and (h.tlen == h.tlen[0]).all() and all_same(self.u8, h.t_at + 1, int(h.tlen[0])):
            first = int(h.t_at[0]) + 1
            return [self.u8[first:first + int(h.tlen[0])].tobytes().decode("utf-8", "replace")] * n
        inv, names = unique_spans(self.u8, h.t_at + 1, h.t_at + 1 + h.tlen)
        decoded = np.array([b.decode("utf-8", "replace") for b in names], object)
        return decoded[inv].tolist()  # type: ignore[no-any-return]

    def _unique_tags(self) -> tuple[np.ndarray, list[str | None]]:
        """Per record an index into the tag names; index 0 is "no tag"."""
        sp = self.spans
        inv = np.zeros(len(self), np.int64)
        rows = np.flatnonzero(sp.tag_start >= 0)
        which, raw = unique_spans(self.u8, sp.tag_start[rows], sp.tag_end[rows])
        inv[rows] = which + 1
        names: list[str | None] = [None, *(b.decode("utf-8", "replace") for b in raw)]
        for r, (tag, _, _) in self.slow.items():
            if tag is not None:
                inv[r] = len(names)
                names.append(tag)
        return inv, names

    def _tag_codes(self) -> np.ndarray:
        codes = np.fromiter(map(codec.tag_code, self.tag_names), np.int64, len(self.tag_names))
        return codes[self.tag_index]

    # -- built on demand -------------------------------------------------
    def column(self, name: str) -> list[Any]:
        if name == "tags":
            return np.array(self.tag_names, object)[self.tag_index].tolist()  # type: ignore[no-any-return]
        if name == "keys":
            return self._keys()
        if name == "properties_raw":
            return self._slices(self.spans.rest_start, self.p_end, {r: s[2] for r, s in self.slow.items()})
        if name == "bodies":
            b0 = self.h.st + _HS
            return self._slices(b0, b0 + self.h.blen, {})
        if name == "msg_ids":
            return self._msg_ids()
        raise KeyError(name)

    def _slices(self, start: np.ndarray, end: np.ndarray, override: dict[int, bytes]) -> list[bytes]:
        buf = self.buf
        out = list(map(buf.__getitem__, map(slice, start.tolist(), end.tolist())))
        for r, v in override.items():
            out[r] = v
        return out

    def _keys(self) -> list[tuple[str, ...]]:
        sp = self.spans
        out: list[tuple[str, ...]] = [()] * len(self)
        rows = np.flatnonzero(sp.key_start >= 0)
        raw = self._slices(sp.key_start[rows], sp.key_end[rows], {})
        for r, k in zip(rows.tolist(), raw):
            out[r] = (k.decode("utf-8", "replace"),)
        for r, (_, keys, _) in self.slow.items():
            out[r] = keys
        return out

    def _msg_ids(self) -> list[str]:
        """Ids from each record's own STORE_HOST, so a slave serves the master's ids."""
        hosts, phys = self.h.hdr["store_host"], self.h.hdr["phy_offset"].astype(np.int64)
        if not len(hosts) or (hosts == hosts[0]).all():
            return codec.make_msg_ids(int(hosts[0]) if len(hosts) else self.store_host, phys)
        return [codec.make_msg_id(int(h), int(p)) for h, p in zip(hosts.tolist(), phys.tolist())]

    def take(self, idx: np.ndarray) -> RecordColumns:
        return RecordColumns(self.buf, self.h.take(idx), self.store_host)

    def _short_key_crcs(self, starts: np.ndarray, ends: np.ndarray, prefix: int) -> np.ndarray | None:
        """CRCs of keys of a few distinct short lengths, a byte column at a time (:func:`.crc_fold.crc32_rows`);
        None when the keys are too long or too varied for that."""
        lens = ends - starts
        if not len(lens):
            return np.empty(0, np.int64)
        if int(lens.max()) > _SHORT_KEY:
            return None
        groups = [int(lens[0])] if (lens == lens[0]).all() else np.unique(lens).tolist()
        if len(groups) > _KEY_LENGTHS:
            return None
        out = np.empty(len(lens), np.int64)
        for length in groups:
            rows = slice(None) if len(groups) == 1 else np.flatnonzero(lens == length)
            out[rows] = crc32_at(self.u8, starts[rows], length, prefix)
        return out

    def key_crcs(self, prefix_of: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
        """CRC32 of ``"{topic}#{key}"`` for every key (computed from the key's bytes), and its record row."""
        sp, topics = self.spans, self.topics
        rows = np.flatnonzero(sp.key_start >= 0)
        uniform = not topics or topics.count(topics[0]) == len(topics)
        prefixes: Iterable[int] = repeat(prefix_of[topics[0]]) if uniform and topics else \
            map(prefix_of.__getitem__, map(topics.__getitem__, rows.tolist()))
        starts, ends = sp.key_start[rows], sp.key_end[rows]
        crcs = self._short_key_crcs(starts, ends, prefix_of[topics[0]]) if uniform and topics else None
        if crcs is None:
            with memoryview(self.buf) as mv:
                keys = map(mv.__getitem__, map(slice, starts.tolist(), ends.tolist()))
                crcs = np.fromiter(map(crc32, keys, prefixes), np.int64, len(rows))
        if not self.slow:
            return crcs, rows
        extra = [(r, zlib.crc32(k.encode(), prefix_of[topics[r]])) for r, (_, ks, _) in self.slow.items() for k in ks]
        if not extra:
            return crcs, rows
        all_rows = np.concatenate([rows, np.array([r for r, _ in extra], np.int64)])
        all_crcs = np.concatenate([crcs, np.array([c for _, c in extra], np.int64)])
        order = np.argsort(all_rows, kind="stable")
        return all_crcs[order], all_rows[order]
