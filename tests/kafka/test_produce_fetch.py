"""confluent-kafka (librdkafka) against the Kafka listener: the same bytes and offsets as HTTP."""

from __future__ import annotations

import os
import time
from typing import Any

import confluent_kafka as ck
import confluent_kafka.admin
import httpx
from broker_api.kafka.mapping import kafka_topic_ok
from tests.kafka.conftest import KafkaBroker, body_of, create_topic, http_messages

_BODIES = [os.urandom(n) for n in (0, 1, 7, 300, 5000)] + [b"text \xff\x00\x01\x02 end", "héllo".encode()]
_KEYS = [None, b"k1", b"\x00\xffbinary", b"", "clé".encode(), b"a b", b"k7"]


def _produce(bootstrap: str, topic: str, records: list[tuple[int, bytes | None, bytes, list]],
             **conf: Any) -> list[tuple[int, int]]:
    """Produce and wait; (partition, offset) of each record in order."""
    p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **conf})
    done: dict[int, tuple[int, int]] = {}

    def report(i: int) -> Any:
        def cb(err: Any, msg: Any) -> None:
            assert err is None, err
            done[i] = (msg.partition(), msg.offset())
        return cb

    for i, (part, key, value, headers) in enumerate(records):
        p.produce(topic, value=value, key=key, partition=part, headers=headers, on_delivery=report(i))
    assert p.flush(20) == 0
    return [done[i] for i in range(len(records))]


def _consume(bootstrap: str, topic: str, partition: int, offset: int, n: int) -> list[Any]:
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "assign-reader", "enable.auto.commit": False})
    try:
        c.assign([ck.TopicPartition(topic, partition, offset)])
        got: list[Any] = []
        deadline = time.monotonic() + 20
        while len(got) < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None:
                assert m.error() is None, m.error()
                got.append(m)
        return got
    finally:
        c.close()


def test_kafka_produce_reads_back_over_http_byte_for_byte(kafka: KafkaBroker) -> None:
    for compression in ("none", "gzip", "snappy", "lz4", "zstd"):
        _produce_and_compare(kafka, f"orders-{compression}", compression)


def _produce_and_compare(kafka: KafkaBroker, topic: str, compression: str) -> None:
    create_topic(kafka.url, topic, 2)
    records = [(i % 2, _KEYS[i], body, [("h", b"v%d" % i), ("bin", b"\xff\x00")])
               for i, body in enumerate(_BODIES)]
    placed = _produce(kafka.bootstrap, topic, records, **{"enable.idempotence": True,
                                                          "compression.type": compression})
    for part in (0, 1):
        stored = http_messages(kafka.url, topic, part)
        mine = [(off, rec) for (p, off), rec in zip(placed, records) if p == part]
        assert [m["offset"] for m in stored] == [off for off, _ in mine]
        assert [body_of(m) for m in stored] == [rec[2] for _, rec in mine], compression
        for m, (_, rec) in zip(stored, mine):
            assert m["properties"]["h"] == rec[3][0][1].decode()
    # and back over Kafka: the same keys (null, empty and binary ones included) and headers
    got = _consume(kafka.bootstrap, topic, 0, 0, 4)
    mine0 = [rec for (p, _), rec in zip(placed, records) if p == 0]
    assert [(m.key(), m.value(), dict(m.headers() or [])) for m in got] == \
        [(r[1], r[2], dict(r[3])) for r in mine0]


def test_http_produce_is_consumed_over_kafka_with_the_same_offsets(kafka: KafkaBroker) -> None:
    create_topic(kafka.url, "events", 1)
    bodies = [os.urandom(50) for _ in range(20)]
    msgs = [{"body_base64": __import__("base64").b64encode(b).decode(), "keys": [f"key-{i}"],
             "properties": {"source": "http", "i": str(i)}, "tags": "T"} for i, b in enumerate(bodies)]
    r = httpx.post(f"{kafka.url}/v1/topics/events/messages", json={"messages": msgs}, timeout=10)
    assert r.status_code == 200, r.text
    offsets = [x["queue_offset"] for x in r.json()["results"]]
    got = _consume(kafka.bootstrap, "events", 0, 5, 15)
    assert [m.offset() for m in got] == offsets[5:]
    assert [m.value() for m in got] == bodies[5:]
    assert [m.key() for m in got] == [f"key-{i}".encode() for i in range(5, 20)]
    headers = dict(got[0].headers())
    assert headers["source"] == b"http" and headers["i"] == b"5" and headers["TAGS"] == b"T"
    stamp_type, stamp = got[0].timestamp()
    assert stamp_type == ck.TIMESTAMP_CREATE_TIME
    assert stamp == http_messages(kafka.url, "events", 0, 5, 1)[0]["born_timestamp"]


def test_list_offsets_earliest_latest_and_by_time(kafka: KafkaBroker) -> None:
    create_topic(kafka.url, "times", 1)
    _produce(kafka.bootstrap, "times", [(0, None, b"a", []), (0, None, b"b", [])])
    time.sleep(0.05)
    middle = int(time.time() * 1000)
    time.sleep(0.05)
    _produce(kafka.bootstrap, "times", [(0, None, b"c", [])])
    c = ck.Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": "q"})
    try:
        lo, hi = c.get_watermark_offsets(ck.TopicPartition("times", 0), timeout=10)
        assert (lo, hi) == (0, 3)
        found = c.offsets_for_times([ck.TopicPartition("times", 0, middle)], timeout=10)
        assert found[0].offset == 2
        after = c.offsets_for_times([ck.TopicPartition("times", 0, middle + 3_600_000)], timeout=10)
        assert after[0].offset == -1  # nothing at or after: the end (Kafka answers -1)
    finally:
        c.close()


def test_long_poll_fetch_is_woken_by_a_new_message(kafka: KafkaBroker) -> None:
    create_topic(kafka.url, "waits", 1)
    c = ck.Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": "w", "fetch.wait.max.ms": 5000,
                     "enable.auto.commit": False})
    try:
        c.assign([ck.TopicPartition("waits", 0, 0)])
        assert c.poll(1.0) is None  # parked: nothing there
        sent = time.monotonic()
        httpx.post(f"{kafka.url}/v1/topics/waits/messages", json={"messages": [{"body": "now"}]}, timeout=10)
        m = None
        while m is None and time.monotonic() - sent < 10:
            m = c.poll(0.1)
        assert m is not None and m.value() == b"now"
        assert time.monotonic() - sent < 2.0  # woken, not the 5 s wait
    finally:
        c.close()


def test_unknown_topic_is_refused_and_bad_kafka_names_are_not_listed(kafka: KafkaBroker) -> None:
    create_topic(kafka.url, "good", 1)
    admin = ck.admin.AdminClient({"bootstrap.servers": kafka.bootstrap})
    names = set(admin.list_topics(timeout=10).topics)
    assert "good" in names
    assert all(kafka_topic_ok(n) and not n.startswith("RMQ_SYS") for n in names)
    assert "RMQ_SYS_TRANS_HALF_TOPIC" not in names  # a system topic: the broker keeps it to itself
    p = ck.Producer({"bootstrap.servers": kafka.bootstrap, "message.timeout.ms": 2000,
                     "allow.auto.create.topics": False})
    errors: list[Any] = []
    p.produce("missing", b"x", partition=0, on_delivery=lambda err, msg: errors.append(err))
    p.flush(10)
    assert errors and errors[0] is not None


def test_records_without_keys_or_headers_come_back_from_a_mid_page_offset(kafka: KafkaBroker) -> None:
    """Pages of plain records are written by columns (batch_columns.plain_batch): same values, offsets, times."""
    create_topic(kafka.url, "plain", 1)
    values = [os.urandom(n) for n in (0, 1, 63, 64, 100, 8191, 8192, 20000)] * 25
    stamps = [1_700_000_000_000 + i * 997 for i in range(len(values))]
    _produce(kafka.bootstrap, "plain", [(0, None, v, []) for v in values], **{"enable.idempotence": False})
    p = ck.Producer({"bootstrap.servers": kafka.bootstrap})
    p.produce("plain", value=b"stamped", partition=0, timestamp=stamps[0])
    assert p.flush(20) == 0
    got = _consume(kafka.bootstrap, "plain", 0, 3, len(values) - 2)
    assert [m.value() or b"" for m in got] == values[3:] + [b"stamped"]
    assert [m.offset() for m in got] == list(range(3, len(values) + 1))
    assert all(m.key() is None and not m.headers() for m in got)
    assert got[-1].timestamp()[1] == stamps[0]
