"""Parse a run of CommitLog bytes into a columnar DispatchBatch.

Used by the reput service (dispatch) and by recovery (find the valid end).
Every record is checked: magic code, lengths that add up, the physical
offset it claims, and (when asked) its CRC: the whole-record CRC
(:mod:`.wcrc`), or the body CRC for a record written before it.  The scan stops at the
first record that fails, at a BLANK record, or at a record cut short by the
end of the chunk; the caller learns which.

Work is split so that Python pays per record only what cannot be avoided:

1. walk: a tight loop follows TOTAL_SIZE from record to record, and checks
   runs of equal-size records as one array;
2. headers: numpy gathers the 88-byte headers of all records at once and
   checks magic, physical offsets and lengths as arrays;
3. CRC (recovery): one zlib call per run of equal records (:mod:`.crc_fold`),
   one per record elsewhere;
4. columns (dispatch): topics and tags decoded per distinct value, tag and
   key spans found by numpy (:mod:`.record_columns`, :mod:`.props_scan`);
   bodies, keys and ids only when a dispatcher asks for them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np

from . import codec, wcrc
from .crc import crc32
from .crc_fold import run_ok
from .dispatch import DispatchBatch
from .record_columns import RecordColumns

__all__ = ["ScanStop", "ScanResult", "scan_chunk", "parse_at"]

_HS = codec.HEADER_SIZE
_MIN_RECORD = _HS + 3
_MSG = codec.MESSAGE_MAGIC
_BLANK = codec.BLANK_MAGIC
_SIZE_MAGIC = codec._SIZE_MAGIC


class ScanStop(enum.Enum):
    END = "end"  # consumed the whole chunk
    BLANK = "blank"  # reached the segment's BLANK filler
    SHORT = "short"  # the last record runs past the chunk
    INVALID = "invalid"  # a record failed a check


@dataclass(slots=True)
class ScanResult:
    batch: DispatchBatch
    consumed: int  # bytes of valid records parsed
    stop: ScanStop
    reason: str = ""


def _walk(buf: bytes) -> tuple[np.ndarray, ScanStop, str]:
    """Follow TOTAL_SIZE fields; returns record starts and why the walk ended.

    A Python step per record, except over runs of records of one size (the
    usual case: a batch of equal messages): after a few equal steps the walk
    checks the size and magic of the next records of the run as one array.
    """
    starts: list[int] = []
    runs: list[np.ndarray] = []
    append, unpack = starts.append, _SIZE_MAGIC.unpack_from
    u8 = np.frombuffer(buf, np.uint8)
    pos, end, prev, same = 0, len(buf), -1, 0
    while pos + 8 <= end:
        total, magic = unpack(buf, pos)
        if magic != _MSG or total < _MIN_RECORD or pos + total > end:
            break
        append(pos)
        pos += total
        if total != prev:
            prev, same = total, 0
            continue
        same += 1
        if same >= 4:
            k = _run_length(u8, pos, total)
            if k:
                runs += [np.array(starts, np.int64), pos + total * np.arange(k, dtype=np.int64)]
                starts.clear()
                pos += k * total
            same = 0
    out = np.concatenate([*runs, np.array(starts, np.int64)]) if runs else np.array(starts, np.int64)
    return (out, *_why_stopped(buf, pos))


def _run_length(u8: np.ndarray, pos: int, total: int) -> int:
    """How many whole records of ``total`` bytes with the message magic follow at ``pos``."""
    head = np.frombuffer(_SIZE_MAGIC.pack(total, _MSG), np.uint64)[0]  # the 8 bytes as one word
    k, width = 0, 64
    while True:
        fit = min(width, (len(u8) - pos) // total - k)
        if fit <= 0:
            return k
        base = pos + k * total
        words = np.ndarray((fit,), np.uint64, u8, base, (total,))  # each record's first 8 bytes, one word each
        bad = np.flatnonzero(words != head)
        if len(bad):
            return k + int(bad[0])
        k, width = k + fit, width * 4


def _why_stopped(buf: bytes, pos: int) -> tuple[ScanStop, str]:
    end = len(buf)
    if pos == end:
        return ScanStop.END, ""
    if pos + 8 > end:
        return ScanStop.SHORT, ""
    total, magic = _SIZE_MAGIC.unpack_from(buf, pos)
    if magic == _BLANK:
        return ScanStop.BLANK, ""
    if magic == _MSG and total >= _MIN_RECORD:
        return ScanStop.SHORT, ""
    return ScanStop.INVALID, f"bad magic {magic:#x} or size {total}"


def _first_false(ok: np.ndarray) -> int:
    bad = np.flatnonzero(~ok)
    return int(bad[0]) if len(bad) else len(ok)


@dataclass(slots=True)
class _Headers:
    hdr: np.ndarray
    st: np.ndarray
    total: np.ndarray
    blen: np.ndarray
    t_at: np.ndarray
    tlen: np.ndarray
    p_at: np.ndarray
    plen: np.ndarray
    ulen: np.ndarray  # the properties' length without the WCRC pair
    ok: np.ndarray  # per record: lengths add up and the offset is right

    def take(self, idx: np.ndarray | slice) -> _Headers:
        return _Headers(*(getattr(self, f)[idx] for f in self.__slots__))  # type: ignore[attr-defined]


_WORDS = _HS // 8  # a header is 11 eight-byte words


def _gather_headers(buf: bytes, st: np.ndarray) -> np.ndarray:
    """The 88-byte headers at ``st``.

    Runs of records at a fixed distance (equal sizes) are copied as one
    strided block each; the other records are gathered as 8-byte words (8x
    fewer elements than bytes), one word view per alignment class.
    """
    n = len(st)
    runs = _arithmetic_runs(st)
    if runs == [(0, n)]:  # one run of equal records (the usual chunk): a strided view, no copy
        return np.ndarray((n,), codec.HEADER_DTYPE, buf, int(st[0]), (int(st[1] - st[0]),))
    if n and int(st.min()) >= 0 and int(st.max()) + _HS <= len(buf):  # one index of the sliding-window view
        windows = np.lib.stride_tricks.as_strided(np.frombuffer(buf, np.uint8), shape=(len(buf) - _HS + 1, _HS),
                                                  strides=(1, 1), writeable=False)
        return windows[st].view(codec.HEADER_DTYPE).reshape(n)
    out = np.empty((n, _HS), np.uint8)
    todo = np.ones(n, bool)
    u8 = np.frombuffer(buf, np.uint8)
    for lo, hi in runs:
        out[lo:hi] = np.lib.stride_tricks.as_strided(u8[int(st[lo]):], shape=(hi - lo, _HS),
                                                     strides=(int(st[lo + 1] - st[lo]), 1))
        todo[lo:hi] = False
    rest = np.flatnonzero(todo)
    if len(rest):
        words_out = out.view("<u8")  # integers: numpy copies void items far slower
        align = st[rest] % 8
        for a in np.unique(align).tolist():
            sel = rest[align == a]
            words = np.frombuffer(buf, dtype="<u8", offset=a, count=(len(buf) - a) // 8)
            words_out[sel] = words[((st[sel] - a) // 8)[:, None] + _WORD_RANGE]
    return out.view(codec.HEADER_DTYPE).reshape(n)


def _arithmetic_runs(st: np.ndarray, shortest: int = 16) -> list[tuple[int, int]]:
    """[lo, hi) ranges of at least ``shortest`` records whose starts are equally spaced."""
    if len(st) < shortest:
        return []
    gaps = np.diff(st)
    edges = [0, *(np.flatnonzero(gaps[1:] != gaps[:-1]) + 1).tolist(), len(gaps)]
    return [(a, b + 1) for a, b in zip(edges[:-1], edges[1:]) if b + 1 - a >= shortest]


_WORD_RANGE = np.arange(_WORDS, dtype=np.int64)


def _headers(buf: bytes, base_offset: int, st: np.ndarray) -> _Headers:
    """Gather and check the headers of the records starting at ``st`` (all inside ``buf``)."""
    u8 = np.frombuffer(buf, np.uint8)
    hdr = _gather_headers(buf, st)
    total = hdr["total"].astype(np.int64)
    blen = hdr["body_len"].astype(np.int64)
    t_at = st + _HS + blen  # TOPIC_LENGTH byte
    ok = (blen >= 0) & (t_at + 3 <= st + total) & (hdr["phy_offset"] == base_offset + st) & (hdr["magic"] == _MSG)
    last = len(buf) - 1
    tlen = u8[np.clip(t_at, 0, last)].astype(np.int64)
    p_at = t_at + 1 + tlen  # PROPERTIES_LENGTH
    plen = u8[np.clip(p_at, 0, last)].astype(np.int64) * 256 + u8[np.clip(p_at + 1, 0, last)]
    ok &= p_at + 2 + plen == st + total
    sealed = (hdr["sys_flag"] & wcrc.FLAG) != 0
    ulen = plen - wcrc.LEN * sealed
    ok &= ulen >= 0
    return _Headers(hdr, st, total, blen, t_at, tlen, p_at, plen, ulen, ok)


def _crc_ok(buf: bytes, h: _Headers) -> np.ndarray:
    """Whether each record matches its CRCs (see :mod:`.wcrc`): its WCRC pair when its sys flag says it has
    one, else its body CRC (and no WCRC pair)."""
    u8 = np.frombuffer(buf, np.uint8)
    ends = h.st + h.total
    vals, formed = wcrc.values(u8, ends)
    sealed = h.ulen != h.plen
    if sealed.all():
        return formed & wcrc.matches(u8, h.st, h.total, vals, _arithmetic_runs(h.st, 64))  # type: ignore[no-any-return]
    ok = ~formed  # an unflagged record must not end with a WCRC pair
    old = np.flatnonzero(~sealed)
    ok[old] &= _body_crc_ok(buf, h.take(old))
    new = np.flatnonzero(sealed)
    if len(new):
        ok[new] = formed[new] & wcrc.matches(u8, h.st[new], h.total[new], vals[new], _arithmetic_runs(h.st[new], 64))
    return ok


def _body_crc_ok(buf: bytes, h: _Headers) -> np.ndarray:
    """Whether each record's body matches its CRC: a run of equal records at once
    (:mod:`.crc_fold`), and record by record where a run fails or there is none."""
    n = len(h.st)
    ok, todo = np.zeros(n, bool), np.ones(n, bool)
    u8 = np.frombuffer(buf, np.uint8)
    for lo, hi in _arithmetic_runs(h.st, 64):
        length = int(h.blen[lo])
        if length > 0 and (h.blen[lo:hi] == length).all() and run_ok(
                u8, int(h.st[lo]) + _HS, int(h.st[lo + 1] - h.st[lo]), hi - lo, length, h.hdr["crc"][lo:hi]):
            ok[lo:hi], todo[lo:hi] = True, False
    rows = np.flatnonzero(todo)
    if len(rows):
        b0 = h.st[rows] + _HS
        with memoryview(buf) as mv:  # C-level maps: no Python frame per record
            bodies = map(mv.__getitem__, map(slice, b0.tolist(), (b0 + h.blen[rows]).tolist()))
            crcs = np.fromiter(map(crc32, bodies), np.uint32, len(rows))
        ok[rows] = crcs == h.hdr["crc"][rows]
    return ok


def scan_chunk(buf: bytes, base_offset: int, *, check_crc: bool, store_host: int, collect: bool = True) -> ScanResult:
    """Parse records in ``buf``, whose first byte lies at log offset ``base_offset``.

    With ``collect=False`` only checks records (recovery); the batch is empty.
    """
    starts, stop, reason = _walk(buf)
    n = len(starts)
    h = _headers(buf, base_offset, starts)
    good = _first_false(h.ok)
    if check_crc and good:
        good = _first_false(_crc_ok(buf, h.take(slice(0, good))))
    if good < n:
        stop, reason = ScanStop.INVALID, f"record at {base_offset + starts[good]} fails its checks"
    consumed = int(starts[good]) if good < n else (int(h.st[-1] + h.total[-1]) if n else 0)
    batch = _columns(buf, h.take(slice(0, good if collect else 0)), store_host, base_offset + consumed)
    return ScanResult(batch, consumed, stop, reason)


def parse_at(buf: bytes, base_offset: int, starts: np.ndarray, store_host: int, *,
             sizes: np.ndarray | None = None, check_crc: bool = False) -> tuple[DispatchBatch, np.ndarray]:
    """Parse the records known (from ConsumeQueue units) to start at ``starts`` and, when given,
    to be ``sizes`` bytes long.  Returns the good records and the indices (into ``starts``) of
    those that fail their checks: structure, claimed offset, size, and with ``check_crc`` the body CRC.
    """
    room = (starts >= 0) & (starts + _MIN_RECORD <= len(buf))
    if sizes is not None:
        room &= (sizes >= _MIN_RECORD) & (starts + sizes <= len(buf))
    inside = np.flatnonzero(room)
    h = _headers(buf, base_offset, starts[inside])
    ok = h.ok & (h.total == sizes[inside] if sizes is not None else h.st + h.total <= len(buf))
    if check_crc and ok.all():
        ok = _crc_ok(buf, h)  # the usual page: no copy of the headers first
    elif check_crc and ok.any():
        good = np.flatnonzero(ok)
        ok[good] = _crc_ok(buf, h.take(good))
    if not ok.all():
        h = h.take(np.flatnonzero(ok))
    bad = np.setdiff1d(np.arange(len(starts)), inside[ok], assume_unique=True)
    return _columns(buf, h, store_host, base_offset + len(buf)), bad


def _columns(buf: bytes, h: _Headers, store_host: int, end_offset: int) -> DispatchBatch:
    src = RecordColumns(buf, h, store_host)
    hdr = h.hdr
    return DispatchBatch(
        topics=src.topics,
        queue_ids=hdr["queue_id"].astype(np.int32),
        queue_offsets=hdr["queue_offset"].astype(np.int64),
        phy_offsets=hdr["phy_offset"].astype(np.int64),
        sizes=hdr["total"].astype(np.int32),
        tag_codes=src.tag_codes,
        store_timestamps=hdr["store_ts"].astype(np.int64),
        born_timestamps=hdr["born_ts"].astype(np.int64),
        sys_flags=hdr["sys_flag"].astype(np.int32) & ~wcrc.FLAG,
        end_offset=end_offset,
        source=src,
    )
