"""RecordBatch v2: what the broker writes, it (and kio's independent reader) reads back."""

from __future__ import annotations

import gzip
import struct

import cramjam
import crc32c
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.records.readers import read_batch

from broker_api.kafka.codec import KafkaProtocolError
from broker_api.kafka.batch_columns import plain_batch
from broker_api.kafka.records import HEADER, BatchWriter, decode_batches

_record = st.tuples(st.integers(0, 5000), st.integers(-(10 ** 6), 10 ** 9), st.none() | st.binary(max_size=40),
                    st.binary(max_size=300),
                    st.lists(st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=20)), max_size=3))


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2 ** 40), st.lists(_record, min_size=1, max_size=20))
def test_written_batches_read_back(base: int, records: list[tuple]) -> None:
    w = BatchWriter(base, 1_700_000_000_000)
    offsets = sorted({base + gap for gap, *_ in records})
    rows = list(zip(offsets, records))
    for offset, (_, ts, key, value, headers) in rows:
        w.add(offset, 1_700_000_000_000 + ts, key, value, [(k.encode(), v) for k, v in headers])
    raw = w.finish(producer=(7, 1, 3))
    (batch,) = decode_batches(raw)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (7, 1, 3)
    assert [(r.offset_delta, r.timestamp, r.key, r.value, r.headers) for r in batch.records] == [
        (o - base, 1_700_000_000_000 + ts, key, value, headers) for o, (_, ts, key, value, headers) in rows]
    theirs, _ = read_batch(raw, 0)  # kio's reader checks the CRC-32C and the layout independently
    assert [bytes(r.value or b"") for r in theirs.records] == [r[1][3] for r in rows]


def _compressed(codec: int, body: bytes) -> bytes:
    return {1: gzip.compress, 2: lambda b: bytes(cramjam.snappy.compress_raw(b)),
            3: lambda b: bytes(cramjam.lz4.compress(b)), 4: lambda b: bytes(cramjam.zstd.compress(b))}[codec](body)


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_compressed_batches_decode(codec: int) -> None:
    w = BatchWriter(0, 1000)
    for i in range(50):
        w.add(i, 1000 + i, b"k", b"v%d" % i, [])
    raw = w.finish()
    body = _compressed(codec, raw[HEADER.size:])
    head = bytearray(raw[:HEADER.size])
    struct.pack_into(">i", head, 8, HEADER.size - 12 + len(body))
    struct.pack_into(">h", head, 21, codec)
    crc = crc32c.crc32c(body, crc32c.crc32c(bytes(head[21:])))
    struct.pack_into(">I", head, 17, crc)
    (batch,) = decode_batches(bytes(head) + body)
    assert [r.value for r in batch.records] == [b"v%d" % i for i in range(50)]


def test_a_flipped_bit_or_a_short_batch_is_refused() -> None:
    w = BatchWriter(0, 1000)
    w.add(0, 1000, None, b"payload", [])
    raw = bytearray(w.finish())
    raw[-1] ^= 1
    with pytest.raises(KafkaProtocolError, match="CRC"):
        decode_batches(bytes(raw))
    with pytest.raises(KafkaProtocolError):
        decode_batches(bytes(raw[:40]))


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 2 ** 40), st.lists(st.tuples(st.integers(1, 3000), st.integers(-(10 ** 6), 10 ** 9),
                                                  st.binary(max_size=300), st.none() | st.binary(max_size=20)),
                                        min_size=1, max_size=40), st.booleans())
def test_plain_batches_built_by_columns_equal_the_record_by_record_writer(base: int, rows: list[tuple],
                                                                          with_keys: bool) -> None:
    offsets = np.cumsum([base] + [gap for gap, *_ in rows[1:]]).astype(np.int64)
    born = np.array([1_700_000_000_000 + ts for _, ts, _, _ in rows], np.int64)
    body_offsets = np.cumsum([0] + [len(b) for _, _, b, _ in rows]).astype(np.int64)
    bodies = np.frombuffer(b"".join(b for _, _, b, _ in rows), np.uint8)
    keys = [k if with_keys else None for *_, k in rows]
    key_cols = (np.array([-1 if k is None else len(k) for k in keys], np.int64),
                np.frombuffer(b"".join(k or b"" for k in keys), np.uint8)) if with_keys else None
    w = BatchWriter(int(offsets[0]), int(born[0]))
    for offset, ts, key, (_, _, body, _) in zip(offsets.tolist(), born.tolist(), keys, rows):
        w.add(offset, ts, key, body, [])
    assert plain_batch(offsets, born, bodies, body_offsets, keys=key_cols) == w.finish()


@pytest.mark.parametrize("keyed,sizes", [(False, "equal"), (True, "equal"), (False, "runs")])
def test_long_plain_batches_of_equal_records_equal_the_record_by_record_writer(keyed: bool, sizes: str) -> None:
    # records in runs of one layout (a delta grows a varint byte at 64 and 8192; with "runs" the
    # values' length changes every 3000 records, to 0 in the end): the run by run path
    n = 9000
    offsets = np.arange(10, 10 + n, dtype=np.int64)
    born = 1_700_000_000_000 + np.arange(n, dtype=np.int64) * 3
    lengths = [100] * n if sizes == "equal" else [(100, 70, 0)[i // 3000] for i in range(n)]
    bodies = np.frombuffer(b"".join(bytes([i % 251]) * lengths[i] for i in range(n)), np.uint8)
    body_offsets = np.cumsum([0, *lengths]).astype(np.int64)
    keys = [b"key%05d" % i for i in range(n)] if keyed else [None] * n
    key_cols = (np.full(n, 8, np.int64), np.frombuffer(b"".join(keys), np.uint8)) if keyed else None  # type: ignore[arg-type]
    w = BatchWriter(10, int(born[0]))
    for i in range(n):
        w.add(10 + i, int(born[i]), keys[i], bodies[body_offsets[i]:body_offsets[i + 1]].tobytes(), [])
    assert plain_batch(offsets, born, bodies, body_offsets, keys=key_cols) == w.finish()


@pytest.mark.parametrize("keyed", [False, True])
@pytest.mark.parametrize("limit", [61 + 5, 1000, 4096, 1 << 20])
def test_a_limited_plain_batch_holds_the_records_the_writer_fits_in_the_limit(keyed: bool, limit: int) -> None:
    n = 200
    offsets = np.arange(5, 5 + n, dtype=np.int64)
    born = 1_700_000_000_000 + np.arange(n, dtype=np.int64)
    lengths = [(i * 7) % 50 for i in range(n)]
    bodies = np.frombuffer(b"".join(bytes([i % 251]) * lengths[i] for i in range(n)), np.uint8)
    body_offsets = np.cumsum([0, *lengths]).astype(np.int64)
    keys = [b"k%d" % i for i in range(n)] if keyed else [None] * n
    key_cols = (np.array([len(k) for k in keys], np.int64), np.frombuffer(b"".join(keys), np.uint8)) \
        if keyed else None  # type: ignore[arg-type]
    w = BatchWriter(5, int(born[0]))
    for i in range(n):
        if not w.add(5 + i, int(born[i]), keys[i], bodies[body_offsets[i]:body_offsets[i + 1]].tobytes(), [], limit):
            break
    expected = w.finish()
    assert len(expected) <= limit or w.count == 1  # the first record always goes in
    assert plain_batch(offsets, born, bodies, body_offsets, keys=key_cols, limit=limit) == expected
    if w.count == 1 and len(expected) > limit:
        assert plain_batch(offsets, born, bodies, body_offsets, keys=key_cols, limit=limit, first_whole=False) == b""
