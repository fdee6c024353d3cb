"""The fast whole-record CRC (store/record_crc.py) equals a plain zlib.crc32 of the record bytes.

Random column batches (equal and unequal body and key lengths, with and
without a tag and properties, random offsets) are encoded by the column path;
each record's WCRC digits must be ``zlib.crc32`` of its bytes up to them, and
the bytes must be those the per-record path writes (:func:`store.wcrc.seal`).
"""

from __future__ import annotations

import zlib

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from store import wcrc
from store.columns import prepare_columns
from store.packed import PackedBodies
from store.record_crc import row_crcs, zero_shift

_KEY = st.text(alphabet="abcXYZ019-_é", min_size=1, max_size=6)


@st.composite
def _batches(draw: st.DrawFn) -> dict:
    n = draw(st.integers(1, 40))
    equal = draw(st.booleans())
    if equal:
        body = draw(st.binary(min_size=0, max_size=64))
        bodies = [body if draw(st.booleans()) else draw(st.binary(min_size=len(body), max_size=len(body)))
                  for _ in range(n)]
    else:
        bodies = draw(st.lists(st.binary(max_size=64), min_size=n, max_size=n))
    keys = None
    kind = draw(st.sampled_from(["none", "equal", "any"]))
    if kind == "equal":
        width = draw(st.integers(1, 5))
        keys = draw(st.lists(st.text(alphabet="abc012", min_size=width, max_size=width), min_size=n, max_size=n))
    elif kind == "any":
        keys = draw(st.lists(_KEY, min_size=n, max_size=n))
    return dict(bodies=bodies, keys=keys, tags=draw(st.none() | st.sampled_from(["TagA", "t"])),
                props=draw(st.sampled_from([None, {"p": "v"}, {"TRAN": "1", "x": "yz"}])),
                packed=draw(st.booleans()), phy0=draw(st.integers(0, 1 << 40)), qoff0=draw(st.integers(0, 1 << 33)),
                crc_step=draw(st.sampled_from([0, 1, 255, 1 << 20])), lo=draw(st.integers(0, n - 1)))


def _records(buf: bytes, sizes: np.ndarray) -> list[bytes]:
    ends = np.cumsum(sizes).tolist()
    return [buf[e - s:e] for e, s in zip(ends, sizes.tolist())]


@settings(max_examples=150, deadline=None)
@given(_batches())
def test_column_records_carry_the_crc32_of_their_bytes(case: dict) -> None:
    bodies = PackedBodies.from_bytes(case["bodies"]) if case["packed"] else case["bodies"]
    extra = (case["props"], 0) if case["props"] else None
    batch = prepare_columns("topic-a", 3, bodies, keys=case["keys"], tags=case["tags"], born_ts=1_700_000_000_123,
                            born_host=0x7F00000100001F90, max_size=1 << 20, extra=extra)
    lo, n = case["lo"], len(case["bodies"])
    sizes = batch.sizes[lo:n]
    phys = case["phy0"] + np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    qoffs = case["qoff0"] + np.arange(n - lo, dtype=np.int64)
    scratch = np.full(1 << 16, 0xAA, np.uint8)  # stale bytes in a reused buffer must not leak into a record
    buf = bytes(batch.encode(lo, n, phys, qoffs, 1_700_000_000_999, 0x0A00000200002A00, scratch))
    assert len(buf) == int(sizes.sum())
    for rec, size in zip(_records(buf, sizes), sizes.tolist()):
        assert int(rec[size - 9:size - 1], 16) == zlib.crc32(rec[:size - 9])
        assert rec.endswith(b"\x02") and rec[size - wcrc.LEN:size - 9] == wcrc.MARK
    assert bytes(wcrc.seal(bytearray(buf), sizes)) == buf  # the same bytes as one zlib call per record


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 30), st.integers(0, 40), st.data())
def test_row_crcs_and_shifts_match_zlib(n: int, width: int, data: st.DataObject) -> None:
    base = data.draw(st.binary(min_size=width, max_size=width))
    rows = [bytes(b ^ m for b, m in zip(base, data.draw(st.binary(min_size=width, max_size=width))))
            if data.draw(st.booleans()) else base for _ in range(n)]
    mat = np.frombuffer(b"".join(rows), np.uint8).reshape(n, width)
    assert row_crcs(mat).tolist() == [zlib.crc32(r) for r in rows]
    tails = [data.draw(st.binary(max_size=300)) for _ in range(n)]
    heads = np.array([zlib.crc32(r) for r in rows], np.uint32)
    got = zero_shift(heads, np.array([len(t) for t in tails])) ^ np.array([zlib.crc32(t) for t in tails], np.uint32)
    assert got.tolist() == [zlib.crc32(r + t) for r, t in zip(rows, tails)]
