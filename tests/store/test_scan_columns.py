"""The batch scanner's vectorised columns (walk over runs, tag and key spans, lazy lists) agree
with the per-record decoder, record for record, for any mix of messages."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from store import Message, codec
from store.index_service import key_hash
from store.crc import crc32
from store.crc_fold import _fold, crc32_at, crc32_rows, run_ok, spans_ok
from store.scanner import ScanStop, scan_chunk

HOST = codec.encode_host("10.1.2.3:10911")
_chars = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00\x01\x02\x03")
_text = st.text(alphabet=_chars, min_size=1, max_size=20) | st.text(alphabet="ab", min_size=200, max_size=300)
messages = st.builds(
    Message,
    topic=st.sampled_from(["t", "orders", "ü-topic"]),
    body=st.binary(max_size=60),
    queue_id=st.integers(0, 3),
    keys=st.lists(_text, max_size=3).map(tuple),
    tags=st.none() | st.sampled_from(["TagA", "TagB", "a-much-longer-tag-value"]) | _text,
    properties=st.dictionaries(st.sampled_from(["p", "q", "name"]), st.text(alphabet=_chars, max_size=10),
                               max_size=2),
)


def _encode(msgs: list[Message]) -> bytes:
    batch = codec.prepare_batch(msgs, 1234, HOST, 1 << 20)
    phys = np.concatenate(([0], np.cumsum(batch.sizes)[:-1])).astype(np.int64)
    return codec.encode_batch(batch, 0, len(msgs), phys.tolist(), list(range(len(msgs))), 999, HOST)


def _check(msgs: list[Message]) -> None:
    data = _encode(msgs)
    res = scan_chunk(data, 0, check_crc=True, store_host=HOST)
    assert res.stop is ScanStop.END and res.consumed == len(data)
    b = res.batch
    assert b.topics == [m.topic for m in msgs]
    assert b.keys == [m.keys for m in msgs]
    assert b.tags == [m.tags for m in msgs]
    assert [b.properties(i) for i in range(len(msgs))] == [dict(m.properties) for m in msgs]
    assert b.bodies == [m.body for m in msgs]
    assert b.tag_codes.tolist() == [codec.tag_code(m.tags) for m in msgs]
    assert b.msg_ids == [codec.make_msg_id(HOST, int(p)) for p in b.phy_offsets]
    assert b.source is not None
    crcs, rows = b.source.key_crcs({t: zlib.crc32(f"{t}#".encode()) for t in set(b.topics)})
    want = [(i, key_hash(m.topic, k)) for i, m in enumerate(msgs) for k in m.keys]
    assert list(zip(rows.tolist(), (crcs & 0x7FFFFFFF).tolist())) == want
    picked = b.take(np.arange(len(msgs))[::-2])
    assert picked.keys == [m.keys for m in msgs][::-2] and picked.bodies == [m.body for m in msgs][::-2]


@settings(max_examples=80, deadline=None)
@given(st.lists(messages, min_size=1, max_size=30))
def test_any_mix_of_messages_scans_like_the_decoder(msgs: list[Message]) -> None:
    _check(msgs)


def test_long_runs_of_equal_records_and_a_change_of_size() -> None:
    msgs = [Message(topic="t", body=b"x" * 100, keys=(f"k{i:04d}",), tags="TagA") for i in range(700)]
    msgs += [Message(topic="t", body=b"y" * 7, keys=(f"key-{i}", "second"), tags="TagB") for i in range(50)]
    msgs += [Message(topic="u", body=b"z" * 100, keys=(f"k{i:04d}",)) for i in range(300)]
    _check(msgs)


def test_a_garbled_record_inside_a_run_stops_the_scan_there() -> None:
    msgs = [Message(topic="t", body=b"x" * 100, keys=(f"k{i:04d}",), tags="TagA") for i in range(500)]
    data = bytearray(_encode(msgs))
    size = len(data) // 500
    data[size * 321 + 5] ^= 0xFF  # the magic of record 321
    res = scan_chunk(bytes(data), 0, check_crc=True, store_host=HOST)
    assert res.stop is ScanStop.INVALID and res.consumed == size * 321 and len(res.batch) == 321
    data = bytearray(_encode(msgs))
    data[size * 400 + 88 + 3] ^= 0xFF  # a body byte of record 400: only the CRC sees it
    res = scan_chunk(bytes(data), 0, check_crc=True, store_host=HOST)
    assert res.stop is ScanStop.INVALID and res.consumed == size * 400


def test_a_record_cut_short_after_a_run_is_reported_short() -> None:
    msgs = [Message(topic="t", body=b"x" * 100, keys=(f"k{i:04d}",)) for i in range(100)]
    data = _encode(msgs)
    res = scan_chunk(data[:-10], 0, check_crc=True, store_host=HOST)
    assert res.stop is ScanStop.SHORT and len(res.batch) == 99



@settings(max_examples=40, deadline=None)
@given(st.integers(1, 400), st.integers(1, 300), st.integers(0, 40), st.integers(0, 2**32 - 1),
       st.sampled_from(["none", "body", "crc"]))
def test_run_crc_check_agrees_with_zlib(count: int, length: int, gap: int, seed: int, damage: str) -> None:
    """The folded check of a run passes exactly when every body matches its CRC (single damage)."""
    rng = np.random.default_rng(seed)
    stride = length + gap
    u8 = rng.integers(0, 256, count * stride, dtype=np.uint8)
    crcs = np.array([zlib.crc32(u8[i * stride:i * stride + length].tobytes()) for i in range(count)], np.uint32)
    victim = int(rng.integers(0, count))
    if damage == "body":
        u8[victim * stride + int(rng.integers(0, length))] ^= 1 << int(rng.integers(0, 8))
    elif damage == "crc":
        crcs[victim] ^= np.uint32(1 << int(rng.integers(0, 32)))
    assert run_ok(u8, 0, stride, count, length, crcs) is (damage == "none")


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 5000), st.integers(1, 300), st.integers(0, 2**32 - 1), st.sampled_from(["none", "body", "crc"]))
def test_spans_crc_check_agrees_with_zlib(count: int, length: int, seed: int, damage: str) -> None:
    """Strings of one length at uneven places (the records of a page, other queues' between them):
    the one-gather check passes exactly when every string matches its CRC (single damage), and the
    fold of the CRCs is the CRC of the strings side by side (64 at a time, then 64 of those, ...)."""
    rng = np.random.default_rng(seed)
    count = min(count, 40_000 // length + 1)
    starts = np.cumsum(length + rng.integers(0, 3, count) * rng.integers(0, 50, count)) - length
    u8 = rng.integers(0, 256, int(starts[-1]) + length + int(rng.integers(0, 9)), dtype=np.uint8)
    strings = [u8[s:s + length].tobytes() for s in starts.tolist()]
    crcs = np.array([zlib.crc32(x) for x in strings], np.uint32)
    assert _fold(crcs, length) == zlib.crc32(b"".join(strings))
    victim = int(rng.integers(0, count))
    if damage == "body":
        u8[int(starts[victim]) + int(rng.integers(0, length))] ^= 1 << int(rng.integers(0, 8))
    elif damage == "crc":
        crcs[victim] ^= np.uint32(1 << int(rng.integers(0, 32)))
    assert spans_ok(u8, starts, length, crcs) is (damage == "none")


def test_recovery_scan_names_a_damaged_body_inside_a_long_run() -> None:
    msgs = [Message(topic="t", body=bytes([i % 200]) * 100, keys=(f"k{i:04d}",)) for i in range(3000)]
    data = bytearray(_encode(msgs))
    size = len(data) // 3000
    data[size * 2222 + 88 + 50] ^= 0x10
    res = scan_chunk(bytes(data), 0, check_crc=True, store_host=HOST)
    assert res.stop is ScanStop.INVALID and res.consumed == size * 2222


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 50), st.integers(0, 64), st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1))
def test_byte_column_crcs_agree_with_zlib(count: int, length: int, start: int, seed: int) -> None:
    """crc32_at / crc32_rows (the index's key hashes by byte columns) give zlib.crc32 of every string."""
    rng = np.random.default_rng(seed)
    mat = rng.integers(0, 256, (count, length), dtype=np.uint8)
    want = [zlib.crc32(row.tobytes(), start) for row in mat]
    assert crc32_rows(mat, start).tolist() == want
    u8 = rng.integers(0, 256, count * 3 + length + 5, dtype=np.uint8)
    at = rng.integers(0, count * 3 + 5, count)
    assert crc32_at(u8, at, length, start).tolist() == [zlib.crc32(u8[s:s + length].tobytes(), start) for s in at]


def test_one_topic_keys_of_many_lengths_hash_like_the_decoder() -> None:
    """Keys of one topic in a few short lengths (hashed by byte columns), with long, multiple and
    missing keys and user properties mixed in, hash to what key_hash gives each key."""
    keys = [(f"k{i}",) for i in range(1200)] + [("x" * 60,), ("a", "b"), (), ("ü-é",)] * 5
    msgs = [Message(topic="orders", body=b"b", keys=k, tags="T" if i % 3 else None,
                    properties={"p": "v"} if i % 7 == 0 else {}) for i, k in enumerate(keys)]
    _check(msgs)


@pytest.mark.parametrize("odd", [
    Message(topic="orders", body=b"b" * 10, keys=("k", "1"), tags="TagA"),  # two keys where one is expected
    Message(topic="orders", body=b"b" * 10, keys=("k99",), tags="TagB"),  # another tag, same layout
    Message(topic="orders", body=b"b" * 10, keys=(), tags="TagA", properties={"k": "123456"}),  # a property, no key
    Message(topic="orders", body=b"b" * 10, keys=("TAGS-TagA-k0a",)),  # no tag, a key that looks like one
    Message(topic="orders", body=b"b" * 10, keys=("k77",), properties={"TAGX": "TagA"}),  # a property, no tag
])
def test_equal_records_with_one_of_another_structure_scan_like_the_decoder(odd: Message) -> None:
    """A run of records of one size and layout is parsed as row 0's layout shifted; a record of the
    same size but another structure in the middle of it must still come out right."""
    msgs = [Message(topic="orders", body=b"b" * 10, keys=(f"k{i:02d}",), tags="TagA") for i in range(100)]
    assert len(_encode(msgs[:1])) == len(_encode([odd]))  # the same size: the run is not broken
    msgs[57] = odd
    _check(msgs)


@settings(max_examples=40, deadline=None)
@given(st.binary(max_size=3000), st.integers(0, 2**32 - 1))
def test_the_store_crc_is_zlibs(data: bytes, start: int) -> None:
    """store.crc.crc32 (ISA-L when installed) gives zlib.crc32's values: records written by either read back."""
    assert crc32(data, start) == zlib.crc32(data, start) and crc32(data) == zlib.crc32(data)
    assert crc32(memoryview(data)[1:]) == zlib.crc32(data[1:])


def test_a_key_among_records_whose_property_has_the_same_layout_is_found() -> None:
    """Row 0 holds a user property laid out like a key ("XEYS\\x01k00\\x02"); a record with a real key
    ("KEYS\\x01k57\\x02", same size, same separators) in the run must still have its key."""
    msgs = [Message(topic="orders", body=b"b" * 10, properties={"XEYS": f"k{i:02d}"}) for i in range(100)]
    msgs[57] = Message(topic="orders", body=b"b" * 10, keys=("k57",))
    assert len(_encode(msgs[:1])) == len(_encode(msgs[57:58]))
    _check(msgs)


_SHAPES = ("key", "tag+key", "tag", "two keys", "prop", "tag+prop", "key+prop", "tag+key+prop", "none")


def _shaped(shape: str, fill: str, tag: str) -> Message:
    """A message of ``shape`` whose one free text is ``fill`` (a key, else a property value, else the tag)."""
    keys: tuple[str, ...] = ()
    props: dict[str, str] = {}
    tags = tag if "tag" in shape else None
    if shape == "two keys":
        keys = ("k", fill)
    elif "key" in shape:
        keys = (fill,)
    if "prop" in shape:
        props = {"p": fill if not keys else "v"}
    if shape == "tag":
        tags = fill
    return Message(topic="orders", body=b"", keys=keys, tags=tags, properties=props)


_TAG_TEXT = st.sampled_from(["TagA", "TagB", "KEYS", "TAGS"])


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(_SHAPES), st.lists(_TAG_TEXT, min_size=2, max_size=40),
       st.lists(st.tuples(st.integers(0, 39), st.sampled_from(_SHAPES)), max_size=2))
def test_equal_size_records_of_any_structures_scan_like_the_decoder(base: str, tags: list[str],
                                                                     odd: list[tuple[int, str]]) -> None:
    """Records padded to one size and one properties length (so the scan sees one run laid out
    alike), all of one structure but for a few of another: every key, tag and property comes out
    as the decoder reads it."""
    shapes = [(base, tag) for tag in tags]
    for i, shape in odd:
        shapes[i % len(shapes)] = (shape, shapes[i % len(shapes)][1])
    target = 96
    msgs = []
    for shape, tag in shapes:
        m = _shaped(shape, "f", tag)
        used = len(_encode([m]))
        m = _shaped(shape, "f" * (1 + max(0, target - used)), tag) if shape != "none" else m
        body = b"x" * max(0, target + 40 - len(_encode([m])))
        msgs.append(Message(topic=m.topic, body=body, keys=m.keys, tags=m.tags, properties=m.properties))
    _check(msgs)


_PROP_PARTS = st.sampled_from([b"TAGS\x01", b"KEYS\x01", b"\x01", b"\x02", b"\x03", b"\x00", b"a", b"TagA", b"k1",
                               b"p\x01v\x02", b"x" * 300])


@settings(max_examples=300, deadline=None)
@given(st.lists(_PROP_PARTS, max_size=8).map(b"".join))
def test_one_records_spans_parsed_in_python_match_the_vectorised_probe(raw: bytes) -> None:
    """A run of records laid out alike is parsed from its first record with plain bytes methods
    (small dispatch rounds pay no numpy calls for it); for any properties bytes the answer must be the
    vectorised probe's spans.  Where the probe gives up ("slow": several keys, or a tag longer than
    its widest probe) the parser gives up too, or places the record as the decoder splits it."""
    from store.props_scan import _probe_spans, _row_spans

    u8 = np.frombuffer(b"\xff" * 7 + raw + b"\x02", np.uint8)
    probe = _probe_spans(u8, np.array([7], np.int64), np.array([7 + len(raw)], np.int64))
    got = _row_spans(raw)
    if probe.slow[0]:
        if got is not None:
            keys, tags, rest = codec.split_properties(raw)
            tag = raw[got[0]:got[1]].decode() if got[0] >= 0 else None
            key = (raw[got[2]:got[3]].decode(),) if got[2] >= 0 else ()
            assert (tag, key, raw[got[4]:]) == (tags, keys, rest)
        return
    spans = (probe.tag_start[0], probe.tag_end[0], probe.key_start[0], probe.key_end[0], probe.rest_start[0])
    assert got == tuple(int(s) - 7 if s >= 0 else -1 for s in spans)
