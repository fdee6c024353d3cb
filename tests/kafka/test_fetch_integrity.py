"""A damaged CommitLog byte is refused over Kafka Fetch: the page stops before the damaged record,
a fetch at it answers CORRUPT_MESSAGE, and the records after it are served again."""

from __future__ import annotations

import struct
import time
from pathlib import Path

import confluent_kafka as ck
import pytest
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from broker_api.kafka.codec import build, encode_request, response_class
from broker_api.kafka.records import decode_batches
from tests.kafka.conftest import KafkaBroker, create_topic, roundtrip

_ROWS = 400
_DAMAGED = 257  # inside the one batch the producer sends: a run of records of one size
_BORN_TS_AT = 40  # the born timestamp in a record's header (store/codec.py): covered by the whole-record CRC


def _body(i: int) -> bytes:
    return (b"row-%05d-" % i).ljust(100, b".")


def _fetch(port: int, topic: str, offset: int, version: int) -> tuple[int, list[int]]:
    """One Fetch of ``topic``/0 from ``offset``: (error code, the offsets of the records answered)."""
    req = build(load_request_schema(1, version), {
        "replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 50 << 20, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
        "topics": [{"topic": topic, "partitions": [{"partition": 0, "fetch_offset": offset, "log_start_offset": -1,
                                                    "partition_max_bytes": 10 << 20}]}]})
    answer = roundtrip(port, encode_request(1, version, 11, req))
    assert answer is not None
    assert struct.unpack_from(">i", answer)[0] == 11
    body, _ = entity_reader(response_class(1, version))(answer, 5 if version >= 12 else 4)
    part = body.responses[0].partitions[0]
    return int(part.error_code), _offsets(bytes(part.records or b""))


def _offsets(records: bytes) -> list[int]:
    out, pos = [], 0
    for batch in decode_batches(records):  # each batch's CRC-32C checked
        base = struct.unpack_from(">q", records, pos)[0]
        out += [base + r.offset_delta for r in batch.records]
        pos += 12 + struct.unpack_from(">i", records, pos + 8)[0]
    return out


def _produce(bootstrap: str, topic: str) -> None:
    p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.num.messages": 10_000})
    for i in range(_ROWS):
        p.produce(topic, value=_body(i), partition=0)
    assert p.flush(20) == 0


def _damage(data_dir: Path, marker: bytes, delta: int) -> None:
    """Flip one byte ``delta`` bytes from where ``marker`` (a record's body) starts in the CommitLog."""
    seg = min((data_dir / "store" / "commitlog").iterdir())
    with open(seg, "r+b") as f:
        data = f.read()
        at = data.index(marker) + delta
        assert data.count(marker) == 1
        f.seek(at)
        f.write(bytes([data[at] ^ 0x20]))


@pytest.mark.parametrize("where", ["body", "header"])
def test_a_damaged_commitlog_byte_is_refused_over_kafka_fetch(kafka: KafkaBroker, where: str) -> None:
    topic = f"integrity-{where}"
    create_topic(kafka.url, topic, 1)
    _produce(kafka.bootstrap, topic)
    port = kafka.kafka_port
    deadline = time.monotonic() + 20
    while _fetch(port, topic, 0, 12) != (0, list(range(_ROWS))) and time.monotonic() < deadline:
        time.sleep(0.1)  # acknowledged, and visible to reads once dispatched
    for version in (11, 12):
        assert _fetch(port, topic, 0, version) == (0, list(range(_ROWS)))  # whole: read and checked
    delta = 50 if where == "body" else _BORN_TS_AT + 7 - 88  # the header lies 88 bytes before the body
    _damage(kafka.proc.data_dir, _body(_DAMAGED)[:10], delta)
    for version in (11, 12):
        assert _fetch(port, topic, 0, version) == (0, list(range(_DAMAGED)))  # stops before it
        assert _fetch(port, topic, 200, version) == (0, list(range(200, _DAMAGED)))
        assert _fetch(port, topic, _DAMAGED, version) == (ErrorCode.corrupt_message, [])
        assert _fetch(port, topic, _DAMAGED + 1, version) == (0, list(range(_DAMAGED + 1, _ROWS)))
    c = ck.Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": "integrity", "enable.auto.commit": False})
    try:
        c.assign([ck.TopicPartition(topic, 0, _DAMAGED)])
        m = None
        for _ in range(20):
            m = c.poll(0.5)
            if m is not None:
                break
        assert m is not None and m.error() is not None  # librdkafka is told, it is not handed the record
    finally:
        c.close()
