"""Fetch over a real listener: pages fill the partition's byte limit, the next page built ahead is
served only for its own log (a topic deleted and created again is read afresh), and a parked Fetch
is answered as soon as the client sends another request on its connection."""

from __future__ import annotations

import socket
import struct
import time

import confluent_kafka as ck
import httpx
from kio.index import load_request_schema
from kio.serial import entity_reader

from broker_api.kafka.codec import build, encode_request, response_class
from broker_api.kafka.records import decode_batches
from tests.kafka.conftest import KafkaBroker, create_topic, read_frame

_LIMIT = 64 << 10


def _fetch_frame(topic: str, offset: int, limit: int, max_wait_ms: int = 0, correlation: int = 7) -> bytes:
    req = build(load_request_schema(1, 12), {
        "replica_id": -1, "max_wait": max_wait_ms, "min_bytes": 1, "max_bytes": 50 << 20, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
        "topics": [{"topic": topic, "partitions": [{"partition": 0, "fetch_offset": offset, "log_start_offset": -1,
                                                    "current_leader_epoch": -1, "partition_max_bytes": limit}]}]})
    return encode_request(1, 12, correlation, req)


def _list_offsets_frame(topic: str, correlation: int) -> bytes:
    req = build(load_request_schema(2, 7), {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]})
    return encode_request(2, 7, correlation, req)


def _records(answer: bytes) -> bytes:
    body, _ = entity_reader(response_class(1, 12))(answer, 5)
    part = body.responses[0].partitions[0]
    assert part.error_code == 0
    return bytes(part.records or b"")


def _values(records: bytes) -> list[tuple[int, bytes]]:
    """(offset, value) of every record, each batch's CRC-32C checked."""
    out, pos = [], 0
    for batch in decode_batches(records):
        base = struct.unpack_from(">q", records, pos)[0]
        out += [(base + r.offset_delta, r.value or b"") for r in batch.records]
        pos += 12 + struct.unpack_from(">i", records, pos + 8)[0]
    return out


def _produce(bootstrap: str, topic: str, rows: int, tag: bytes) -> None:
    p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "enable.idempotence": True})
    for i in range(rows):
        p.produce(topic, value=(tag + b"-%05d-" % i).ljust(100, b"."), partition=0)
    assert p.flush(20) == 0


def _visible(kafka: KafkaBroker, topic: str, rows: int) -> None:
    deadline = time.monotonic() + 20
    with socket.create_connection(("127.0.0.1", kafka.kafka_port), timeout=10) as s:
        while time.monotonic() < deadline:
            s.sendall(_fetch_frame(topic, rows - 1, 1 << 20))
            body, _ = entity_reader(response_class(1, 12))(read_frame(s) or b"", 5)
            if body.responses[0].partitions[0].high_watermark >= rows:
                return
            time.sleep(0.1)
    raise AssertionError(f"{rows} rows of {topic} not visible in time")


def test_pages_fill_the_byte_limit_and_the_next_page_is_served_for_its_own_log(kafka: KafkaBroker) -> None:
    topic = "ahead"
    create_topic(kafka.url, topic, 1)
    _produce(kafka.bootstrap, topic, 3000, b"a")
    _visible(kafka, topic, 3000)
    sizes, seen, offset = [], [], 0
    with socket.create_connection(("127.0.0.1", kafka.kafka_port), timeout=10) as s:
        for _ in range(4):
            s.sendall(_fetch_frame(topic, offset, _LIMIT))
            records = _records(read_frame(s) or b"")
            sizes.append(len(records))
            seen += _values(records)
            offset = seen[-1][0] + 1
    assert [o for o, _ in seen] == list(range(offset))  # no gap, no repeat
    assert all(v == (b"a-%05d-" % o).ljust(100, b".") for o, v in seen)
    assert max(sizes) <= _LIMIT
    assert min(sizes[1:]) > 0.9 * _LIMIT, sizes  # once the partition's ratio is known: the limit filled

    # the page after ``offset`` was built ahead from this topic's log; the topic is deleted and
    # created again with other records: a Fetch at that offset reads them, not the page kept
    assert httpx.delete(f"{kafka.url}/v1/topics/{topic}", timeout=10).status_code in (200, 204)
    create_topic(kafka.url, topic, 1)
    _produce(kafka.bootstrap, topic, offset + 200, b"b")
    _visible(kafka, topic, offset + 200)
    with socket.create_connection(("127.0.0.1", kafka.kafka_port), timeout=10) as s:
        s.sendall(_fetch_frame(topic, offset, _LIMIT))
        again = _values(_records(read_frame(s) or b""))
    assert again and again[0] == (offset, (b"b-%05d-" % offset).ljust(100, b"."))


def test_a_parked_fetch_is_answered_when_the_client_sends_another_request(kafka: KafkaBroker) -> None:
    topic = "parked"
    create_topic(kafka.url, topic, 1)
    _produce(kafka.bootstrap, topic, 10, b"p")
    _visible(kafka, topic, 10)
    with socket.create_connection(("127.0.0.1", kafka.kafka_port), timeout=20) as s:
        started = time.monotonic()
        s.sendall(_fetch_frame(topic, 10, _LIMIT, max_wait_ms=10_000, correlation=1))  # at the end: parked
        time.sleep(0.3)
        s.sendall(_list_offsets_frame(topic, correlation=2))  # behind it on the same connection
        fetched, listed = read_frame(s), read_frame(s)
        elapsed = time.monotonic() - started
    assert fetched is not None and listed is not None
    assert struct.unpack_from(">i", fetched)[0] == 1 and struct.unpack_from(">i", listed)[0] == 2  # in order
    assert _records(fetched) == b""
    assert elapsed < 5, f"the ListOffsets answer waited {elapsed:.1f} s behind the parked Fetch"
    with socket.create_connection(("127.0.0.1", kafka.kafka_port), timeout=20) as s:
        started = time.monotonic()
        s.sendall(_fetch_frame(topic, 10, _LIMIT, max_wait_ms=1000, correlation=3))  # alone: waits max_wait
        assert _records(read_frame(s) or b"") == b""
        assert time.monotonic() - started >= 0.9
