"""Vectorised parsing of the properties of a whole batch of records.

Properties (layout in :mod:`.codec`) start with the reserved pairs, each
optional and in this order, then the user pairs::

    TAGS \\x01 tag \\x02   KEYS \\x01 key (\\x03 key)* \\x02   name \\x01 value \\x02 ...

:func:`parse_spans` finds, for every record at once, where its tag and its key
lie and where the user pairs start, with numpy gathers of a few bytes per
record (no Python per record).  Records it cannot place that way (several
keys, a tag or key longer than the widest probe, a separator where none may
be) are marked ``slow``: the caller parses those one by one with
:func:`.codec.split_properties`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

__all__ = ["PropSpans", "all_same", "parse_spans", "unique_spans"]

_TAGS = np.frombuffer(b"TAGS\x01", np.uint8)
_KEYS = np.frombuffer(b"KEYS\x01", np.uint8)
_GUESS_MAX = 64  # a guessed span longer than this is probed instead
_WIDTHS = (16, 256)  # probe widths for a tag's or key's end; longer ones take the slow path
_SEPARATOR = re.compile(rb"[\x00-\x03]")
_MATRIX_BYTES = 1 << 12  # all_same compares at most this many bytes as one index matrix


@dataclass(slots=True)
class PropSpans:
    """Byte positions in the scanned buffer, one entry per record (-1: absent)."""

    tag_start: np.ndarray
    tag_end: np.ndarray  # exclusive
    key_start: np.ndarray  # a single key
    key_end: np.ndarray
    rest_start: np.ndarray  # the user pairs run from here to the end of the properties
    slow: np.ndarray  # bool: parse this record one by one


def _has_prefix(u8: np.ndarray, at: np.ndarray, limit: np.ndarray, pat: np.ndarray) -> np.ndarray:
    """Whether the bytes at ``at`` (before ``limit``) start with ``pat``."""
    if not len(at):
        return np.zeros(0, bool)
    ok = at + len(pat) < limit
    for i, b in enumerate(pat.tolist()):  # one byte column at a time: no n x width index matrix
        ok &= u8.take(at + i, mode="clip") == b
    return ok


def _first_separator(u8: np.ndarray, start: np.ndarray, limit: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Position and value of the first byte <= 3 in ``[start, limit)``: (-1, 255) when the probes find none."""
    n = len(start)
    pos, byte = np.full(n, -1, np.int64), np.full(n, 255, np.uint8)
    todo = np.arange(n)
    for width in _WIDTHS:
        if not len(todo):
            break
        s, room = start[todo], limit[todo] - start[todo]
        w = int(min(width, max(int(room.max()), 1)))
        mat = u8.take(s[:, None] + np.arange(w), mode="clip")
        hit = mat <= 3
        first = hit.argmax(axis=1)
        rows = np.arange(len(todo))
        found = hit[rows, first] & (first < room)
        pos[todo[found]] = s[found] + first[found]
        byte[todo[found]] = mat[rows, first][found]
        todo = todo[~found & (room > w)]
    return pos, byte


def _speculate(u8: np.ndarray, start: np.ndarray, limit: np.ndarray,
               guess: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Like :func:`_first_separator`, guessing first where each span ends: at ``start + guess``
    when given (a key that runs to the end of the properties), else at the length of the first
    span for all (one tag for a whole batch; keys of one length).  Rows that fit the guess cost a
    few byte-column gathers; the others are probed again (with the second guess, then byte by byte)."""
    n = len(start)
    pos, byte = np.full(n, -1, np.int64), np.full(n, 255, np.uint8)
    if not n:
        return pos, byte
    given = guess is not None
    if guess is None:
        first, _ = _first_separator(u8, start[:1], limit[:1])
        guess = np.full(n, int(first[0] - start[0]) if first[0] >= 0 else 0, np.int64)
    ok = (guess > 0) & (guess <= _GUESS_MAX) & (start + guess < limit)
    ok &= u8.take(start + guess, mode="clip") == 2
    live = np.flatnonzero(ok)
    for i in range(int(guess[live].max(initial=0))):  # every byte before the guessed end must be plain (> 3)
        live = live[guess[live] > i]
        bad = u8.take(start[live] + i) <= 3
        if bad.any():
            ok[live[bad]] = False
            live = live[~bad]
    pos[ok], byte[ok] = start[ok] + guess[ok], 2
    rest = np.flatnonzero(~ok)
    if len(rest):
        probe = _speculate if given else _first_separator
        pos[rest], byte[rest] = probe(u8, start[rest], limit[rest])
    return pos, byte


def parse_spans(u8: np.ndarray, p0: np.ndarray, pe: np.ndarray) -> PropSpans:
    """Tag and key spans of the records whose properties are ``u8[p0:pe]``."""
    uniform = _uniform_spans(u8, p0, pe)
    if uniform is not None:
        return uniform
    return _probe_spans(u8, p0, pe)


def _probe_spans(u8: np.ndarray, p0: np.ndarray, pe: np.ndarray) -> PropSpans:
    n = len(p0)
    tag_start, tag_end = np.full(n, -1, np.int64), np.full(n, -1, np.int64)
    key_start, key_end = np.full(n, -1, np.int64), np.full(n, -1, np.int64)
    slow = np.zeros(n, bool)
    after = p0.astype(np.int64, copy=True)
    rows = np.flatnonzero(_has_prefix(u8, p0, pe, _TAGS))
    if len(rows):
        s = p0[rows] + 5
        pos, byte = _speculate(u8, s, pe[rows])
        good = (pos > s) & (byte == 2)
        slow[rows[~good]] = True
        g = rows[good]
        tag_start[g], tag_end[g], after[g] = s[good], pos[good], pos[good] + 1
    rows = np.flatnonzero(_has_prefix(u8, after, pe, _KEYS) & ~slow)
    if len(rows):
        s = after[rows] + 5
        pos, byte = _speculate(u8, s, pe[rows], pe[rows] - 1 - s)  # a lone key closes the properties
        good = (pos > s) & (byte == 2)
        slow[rows[~good]] = True
        g = rows[good]
        key_start[g], key_end[g], after[g] = s[good], pos[good], pos[good] + 1
    return PropSpans(tag_start, tag_end, key_start, key_end, after, slow)


def _uniform_spans(u8: np.ndarray, p0: np.ndarray, pe: np.ndarray) -> PropSpans | None:
    """The spans of records laid out alike (a run of equal records: properties of one length at one
    distance), when every record's properties have row 0's structure: the same separator bytes at the
    same places, the same reserved names, and no other separator.  Then every span is row 0's,
    shifted.  None when the records are not laid out alike or one differs."""
    n = len(p0)
    if n < 2:
        return None
    plen, stride = int(pe[0] - p0[0]), int(p0[1] - p0[0])
    if plen <= 0 or stride < plen or not ((pe - p0) == plen).all() or not (np.diff(p0) == stride).all():
        return None
    first = int(p0[0])
    raw = u8[first:first + plen].tobytes()
    one = _row_spans(raw)
    if one is None:
        return None
    tag_start, tag_end, key_start, key_end, rest_start = one
    rows = np.lib.stride_tricks.as_strided(u8[first:], shape=(n, plen), strides=(stride, 1))
    seps = [m.start() for m in _SEPARATOR.finditer(raw)]
    # where a reserved name ("TAGS", "KEYS") is looked for: at the start, and after row 0's tag
    spots = [0] + ([tag_end + 1] if tag_start >= 0 else [])
    fixed = np.array(sorted({*seps, *(at + i for at in spots for i in range(5) if at + i < plen)}), np.int64)
    if not (rows[:, fixed] == rows[0, fixed]).all() or np.count_nonzero(rows <= 3) != n * len(seps):
        return None

    def shifted(at: int) -> np.ndarray:
        return p0 + at if at >= 0 else np.full(n, -1, np.int64)

    return PropSpans(shifted(tag_start), shifted(tag_end), shifted(key_start), shifted(key_end),
                     shifted(rest_start), np.zeros(n, bool))


def _row_spans(raw: bytes) -> tuple[int, int, int, int, int] | None:
    """One record's spans, as offsets into its properties ``raw`` (-1: absent): (tag start, tag end,
    key start, key end, user pairs start).  The same answer :func:`_probe_spans` gives for one row,
    without numpy's fixed costs; None where that would mark the row ``slow``."""
    at, tag, key = 0, (-1, -1), (-1, -1)
    for name in (b"TAGS\x01", b"KEYS\x01"):
        if not raw.startswith(name, at) or at + len(name) >= len(raw):
            continue
        start = at + len(name)
        end = _SEPARATOR.search(raw, start)
        if end is None or end.group() != b"\x02" or end.start() == start:  # several keys, or an empty span
            return None
        if name == b"TAGS\x01":
            tag = (start, end.start())
        else:
            key = (start, end.start())
        at = end.start() + 1
    return (*tag, *key, at)


def all_same(u8: np.ndarray, start: np.ndarray, length: int) -> bool:
    """Whether the ``length`` bytes at every ``start`` equal those at ``start[0]`` (a byte column at a time)."""
    first = int(start[0])
    if len(start) * length <= _MATRIX_BYTES:  # small: one gather, not a numpy call per byte
        mat = u8.take(start[:, None] + np.arange(length))
        return bool((mat == u8[first:first + length]).all())
    return all(bool((u8.take(start + i) == u8[first + i]).all()) for i in range(length))


def unique_spans(u8: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, list[bytes]]:
    """Distinct byte strings among ``u8[start:end]`` per row: (index into the list per row, the list)."""
    n = len(start)
    lens = end - start
    if not n:
        return np.zeros(0, np.int64), []
    if (lens == lens[0]).all() and all_same(u8, start, int(lens[0])):
        first = int(start[0])
        return np.zeros(n, np.int64), [u8[first:first + int(lens[0])].tobytes()]
    inv = np.empty(n, np.int64)
    found: list[bytes] = []
    for length in np.unique(lens).tolist():
        rows = np.flatnonzero(lens == length)
        mat = np.ascontiguousarray(u8[start[rows][:, None] + np.arange(length)])
        values, which = np.unique(mat.view(f"V{length}").ravel(), return_inverse=True)
        inv[rows] = which.ravel() + len(found)
        found += [v.tobytes() for v in values]
    return inv, found
