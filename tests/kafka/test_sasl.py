"""[auth] on: SASL/PLAIN with sparkmq's users, and their ACL, on the Kafka port."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import confluent_kafka as ck
import httpx
from kio.schema.metadata.v12 import MetadataRequest

from broker_api.kafka.codec import encode_request
from tests.kafka.conftest import KafkaBroker, roundtrip

ROOT = Path(__file__).resolve().parents[2]


def _sparkmq(*args: str) -> str:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SPARKMQ_")}
    out = subprocess.run([sys.executable, "-m", "broker_api", *args], cwd=ROOT, capture_output=True, text=True,
                         timeout=60, env=clean)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def _sasl(kafka: KafkaBroker, token: str, **conf: Any) -> dict[str, Any]:
    user, _, secret = token.partition(":")
    return {"bootstrap.servers": kafka.bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.username": user, "sasl.password": secret, **conf}


def test_sasl_plain_users_and_acl_on_the_kafka_port(kafka_factory: Any, tmp_path: Path) -> None:
    data = tmp_path / "data"
    tokens = {name: _sparkmq("user", "add", name, *flags, "--data-dir", str(data))
              for name, flags in {"admin": ["--super"], "app": []}.items()}
    for resource, actions in (("Topic:orders", "Pub,Sub"), ("Group:*", "Sub")):
        _sparkmq("acl", "grant", "app", resource, actions, "--data-dir", str(data))
    kafka = kafka_factory(env={"SPARKMQ_AUTH__ENABLED": "true", "SPARKMQ_AUTH__DIR": str(data / "auth")})
    head = {"Authorization": f"Bearer {tokens['admin']}"}
    for name in ("orders", "secret"):
        r = httpx.post(f"{kafka.url}/v1/topics", json={"name": name, "queues": 1}, headers=head, timeout=10)
        assert r.status_code == 201, r.text
    # no SASL: anything but ApiVersions closes the connection
    assert roundtrip(kafka.kafka_port, encode_request(3, 12, 1, MetadataRequest(
        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False))) is None
    results: dict[str, Any] = {}
    p = ck.Producer(_sasl(kafka, tokens["app"], **{"message.timeout.ms": 10000}))
    for topic in ("orders", "secret"):
        p.produce(topic, b"hello", partition=0, on_delivery=lambda err, msg, t=topic: results.__setitem__(t, err))
    p.flush(20)
    assert results["orders"] is None
    assert results["secret"] is not None and results["secret"].code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
    c = ck.Consumer(_sasl(kafka, tokens["app"], **{"group.id": "g", "auto.offset.reset": "earliest"}))
    c.subscribe(["orders"])
    m, deadline = None, time.monotonic() + 30
    while (m is None or m.error() is not None) and time.monotonic() < deadline:
        m = c.poll(0.5)
    c.close()
    assert m is not None and m.value() == b"hello"
    errors: list[Any] = []
    bad = ck.Producer(_sasl(kafka, "app:wrong", **{"error_cb": errors.append}))
    deadline = time.monotonic() + 20
    while not errors and time.monotonic() < deadline:
        bad.poll(0.2)
    assert errors and errors[0].code() == ck.KafkaError._AUTHENTICATION
    assert "SASL/PLAIN authentication failed" in kafka.proc.log_tail(50000)
