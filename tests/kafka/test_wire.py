"""The listener at the byte level: retried batches, bad frames, unsupported versions."""

from __future__ import annotations

import socket
import struct

from kio.schema.api_versions.v0 import ApiVersionsRequest as ApiVersionsV0
from kio.schema.api_versions.v3 import ApiVersionsRequest
from kio.schema.errors import ErrorCode
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.serial import entity_reader

from broker_api.kafka.codec import encode_request, response_class
from broker_api.kafka.records import BatchWriter
from tests.kafka.conftest import KafkaBroker, create_topic, http_messages, read_frame, roundtrip


def _decode(api_key: int, version: int, answer: bytes, flexible: bool) -> tuple[int, object]:
    (correlation,) = struct.unpack_from(">i", answer, 0)
    offset = 5 if flexible else 4  # v1 response header: one empty tagged-fields byte
    body, _ = entity_reader(response_class(api_key, version))(answer, offset)
    return correlation, body


def _produce_frame(topic: str, values: list[bytes], producer: tuple[int, int, int], correlation: int) -> bytes:
    w = BatchWriter(0, 1_700_000_000_000)
    for i, v in enumerate(values):
        w.add(i, 1_700_000_000_000 + i, None, v, [])
    batch = w.finish(producer=producer)
    req = ProduceRequest(transactional_id=None, acks=-1, timeout=__import__("datetime").timedelta(seconds=5),
                         topic_data=(TopicProduceData(name=topic, partition_data=(
                             PartitionProduceData(index=0, records=batch),)),))
    return encode_request(0, 9, correlation, req)


def _produce_answer(port: int, frame: bytes) -> tuple[int, int]:
    answer = roundtrip(port, frame)
    assert answer is not None
    _, body = _decode(0, 9, answer, True)
    part = body.responses[0].partition_responses[0]  # type: ignore[attr-defined]
    return int(part.error_code), int(part.base_offset)


def test_a_retried_idempotent_batch_is_stored_once(kafka: KafkaBroker) -> None:
    create_topic(kafka.url, "idem", 1)
    pid = 4242
    first = _produce_frame("idem", [b"a", b"b", b"c"], (pid, 0, 0), 1)
    assert _produce_answer(kafka.kafka_port, first) == (0, 0)
    assert _produce_answer(kafka.kafka_port, first) == (0, 0)  # the retry: answered, not stored
    nxt = _produce_frame("idem", [b"d"], (pid, 0, 3), 2)
    assert _produce_answer(kafka.kafka_port, nxt) == (0, 3)
    gap = _produce_frame("idem", [b"e"], (pid, 0, 9), 3)
    assert _produce_answer(kafka.kafka_port, gap)[0] == ErrorCode.out_of_order_sequence_number
    assert [m["body"] for m in http_messages(kafka.url, "idem", 0)] == ["a", "b", "c", "d"]


def _legacy_produce(port: int, version: int) -> list[tuple[str, int, int, int]]:
    """Send a Produce v``version`` (v0-2) for idem/1 and return (topic, partition, error, base offset)s."""
    body = struct.pack(">hii", 1, 5000, 1) + struct.pack(">h", 4) + b"idem" + struct.pack(">iii", 1, 1, 3) + b"abc"
    frame = struct.pack(">hhih", 0, version, 11, 1) + b"t" + body
    answer = roundtrip(port, struct.pack(">i", len(frame)) + frame)
    assert answer is not None
    correlation, topics = struct.unpack_from(">ii", answer, 0)
    assert correlation == 11 and topics == 1
    (name_len,) = struct.unpack_from(">h", answer, 8)
    name = answer[10:10 + name_len].decode()
    _, partition, error, base = struct.unpack_from(">iihq", answer, 10 + name_len)
    size = 10 + name_len + 18 + (8 if version >= 2 else 0) + (4 if version >= 1 else 0)
    assert len(answer) == size
    return [(name, partition, error, base)]


def test_bad_frames_are_answered_or_closed_and_logged_and_others_are_served(kafka: KafkaBroker) -> None:
    port = kafka.kafka_port
    good = encode_request(18, 3, 7, ApiVersionsRequest(client_software_name="t", client_software_version="1"))
    # a malformed body of a known API and version: INVALID_REQUEST, and the connection stays open
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        garbage = struct.pack(">hhi", 3, 12, 99) + b"\x00\x05ab"
        s.sendall(struct.pack(">i", len(garbage)) + garbage)
        answer = read_frame(s)
        assert answer is not None
        correlation, body = _decode(3, 12, answer, True)
        assert correlation == 99
        s.sendall(good)
        answer = read_frame(s)
        assert answer is not None and _decode(18, 3, answer, False)[0] == 7
    # an unsupported version: UNSUPPORTED_VERSION (ApiVersions answers v0 with the list)
    answer = roundtrip(port, encode_request(18, 0, 8, ApiVersionsV0())[:4] + struct.pack(">hhi", 18, 99, 8)
                       + encode_request(18, 0, 8, ApiVersionsV0())[12:])
    assert answer is not None
    _, body = _decode(18, 0, answer, False)
    assert body.error_code == ErrorCode.unsupported_version  # type: ignore[attr-defined]
    assert {k.api_key for k in body.api_keys} >= {0, 1, 2, 3, 18, 22}  # type: ignore[attr-defined]
    produce_v2 = struct.pack(">hhi", 0, 2, 5) + b"\x00\x00"
    answer = roundtrip(port, struct.pack(">i", len(produce_v2)) + produce_v2)
    assert answer is None  # a malformed Produce v0-2 cannot be answered: closed, logged
    for version in (0, 1, 2):  # pre-0.11 message formats: each partition is answered UNSUPPORTED_VERSION
        assert _legacy_produce(port, version) == [("idem", 1, ErrorCode.unsupported_version.value, -1)]
    # an unknown API key and an oversized frame close that connection only
    unknown = struct.pack(">hhi", 999, 0, 1) + b"\x00\x00"
    assert roundtrip(port, struct.pack(">i", len(unknown)) + unknown) is None
    assert roundtrip(port, struct.pack(">i", 1 << 30) + b"\x00" * 16) is None
    answer = roundtrip(port, good)
    assert answer is not None and _decode(18, 3, answer, False)[0] == 7
    log = kafka.proc.log_tail(20000)
    assert "malformed request" in log and "api key 999 is not served" in log and "max_frame_bytes" in log
