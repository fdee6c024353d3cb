"""Consumer groups over Kafka: subscribe(), rebalancing between members, commits the HTTP API sees."""

from __future__ import annotations

import time
from typing import Any

import confluent_kafka as ck
import confluent_kafka.admin
import httpx

from tests.kafka.conftest import KafkaBroker, create_topic


def _consumer(kafka: KafkaBroker, group: str, assigned: list[Any]) -> ck.Consumer:
    c = ck.Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                     "enable.auto.commit": False, "session.timeout.ms": 6000, "heartbeat.interval.ms": 300})
    c.subscribe(["clicks"], on_assign=lambda _c, parts: assigned.append(sorted(p.partition for p in parts)))
    return c


def _poll_until(consumers: list[ck.Consumer], done: Any, timeout_s: float = 30) -> list[Any]:
    got: list[Any] = []
    deadline = time.monotonic() + timeout_s
    while not done(got) and time.monotonic() < deadline:
        for c in consumers:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                got.append(m)
    return got


def test_group_members_share_partitions_and_commits_are_the_http_offsets(kafka: KafkaBroker) -> None:
    create_topic(kafka.url, "clicks", 2)
    msgs = [{"body": f"m{i}", "queue_id": i % 2} for i in range(20)]
    assert httpx.post(f"{kafka.url}/v1/topics/clicks/messages", json={"messages": msgs}, timeout=10).is_success
    a_parts: list[Any] = []
    b_parts: list[Any] = []
    a, b = _consumer(kafka, "g1", a_parts), _consumer(kafka, "g1", b_parts)
    try:
        got = _poll_until([a, b], lambda got: len(got) >= 20)
        assert sorted(m.value() for m in got) == sorted(f"m{i}".encode() for i in range(20))
        assert a_parts and b_parts and sorted(a_parts[-1] + b_parts[-1]) == [0, 1]  # one partition each
        assert a_parts[-1] and b_parts[-1]
        for c in (a, b):
            c.commit(asynchronous=False)
        offsets = httpx.get(f"{kafka.url}/v1/groups/g1/offsets", params={"topic": "clicks"}, timeout=10).json()
        assert offsets["offsets"] == {"0": 10, "1": 10}
        # the Kafka side reads what HTTP commits too
        assert httpx.put(f"{kafka.url}/v1/groups/g1/offsets", json={"topic": "clicks", "offsets": {"0": 4}},
                         timeout=10).is_success
        committed = a.committed([ck.TopicPartition("clicks", 0), ck.TopicPartition("clicks", 1)], timeout=10)
        assert [p.offset for p in committed] == [4, 10]
        # one member leaves: the other is given both partitions
        b.close()
        _poll_until([a], lambda _: a_parts[-1] == [0, 1], timeout_s=20)
        assert a_parts[-1] == [0, 1]
    finally:
        a.close()
    admin = ck.admin.AdminClient({"bootstrap.servers": kafka.bootstrap})
    listed = admin.list_consumer_groups(request_timeout=10).result()
    assert "g1" in {g.group_id for g in listed.valid}
    described = admin.describe_consumer_groups(["g1"], request_timeout=10)["g1"].result()
    assert described.group_id == "g1"
