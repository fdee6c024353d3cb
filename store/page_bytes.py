"""Byte ranges of a CommitLog span copied out per page with numpy (the flat Arrow pull's bodies and
properties): ranges of one length by one numpy index of the span's sliding-window view, other
runs of equal, evenly spaced records as one strided copy each; no Python per record."""

from __future__ import annotations

import numpy as np

from .scanner import _arithmetic_runs

__all__ = ["equal_at", "gather", "rows_at", "spans"]


def rows_at(u8: np.ndarray, starts: np.ndarray, width: int) -> np.ndarray | None:
    """The ``width``-byte ranges at ``starts`` copied as the rows of a 2-D array by one numpy index
    (of the view whose row ``i`` is ``u8[i:i + width]``), or None when a range leaves ``u8``."""
    if not len(starts):
        return np.zeros((0, width), np.uint8)
    if width <= 0 or int(starts.min()) < 0 or int(starts.max()) + width > len(u8):
        return None
    windows = np.lib.stride_tricks.as_strided(u8, shape=(len(u8) - width + 1, width), strides=(u8.strides[0], 1),
                                              writeable=False)
    return windows[starts]


def spans(u8: np.ndarray, starts: np.ndarray, width: int) -> np.ndarray:
    """The ``width``-byte ranges at ``starts`` as a 2-D array (one row each)."""
    rows = rows_at(u8, starts, width)
    return u8[starts[:, None] + np.arange(width)] if rows is None else rows


def equal_at(u8: np.ndarray, starts: np.ndarray, value: np.ndarray) -> bool:
    """Whether the bytes at every one of ``starts`` equal ``value`` (a record's topic): one copy of
    them all when they lie inside ``u8``; else runs of evenly spaced starts are compared through one
    strided view each, the rest through one index."""
    width = len(value)
    rows = rows_at(u8, starts, width)
    if rows is not None:
        return bool((rows == value).all())
    todo = np.ones(len(starts), bool)
    for a, b in _arithmetic_runs(starts, 8):
        step = int(starts[a + 1] - starts[a])
        if step < width or int(starts[a]) < 0 or int(starts[b - 1]) + width > len(u8):
            continue  # overlapping, or not inside u8 (a strided view is not bounds-checked): left to the index
        view = np.lib.stride_tricks.as_strided(u8[int(starts[a]):], shape=(b - a, width), strides=(step, 1))
        if not (view == value).all():
            return False
        todo[a:b] = False
    rest = starts[todo]
    return bool((spans(u8, rest, width) == value).all()) if len(rest) else True


def gather(u8: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The ranges ``[start, start+length)`` back to back, and their int32 offsets (n + 1).

    Runs of equal, evenly spaced ranges (one put's records) are copied as one strided block
    each; the other ranges are gathered byte by byte with one index array."""
    offsets = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if len(lengths) and int(lengths[0]) > 0 and (lengths == lengths[0]).all():  # one length: one index
        rows = rows_at(u8, starts, int(lengths[0]))
        if rows is not None:
            return rows.reshape(-1), offsets.astype(np.int32)
    out = np.empty(int(offsets[-1]), np.uint8)
    todo = np.ones(len(starts), bool)
    for a, b in _arithmetic_runs(starts, 8):
        width = int(lengths[a])
        if width and (lengths[a:b] == width).all():
            out[offsets[a]:offsets[b]].reshape(b - a, width)[:] = np.lib.stride_tricks.as_strided(
                u8[int(starts[a]):], shape=(b - a, width), strides=(int(starts[a + 1] - starts[a]), 1))
            todo[a:b] = False
    rest = np.flatnonzero(todo)
    if len(rest):
        lens = lengths[rest]
        dest = np.repeat(offsets[rest], lens) + _within(lens)
        out[dest] = u8[np.repeat(starts[rest], lens) + _within(lens)]
    return out, offsets.astype(np.int32)  # the uint8 array itself: Arrow wraps it without a copy


def _within(lengths: np.ndarray) -> np.ndarray:
    """0, 1, ..., length - 1 for each length, back to back."""
    ends = np.cumsum(lengths)
    return np.arange(int(ends[-1]) if len(ends) else 0) - np.repeat(ends - lengths, lengths)
