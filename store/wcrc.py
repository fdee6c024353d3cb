"""The whole-record CRC: every byte of a record checked, not only its body.

RocketMQ's layout (drawn in :mod:`.codec`) has a CRC of the body only.  A
record written by this store also ends its properties with a reserved pair,
and sets a sys flag bit that says so::

    ... | PROPERTIES: [TAGS][KEYS] user pairs  W C R C \\x01 h h h h h h h h \\x02 |
        ^ record start                          ^ total-14           ^ total-9  ^ total-1

    WCRC     = zlib.crc32(record[0 : total - 9])   (header, body, topic, properties up to the digits)
    digits   = WCRC as 8 upper-case hex characters
    SYS_FLAG bit 16 (SysFlag.WHOLE_CRC) set

No field is rewritten after the append (a slave writes the master's bytes),
so the CRC covers all of them; the digits are checked by being the CRC and
the closing ``\\x02`` by its value.  The flag makes a flipped trailer byte
damage too: a flagged record must end with the pair, an unflagged one must
not.  Records without the flag (written before it existed) are checked body
only, as before.  Readers hand out the properties without the pair and the
sys flag without the bit.
"""

from __future__ import annotations

import numpy as np

from .crc import crc32
from .crc_fold import run_ok, spans_ok

__all__ = ["FLAG", "LEN", "MARK", "PLACEHOLDER", "looks_sealed", "matches", "seal", "seal_rows", "trailer_ok", "values"]

FLAG = 1 << 16
MARK = b"WCRC\x01"
LEN = len(MARK) + 8 + 1  # 14
PLACEHOLDER = MARK + b"00000000\x02"
_DIGITS = np.arange(8, dtype=np.int64)
_SIZE_GROUPS = 8  # records of at most this many sizes are checked one gather per size


_HEX2 = np.frombuffer(b"".join(b"%02X" % i for i in range(256)), np.uint16)  # byte -> its 2 digits
_UNHEX2 = np.full(1 << 16, 0xFFFF, np.uint16)  # 2 digits (as a little-endian uint16) -> their byte
_UNHEX2[np.frombuffer(b"".join(b"%02X" % i for i in range(256)), "<u2")] = np.arange(256, dtype=np.uint16)
_FIXED_AT = np.array([*range(len(MARK)), LEN - 1])  # the trailer bytes that are not digits: the mark, \x02
_FIXED = np.frombuffer(MARK + b"\x02", np.uint8)


def _hex(crcs: np.ndarray) -> np.ndarray:
    """(n, 8) upper-case hex digits of ``crcs``: one 2-digit lookup per byte (big-endian)."""
    n = len(crcs)
    return _HEX2.take(crcs.astype(">u4").view(np.uint8)).view(np.uint8).reshape(n, 8)


def seal(buf: bytearray, sizes: np.ndarray | list[int], crcs: np.ndarray | None = None) -> bytearray:
    """Write the WCRC digits of the records that lie back to back in ``buf`` (``sizes`` bytes each);
    ``crcs``: their WCRCs when the caller knows them (:mod:`.record_crc`), else computed here."""
    ends = np.cumsum(np.asarray(sizes, np.int64))
    cut = ends - 9
    if crcs is None:
        starts = ends - np.asarray(sizes, np.int64)
        with memoryview(buf) as mv:
            crcs = np.fromiter(map(crc32, map(mv.__getitem__, map(slice, starts.tolist(), cut.tolist()))),
                               np.uint32, len(ends))
    u8 = np.frombuffer(buf, np.uint8)
    u8[cut[:, None] + _DIGITS] = _hex(crcs)
    del u8
    return buf


def seal_rows(out: np.ndarray, crcs: np.ndarray | None = None) -> None:
    """Write the WCRC digits of the equal records that are the rows of ``out`` (n x record size, uint8);
    ``crcs``: their WCRCs when the caller knows them (:mod:`.record_crc`), else computed here."""
    n, size = out.shape
    if crcs is None:
        with memoryview(out.reshape(-1)) as mv:
            starts = range(0, n * size, size)
            crcs = np.fromiter(map(crc32, map(mv.__getitem__, map(slice, starts, range(size - 9, n * size, size)))),
                               np.uint32, n)
    out[:, size - 9:size - 1] = _hex(crcs)


def values(u8: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(WCRC values, whether the trailer is well formed) of the records ending at ``ends``: the
    trailers gathered as rows, their digits read two at a time."""
    n = len(ends)
    if not n:
        return np.zeros(0, np.uint32), np.zeros(0, bool)
    inside = (ends >= LEN) & (ends <= len(u8))  # a trailer outside the buffer is not well formed
    if len(u8) < LEN:
        return np.zeros(n, np.uint32), np.zeros(n, bool)
    rows = np.lib.stride_tricks.as_strided(u8, shape=(len(u8) - LEN + 1, LEN), strides=(u8.strides[0], 1),
                                           writeable=False)[np.clip(ends - LEN, 0, len(u8) - LEN)]
    ok = inside & (rows[:, _FIXED_AT] == _FIXED).all(axis=1)
    pairs = _UNHEX2.take(np.ascontiguousarray(rows[:, len(MARK):LEN - 1]).view("<u2"))  # (n, 4): byte or 0xFFFF
    ok &= (pairs < 256).all(axis=1)
    return pairs.astype(np.uint8).view(">u4").reshape(n).astype(np.uint32), ok


def matches(u8: np.ndarray, st: np.ndarray, total: np.ndarray, want: np.ndarray,
            runs: list[tuple[int, int]]) -> np.ndarray:
    """Whether ``crc32(record[0:total-9])`` equals ``want`` for each record: one gather and zlib call
    per record size when there are a few sizes (:func:`.crc_fold.spans_ok`), else one per run
    (``runs``: [lo, hi) of records at equal distance) of equal records (:func:`.crc_fold.run_ok`);
    one per record elsewhere and where a group or run fails."""
    n = len(st)
    if n and (total == total[0]).all() and spans_ok(u8, st, int(total[0]) - 9, want):
        return np.ones(n, bool)  # records of one size: one gather, one zlib call; else found run by run
    ok, todo = np.zeros(n, bool), np.ones(n, bool)
    sizes = np.unique(total) if n else total
    if 1 < len(sizes) <= _SIZE_GROUPS:  # a few sizes (a producer's batches, each first record stamped): one per size
        for size in sizes.tolist():
            rows = np.flatnonzero(total == size)
            if len(rows) > 1 and spans_ok(u8, st[rows], size - 9, want[rows]):
                ok[rows], todo[rows] = True, False
    for lo, hi in runs:
        size = int(total[lo])
        if todo[lo:hi].all() and (total[lo:hi] == size).all() and int(st[lo + 1] - st[lo]) == size and \
                run_ok(u8, int(st[lo]), size, hi - lo, size - 9, want[lo:hi]):
            ok[lo:hi], todo[lo:hi] = True, False
    rows = np.flatnonzero(todo)
    if len(rows):
        with memoryview(u8) as mv:
            got = np.fromiter(map(crc32, map(mv.__getitem__, map(slice, st[rows].tolist(),
                                                                  (st[rows] + total[rows] - 9).tolist()))),
                              np.uint32, len(rows))
        ok[rows] = got == want[rows]
    return ok


def trailer_ok(buf: bytes | memoryview, end: int, start: int) -> bool:
    """Whether the record ``buf[start:end]`` ends with a well-formed pair whose digits are its WCRC."""
    if end - start < LEN or bytes(buf[end - LEN:end - 9]) != MARK or buf[end - 1] != 2:
        return False
    digits = bytes(buf[end - 9:end - 1])
    if any(c not in b"0123456789ABCDEF" for c in digits):
        return False
    return int(digits, 16) == crc32(buf[start:end - 9])


def looks_sealed(buf: bytes | memoryview, end: int, start: int) -> bool:
    """Whether the record's properties end like a WCRC pair (an unflagged record must not)."""
    return end - start >= LEN and bytes(buf[end - LEN:end - 9]) == MARK and buf[end - 1] == 2
