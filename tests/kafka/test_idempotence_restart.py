"""An idempotent producer's retried batch is stored once even when the broker was killed in between,
and Fetch does not hand the broker's sequence stamp back as a header."""

from __future__ import annotations

import time
from typing import Any

import confluent_kafka as ck

from tests.kafka.conftest import KafkaBroker, create_topic, http_messages
from tests.kafka.test_wire import _produce_answer, _produce_frame


def test_a_batch_retried_across_a_kill_is_stored_once(kafka_factory: Any) -> None:
    kafka: KafkaBroker = kafka_factory(env={"SPARKMQ_STORE__FLUSH_MODE": "sync"})
    create_topic(kafka.url, "idem", 1)
    pid = 7  # an id from an earlier life of the broker
    assert _produce_answer(kafka.kafka_port, _produce_frame("idem", [b"a", b"b"], (pid, 0, 0), 1)) == (0, 0)
    retried = _produce_frame("idem", [b"c", b"d", b"e"], (pid, 0, 2), 2)
    assert _produce_answer(kafka.kafka_port, retried) == (0, 2)
    kafka.proc.kill()  # the answer may have been lost: the client retries against the new broker
    kafka.proc.restart()
    assert _produce_answer(kafka.kafka_port, retried) == (0, 2)
    assert _produce_answer(kafka.kafka_port, _produce_frame("idem", [b"a", b"b"], (pid, 0, 0), 3)) == (0, 0)
    gap = _produce_answer(kafka.kafka_port, _produce_frame("idem", [b"x"], (pid, 0, 9), 4))
    assert gap[0] != 0  # out of order
    assert _produce_answer(kafka.kafka_port, _produce_frame("idem", [b"f"], (pid, 0, 5), 5)) == (0, 5)
    # an acknowledged record is on disk; it is readable once dispatched to its queue (moments later)
    deadline = time.monotonic() + 10
    while len(http_messages(kafka.url, "idem", 0)) < 6 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [m["body"] for m in http_messages(kafka.url, "idem", 0)] == ["a", "b", "c", "d", "e", "f"]
    c = ck.Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": "g", "enable.auto.commit": False})
    c.assign([ck.TopicPartition("idem", 0, 0)])
    got = [m for m in c.consume(6, timeout=20) if m.error() is None]
    c.close()
    assert [m.value() for m in got] == [b"a", b"b", b"c", b"d", b"e", b"f"]
    assert all(not m.headers() for m in got)
