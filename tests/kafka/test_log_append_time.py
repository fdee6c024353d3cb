"""message.timestamp.type=LogAppendTime: set by CreateTopics, shown by DescribeConfigs; such a topic's
records reach confluent-kafka with the broker's append time, flagged LOG_APPEND_TIME, in the
produce acknowledgement and in the fetched batches; a CreateTime topic keeps the producer's time."""

from __future__ import annotations

import time
from typing import Any

import confluent_kafka as ck
import confluent_kafka.admin as ka
import httpx

from tests.kafka.conftest import KafkaBroker

_OLD = 1_600_000_000_000  # the producer's own timestamp: long ago


def _create(admin: ka.AdminClient, name: str, config: dict[str, str]) -> int:
    future = admin.create_topics([ka.NewTopic(name, num_partitions=1, replication_factor=1, config=config)],
                                 request_timeout=10)[name]
    try:
        future.result(timeout=10)
    except ka.KafkaException as exc:
        return int(exc.args[0].code())
    return 0


def _produce(kafka: KafkaBroker, topic: str) -> Any:
    reports: list[Any] = []
    p = ck.Producer({"bootstrap.servers": kafka.bootstrap, "enable.idempotence": True})
    for i in range(3):
        p.produce(topic, b"v%d" % i, partition=0, timestamp=_OLD + i, on_delivery=lambda e, m: reports.append((e, m)))
    assert p.flush(20) == 0
    assert [err and err.str() for err, _ in reports] == [None] * 3
    return reports[0][1].timestamp()


def _consume(kafka: KafkaBroker, topic: str) -> list[tuple[int, int]]:
    c = ck.Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": f"g-{topic}", "enable.auto.commit": False})
    c.assign([ck.TopicPartition(topic, 0, 0)])
    got: list[Any] = []
    deadline = time.monotonic() + 20
    while len(got) < 3 and time.monotonic() < deadline:
        got += [m for m in c.consume(10, timeout=1.0) if m.error() is None]
    c.close()
    return [m.timestamp() for m in got]


def test_log_append_time_topics_carry_the_brokers_append_time(kafka: KafkaBroker) -> None:
    admin = ka.AdminClient({"bootstrap.servers": kafka.bootstrap})
    assert _create(admin, "appended", {"message.timestamp.type": "LogAppendTime"}) == 0
    assert _create(admin, "created", {}) == 0
    assert _create(admin, "bad-type", {"message.timestamp.type": "Sometime"}) == ka.KafkaError.INVALID_CONFIG
    assert httpx.get(f"{kafka.url}/v1/topics/bad-type", timeout=10).status_code == 404
    configs = admin.describe_configs([ka.ConfigResource(ka.ResourceType.TOPIC, n) for n in ("appended", "created")],
                                     request_timeout=10)
    kinds = {r.name: f.result(timeout=10)["message.timestamp.type"].value for r, f in configs.items()}
    assert kinds == {"appended": "LogAppendTime", "created": "CreateTime"}
    before = int(time.time() * 1000) - 1000
    kind, acked = _produce(kafka, "appended")
    assert kind == ck.TIMESTAMP_LOG_APPEND_TIME and acked >= before
    fetched = _consume(kafka, "appended")
    assert len(fetched) == 3 and all(k == ck.TIMESTAMP_LOG_APPEND_TIME and before <= t <= acked + 1000
                                     for k, t in fetched)
    assert _produce(kafka, "created") == (ck.TIMESTAMP_CREATE_TIME, _OLD)
    assert _consume(kafka, "created") == [(ck.TIMESTAMP_CREATE_TIME, _OLD + i) for i in range(3)]


def test_the_timestamp_type_is_kept_where_topics_are_saved_and_synced() -> None:
    from broker_api.model.topics import TopicConfig

    appended = TopicConfig("audit", 2, timestamp_type="LogAppendTime")
    assert appended.to_json()["timestamp_type"] == "LogAppendTime"
    assert TopicConfig.from_json(appended.to_json()) == appended
    assert "timestamp_type" not in TopicConfig("plain", 2).to_json()  # older readers see what they saw
