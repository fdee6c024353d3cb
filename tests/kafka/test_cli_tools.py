"""Kafka's own command-line tools (4.1.1) against the Kafka listener: topics, console producer and
consumer, consumer groups (describe, reset, delete)."""

from __future__ import annotations

import re

import httpx

from tests.kafka.conftest import KafkaBroker, create_topic, http_messages
from tests.kafka.kafka_tools import CONSUMER, GROUPS, PRODUCER, TOPICS, KafkaTools, kafka_tools  # noqa: F401


def _rows(out: str, group: str) -> dict[int, list[str]]:
    """kafka-consumer-groups' table rows of ``group``, by partition."""
    rows = [line.split() for line in out.splitlines() if line.startswith(group + " ")]
    return {int(r[2]): r for r in rows}


def test_topics_tool_creates_lists_describes_and_grows_a_topic(kafka: KafkaBroker, kafka_tools: KafkaTools) -> None:
    b = ("--bootstrap-server", kafka.bootstrap)
    assert "Created topic cli." in kafka_tools.run(TOPICS, *b, "--create", "--topic", "cli", "--partitions", "2")
    assert "cli" in kafka_tools.run(TOPICS, *b, "--list").split()
    kafka_tools.run(TOPICS, *b, "--alter", "--topic", "cli", "--partitions", "3")
    described = kafka_tools.run(TOPICS, *b, "--describe", "--topic", "cli")
    assert "PartitionCount: 3" in described
    assert sorted(int(p) for p in re.findall(r"Partition: (\d+)", described)) == [0, 1, 2]


def http_group_offset(url: str, group: str, topic: str) -> int:
    r = httpx.get(f"{url}/v1/groups/{group}", timeout=10)
    assert r.status_code == 200, r.text
    return int(next(q["committed_offset"] for q in r.json()["queues"] if q["topic"] == topic and q["queue_id"] == 0))


def test_console_producer_consumer_and_consumer_groups_tool(kafka: KafkaBroker, kafka_tools: KafkaTools) -> None:
    b = ("--bootstrap-server", kafka.bootstrap)
    create_topic(kafka.url, "lines", 1)
    kafka_tools.run(PRODUCER, *b, "--topic", "lines", "--property", "parse.key=true", "--property",
                    "key.separator=:", stdin="k1:one\nk2:two\nk3:three\n")
    stored = http_messages(kafka.url, "lines", 0)
    assert [m["body"] for m in stored] == ["one", "two", "three"]
    got = kafka_tools.run(CONSUMER, *b, "--topic", "lines", "--group", "cli-g", "--from-beginning",
                          "--max-messages", "3", "--timeout-ms", "30000", "--property", "print.key=true")
    assert [line.split("\t") for line in got.splitlines()] == [["k1", "one"], ["k2", "two"], ["k3", "three"]]
    row = _rows(kafka_tools.run(GROUPS, *b, "--describe", "--group", "cli-g"), "cli-g")[0]
    assert row[3:6] == ["3", "3", "0"]  # CURRENT-OFFSET LOG-END-OFFSET LAG
    reset = kafka_tools.run(GROUPS, *b, "--reset-offsets", "--to-offset", "1", "--group", "cli-g", "--topic",
                            "lines", "--execute")
    assert _rows(reset, "cli-g")[0][3] == "1"
    early = kafka_tools.run(GROUPS, *b, "--reset-offsets", "--to-datetime", "2020-01-01T00:00:00.000",
                            "--group", "cli-g", "--topic", "lines", "--dry-run")
    assert _rows(early, "cli-g")[0][3] == "0"  # by timestamp: the first message
    assert http_group_offset(kafka.url, "cli-g", "lines") == 1
    assert "successful" in kafka_tools.run(GROUPS, *b, "--delete", "--group", "cli-g")
    assert "cli-g" not in kafka_tools.run(GROUPS, *b, "--list").split()
