"""confluent_kafka.admin.AdminClient against the listener: topics made and removed over Kafka are the broker's."""

from __future__ import annotations

import confluent_kafka.admin as ka
import httpx

from tests.kafka.conftest import KafkaBroker


def test_admin_client_creates_describes_and_deletes_topics(kafka: KafkaBroker) -> None:
    admin = ka.AdminClient({"bootstrap.servers": kafka.bootstrap})
    made = admin.create_topics([ka.NewTopic("admin-made", num_partitions=3, replication_factor=1)],
                               request_timeout=10)
    made["admin-made"].result(timeout=10)
    topic = httpx.get(f"{kafka.url}/v1/topics/admin-made", timeout=10).json()
    assert topic["queues"] == 3
    again = admin.create_topics([ka.NewTopic("admin-made", num_partitions=1)], request_timeout=10)
    try:
        again["admin-made"].result(timeout=10)
        raise AssertionError("creating an existing topic must fail")
    except ka.KafkaException as exc:
        assert exc.args[0].code() == ka.KafkaError.TOPIC_ALREADY_EXISTS
    configs = admin.describe_configs([ka.ConfigResource(ka.ResourceType.TOPIC, "admin-made")], request_timeout=10)
    values = next(iter(configs.values())).result(timeout=10)
    assert values["cleanup.policy"].value == "delete"
    cluster = admin.describe_cluster(request_timeout=10).result(timeout=10)
    assert [n.port for n in cluster.nodes] == [kafka.kafka_port]
    gone = admin.delete_topics(["admin-made"], request_timeout=10)
    gone["admin-made"].result(timeout=10)
    assert httpx.get(f"{kafka.url}/v1/topics/admin-made", timeout=10).status_code == 404
    assert "admin-made" not in admin.list_topics(timeout=10).topics
