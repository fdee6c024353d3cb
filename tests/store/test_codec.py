"""Record codec: what is encoded decodes to the same message, and damage is detected."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from store import InvalidMessageError, Message, MessageTooLargeError
from store import codec
from store.errors import CorruptRecordError
from store.scanner import ScanStop, scan_chunk

HOST = codec.encode_host("10.1.2.3:10911")
_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00\x01\x02\x03"),
                min_size=1, max_size=12)
messages = st.builds(
    Message,
    topic=_text,
    body=st.binary(max_size=300),
    queue_id=st.integers(0, 15),
    keys=st.lists(_text, max_size=3).map(tuple),
    tags=st.none() | _text,
    properties=st.dictionaries(_text.filter(lambda s: s not in ("TAGS", "KEYS")), st.text(
        alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00\x01\x02\x03"), max_size=10),
        max_size=3),
    born_timestamp=st.integers(1, 2**50),
)


def _encode(msgs: list[Message], base: int = 0) -> tuple[bytes, np.ndarray]:
    batch = codec.prepare_batch(msgs, 1234, HOST, 1 << 20)
    ends = np.cumsum(batch.sizes)
    phys = base + np.concatenate(([0], ends[:-1])).astype(np.int64)
    data = codec.encode_batch(batch, 0, len(msgs), phys.tolist(), list(range(len(msgs))), 999, HOST)
    return data, phys


@settings(max_examples=60, deadline=None)
@given(st.lists(messages, min_size=1, max_size=20))
def test_batch_round_trip(msgs: list[Message]) -> None:
    data, phys = _encode(msgs, base=4096)
    for i, (m, phy) in enumerate(zip(msgs, phys.tolist())):
        got = codec.decode_record(data, phy - 4096, phy)
        assert (got.topic, got.body, got.queue_id, got.keys, got.tags, got.properties) == (
            m.topic, m.body, m.queue_id, m.keys, m.tags, dict(m.properties))
        assert got.queue_offset == i and got.born_timestamp == m.born_timestamp and got.store_timestamp == 999
        assert got.msg_id == codec.make_msg_id(HOST, phy) and got.store_host == "10.1.2.3:10911"
    scanned = scan_chunk(data, 4096, check_crc=True, store_host=HOST)
    assert scanned.stop is ScanStop.END and scanned.consumed == len(data)
    assert scanned.batch.bodies == [m.body for m in msgs]


def test_flipped_body_byte_fails_crc() -> None:
    data, _ = _encode([Message(topic="t", body=b"payload")])
    bad = bytearray(data)
    bad[codec.HEADER_SIZE + 2] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        codec.decode_record(bytes(bad), 0, 0)
    assert scan_chunk(bytes(bad), 0, check_crc=True, store_host=HOST).stop is ScanStop.INVALID


def test_truncated_record_is_short_not_served() -> None:
    data, _ = _encode([Message(topic="t", body=b"a" * 50), Message(topic="t", body=b"b" * 50)])
    res = scan_chunk(data[:-10], 0, check_crc=True, store_host=HOST)
    assert res.stop is ScanStop.SHORT and len(res.batch) == 1


def test_message_id_round_trip() -> None:
    assert codec.parse_msg_id(codec.make_msg_id(HOST, 123456789)) == (HOST, 123456789)
    with pytest.raises(InvalidMessageError):
        codec.parse_msg_id("nothex")


def test_bad_input_is_refused_with_a_reason() -> None:
    with pytest.raises(InvalidMessageError, match="key"):
        codec.prepare_batch([Message(topic="t", body=b"", keys=("a\x01b",))], 1, HOST, 1 << 20)
    with pytest.raises(InvalidMessageError, match="reserved"):
        codec.prepare_batch([Message(topic="t", body=b"", properties={"KEYS": "x"})], 1, HOST, 1 << 20)
    with pytest.raises(MessageTooLargeError, match="limit is 200 bytes"):
        codec.prepare_batch([Message(topic="t", body=b"x" * 500)], 1, HOST, 200)
    with pytest.raises(InvalidMessageError, match="topic"):
        codec.prepare_batch([Message(topic="x" * 200, body=b"")], 1, HOST, 1 << 20)
