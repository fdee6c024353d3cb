"""[auth] on: SCRAM-SHA-256 logins with sparkmq users, and each Kafka API refusing a user who lacks
exactly the one permission it needs (Metadata hides topics the user may neither Pub nor Sub)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import confluent_kafka as ck
import httpx
import pytest
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from broker_api.auth.policy import parse_entry
from broker_api.auth.users import UserStore
from tests.kafka.conftest import KafkaBroker

_USERS = {  # user -> grants; each lacks one thing the "all" user has
    "all": [("Topic:orders", "Pub,Sub"), ("Group:*", "Sub")],
    "nopub": [("Topic:orders", "Sub"), ("Group:*", "Sub")],
    "nosub": [("Topic:orders", "Pub"), ("Group:*", "Sub")],
    "nogroup": [("Topic:orders", "Pub,Sub")],
}


def _conf(kafka: KafkaBroker, token: str, **conf: Any) -> dict[str, Any]:
    user, _, secret = token.partition(":")
    return {"bootstrap.servers": kafka.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": user, "sasl.password": secret, **conf}


@pytest.fixture
def secured(kafka_factory: Any, tmp_path: Path) -> tuple[KafkaBroker, dict[str, str]]:
    data = tmp_path / "data"
    users = UserStore(data / "auth")  # as `sparkmq user add` / `sparkmq acl grant` write them
    tokens = {"admin": f"admin:{users.add_user('admin', super_user=True)}"}
    for user, grants in _USERS.items():
        tokens[user] = f"{user}:{users.add_user(user)}"
        for resource, actions in grants:
            users.grant(user, parse_entry({"resource": resource, "actions": actions}))
    kafka = kafka_factory(env={"SPARKMQ_AUTH__ENABLED": "true", "SPARKMQ_AUTH__DIR": str(data / "auth")})
    for name in ("orders", "secret"):
        r = httpx.post(f"{kafka.url}/v1/topics", json={"name": name, "queues": 1},
                       headers={"Authorization": f"Bearer {tokens['admin']}"}, timeout=10)
        assert r.status_code == 201, r.text
    return kafka, tokens


def _produce(kafka: KafkaBroker, token: str) -> Any:
    out: list[Any] = []
    p = ck.Producer(_conf(kafka, token, **{"message.timeout.ms": 10000}))
    p.produce("orders", b"hello", partition=0, on_delivery=lambda err, _m: out.append(err))
    p.flush(20)
    return out[0] if out else "no delivery report"


def _error_code(future: Any) -> int:
    try:
        future.result(timeout=20)
    except ck.KafkaException as exc:
        return int(exc.args[0].code())
    return 0


def test_scram_login_and_one_missing_permission_per_api(secured: tuple[KafkaBroker, dict[str, str]]) -> None:
    kafka, tokens = secured
    assert _produce(kafka, tokens["all"]) is None  # SCRAM-SHA-256 with the user's own secret
    errors: list[Any] = []
    bad = ck.Producer(_conf(kafka, "all:wrong", error_cb=errors.append))
    deadline = time.monotonic() + 20
    while not errors and time.monotonic() < deadline:
        bad.poll(0.2)
    assert errors and errors[0].code() == ck.KafkaError._AUTHENTICATION
    assert "SCRAM: wrong secret" in kafka.proc.log_tail(50000)
    # Metadata: only topics the user may Pub or Sub
    admin = AdminClient(_conf(kafka, tokens["nopub"]))
    assert set(admin.list_topics(timeout=20).topics) == {"orders"}
    # Produce without Pub
    assert _produce(kafka, tokens["nopub"]).code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
    # ListOffsets and Fetch without Sub
    c = ck.Consumer(_conf(kafka, tokens["nosub"], **{"group.id": "g1"}))
    with pytest.raises(ck.KafkaException) as exc:
        c.get_watermark_offsets(ck.TopicPartition("orders", 0), timeout=20)
    assert exc.value.args[0].code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
    c.close()
    # OffsetCommit without Group Sub
    c = ck.Consumer(_conf(kafka, tokens["nogroup"], **{"group.id": "g2", "enable.auto.commit": False}))
    with pytest.raises(ck.KafkaException) as exc:
        c.commit(offsets=[ck.TopicPartition("orders", 0, 1)], asynchronous=False)
    assert exc.value.args[0].code() == ck.KafkaError.GROUP_AUTHORIZATION_FAILED
    c.close()
    # CreateTopics and CreatePartitions need Cluster Admin, which only the super user has
    admin = AdminClient(_conf(kafka, tokens["all"]))
    assert _error_code(admin.create_topics([NewTopic("fresh", 1)])["fresh"]) == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert _error_code(admin.create_partitions([NewPartitions("orders", 2)])["orders"]) \
        == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
    root = AdminClient(_conf(kafka, tokens["admin"]))
    assert _error_code(root.create_partitions([NewPartitions("orders", 2)])["orders"]) == 0
    assert set(root.list_topics(timeout=20).topics) >= {"orders", "secret"}


def _auth_error(kafka: KafkaBroker, token: str, mechanism: str) -> Any:
    """The first error a producer logging in with ``mechanism`` reports (None: it produced)."""
    errors: list[Any] = []
    p = ck.Producer(_conf(kafka, token, **{"sasl.mechanism": mechanism, "error_cb": errors.append,
                                           "message.timeout.ms": 10000}))
    out: list[Any] = []
    p.produce("orders", b"512", partition=0, on_delivery=lambda err, _m: out.append(err))
    deadline = time.monotonic() + 20
    while not out and not errors and time.monotonic() < deadline:
        p.poll(0.2)
    return errors[0].code() if errors else out[0] if out else "no answer"


def test_scram_sha512_logs_in_with_the_users_secret(secured: tuple[KafkaBroker, dict[str, str]],
                                                    tmp_path: Path) -> None:
    kafka, tokens = secured
    assert _auth_error(kafka, tokens["all"], "SCRAM-SHA-512") is None
    user, _, secret = tokens["all"].partition(":")
    assert _auth_error(kafka, f"{user}:{secret}x", "SCRAM-SHA-512") == ck.KafkaError._AUTHENTICATION
    # a user written before SHA-512 keys were stored: SCRAM-SHA-512 fails with a hint, SHA-256 works
    users_path = tmp_path / "data" / "auth" / "users.json"  # where the fixture's users live
    doc = json.loads(users_path.read_text())
    del doc["users"]["all"]["key_sha512"]
    users_path.write_text(json.dumps(doc))
    time.sleep(0.6)  # the broker looks at the file at most every 0.25 s
    assert _auth_error(kafka, tokens["all"], "SCRAM-SHA-512") == ck.KafkaError._AUTHENTICATION
    assert "has no SHA-512 key" in kafka.proc.log_tail(50000)
    assert _auth_error(kafka, tokens["all"], "SCRAM-SHA-256") is None
