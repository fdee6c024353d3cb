"""Records read by columns (record_columns.py) equal the records read one by one (records.py)."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker_api.kafka.codec import KafkaProtocolError
from broker_api.kafka.mapping import keys_only, split_properties, without_seq
from broker_api.kafka.record_columns import decode_columns
from broker_api.kafka.records import BatchWriter, decode_batches

_BASE_TS = 1_700_000_000_000
_key = st.none() | st.binary(max_size=12) | st.text(min_size=1, max_size=10).map(str.encode)
_record = st.tuples(st.integers(0, 300), st.integers(-(10 ** 6), 10 ** 12), _key, st.binary(max_size=300))


def _batch(records: list[tuple[int, int, bytes | None, bytes]], headers: bool = False) -> bytes:
    w = BatchWriter(0, _BASE_TS)
    offset = 0
    for gap, ts, key, value in records:
        offset += gap
        w.add(offset, _BASE_TS + ts, key, value, [(b"h", b"v")] if headers else [])
    return w.finish()


def _column_path(key: bytes | None) -> bool:
    if key is None:
        return True
    try:
        text = key.decode()
    except UnicodeDecodeError:
        return False
    return bool(text) and not any(c in text for c in "\x00\x01\x02\x03")


@settings(max_examples=150, deadline=None)
@given(st.lists(_record, min_size=1, max_size=30), st.booleans())
def test_columns_equal_the_records_one_by_one(records: list, same_key_kind: bool) -> None:
    if same_key_kind:  # every key null, or every key text: what the column path carries
        records = [(g, t, None if records[0][2] is None else (k or b"k"), v) for g, t, k, v in records]
    (batch,) = decode_batches(_batch(records))
    one_by_one = batch.records
    cols = decode_columns(batch.body, batch.count, batch.base_timestamp)
    keys = [r.key for r in one_by_one]
    carried = all(_column_path(k) for k in keys) and (all(k is None for k in keys) or None not in keys)
    if not carried:
        assert cols is None
        return
    assert cols is not None
    assert [bytes(v) for v in cols.bodies.views()] == [r.value or b"" for r in one_by_one]
    assert cols.born.tolist() == [r.timestamp for r in one_by_one]
    assert cols.offset_deltas.tolist() == [r.offset_delta for r in one_by_one]
    assert cols.keys == (None if keys[0] is None else [k.decode() for k in keys])


def test_equal_length_records_take_the_strided_path_and_read_back() -> None:
    records = [(1, i, b"key%03d" % i, b"v" * 100) for i in range(500)]
    (batch,) = decode_batches(_batch(records))
    cols = decode_columns(batch.body, batch.count, batch.base_timestamp)
    assert cols is not None and cols.keys == [f"key{i:03d}" for i in range(500)]
    assert cols.bodies.matrix().shape == (500, 100)
    assert cols.born.tolist() == [_BASE_TS + i for i in range(500)]


@pytest.mark.parametrize("shape", ["runs", "alternating", "random-lengths", "random-keys"])
def test_long_batches_of_each_shape_read_back(shape: str) -> None:
    # runs: records grow by a byte where a delta needs one more varint byte (64, 8192) - long runs
    # of one length; alternating: every few records change length; random: no two alike
    rng = random.Random(shape)
    n = 9000 if shape == "runs" else 600
    values = [b"v" * (100 + (i // 3) % 2 if shape == "alternating" else
                      rng.randrange(0, 400) if shape.startswith("random") else 100) for i in range(n)]
    keys = [str(rng.random()).encode() if shape == "random-keys" else None for _ in range(n)]
    records = [(1, i * (7 if shape == "runs" else 1), keys[i], values[i]) for i in range(n)]
    (batch,) = decode_batches(_batch(records))
    cols = decode_columns(batch.body, batch.count, batch.base_timestamp)
    one_by_one = batch.records
    assert cols is not None
    assert [bytes(v) for v in cols.bodies.views()] == [r.value for r in one_by_one] == values
    assert cols.born.tolist() == [r.timestamp for r in one_by_one]
    assert cols.offset_deltas.tolist() == [r.offset_delta for r in one_by_one]
    assert cols.keys == (None if keys[0] is None else [k.decode() for k in keys])


def test_records_with_headers_take_the_per_record_path() -> None:
    (batch,) = decode_batches(_batch([(1, 0, None, b"x")] * 3, headers=True))
    assert decode_columns(batch.body, batch.count, batch.base_timestamp) is None


@pytest.mark.parametrize("cut", [1, 5, 20])
def test_a_truncated_or_garbled_body_is_refused(cut: int) -> None:
    (batch,) = decode_batches(_batch([(1, i, None, b"v" * (10 + i)) for i in range(10)]))
    with pytest.raises(KafkaProtocolError):
        decode_columns(batch.body[:-cut], batch.count, batch.base_timestamp)
    garbled = bytearray(batch.body)
    garbled[0] = 0x7E  # the first record's length: 63 bytes, more than it has
    with pytest.raises(KafkaProtocolError):
        decode_columns(bytes(garbled), batch.count, batch.base_timestamp)
    with pytest.raises(KafkaProtocolError):  # more records announced than the body holds
        decode_columns(batch.body, batch.count + 1, batch.base_timestamp)


_stored_key = st.none() | st.lists(st.text(st.characters(min_codepoint=4, blacklist_categories=("Cs",)), min_size=1, max_size=8), min_size=1,
                                   max_size=3).map("\x03".join)  # several keys are joined by \x03 in the store


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(_stored_key, st.booleans()), min_size=1, max_size=20),
       st.sampled_from([None, b"TAGS\x01t\x02", b"p\x01v\x02", b"XKAFKA_SEQ\x011\x02"]))
def test_keys_read_by_columns_equal_the_keys_read_one_by_one(keys: list, extra: bytes | None) -> None:
    # stamped: the first record of an idempotent batch carries the producer's stamp (no header)
    wcrc, stamp = b"WCRC\x0112345678\x02", b"KAFKA_SEQ\x017,0,1,9\x02"
    props = [(b"" if k is None else b"KEYS\x01" + k.encode() + b"\x02") + (stamp if stamped else b"") + wcrc
             for k, stamped in keys]
    if extra is not None:  # another property on one record: the per-record path
        props[len(props) // 2] = extra + props[len(props) // 2]
    offsets = np.cumsum([0] + [len(p) for p in props]).astype(np.int64)
    got = keys_only(*without_seq(b"".join(props), offsets))
    if extra is not None:
        assert got is None
        return
    assert got is not None
    lengths, data = got
    theirs = [split_properties(p)[0] for p in props]
    assert lengths.tolist() == [-1 if k is None else len(k) for k in theirs]
    assert data.tobytes() == b"".join(k or b"" for k in theirs)
