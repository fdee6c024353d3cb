"""Admin APIs for Kafka's tools and AdminClient: CreateTopics, DeleteTopics, DescribeConfigs, DescribeCluster.

A Kafka topic is a sparkmq topic of ``num_partitions`` queues (-1: ``[broker] default_queues``);
the replication factor is accepted and ignored (replication is the broker's master/slave pair).
DescribeConfigs answers a few read-only topic and broker settings Kafka tools look for. Of a new
topic's configs, ``message.timestamp.type`` (CreateTime or LogAppendTime) is kept; others are ignored.
"""

from __future__ import annotations

import uuid
from typing import Any

from ..errors import BrokerError, TopicExistsError, TopicNotFoundError
from ..model.topics import CREATE_TIME, TIMESTAMP_TYPES
from .codec import ErrorCode, Request
from .context import KafkaContext
from .mapping import kafka_topic_ok

__all__ = ["ADMIN_HANDLERS"]

_TOPIC, _BROKER = 2, 4  # DescribeConfigs resource types
_TIMESTAMP_TYPE = "message.timestamp.type"


def _timestamp_type(topic: Any) -> str | None:
    """The new topic's message.timestamp.type (CreateTime when not given); None when it is not one."""
    given = {c.name: c.value for c in getattr(topic, "configs", ())}.get(_TIMESTAMP_TYPE) or CREATE_TIME
    return given if given in TIMESTAMP_TYPES else None


async def create_topics(ctx: KafkaContext, req: Request) -> dict[str, Any]:
    b = req.body
    out = []
    for t in b.topics:
        queues = t.num_partitions if t.num_partitions > 0 else ctx.broker.settings.broker.default_queues
        kind = _timestamp_type(t)
        entry: dict[str, Any] = {"name": t.name, "topic_id": uuid.UUID(int=0), "error_code": 0,
                                 "error_message": None, "num_partitions": queues, "replication_factor": 1,
                                 "configs": []}
        if not ctx.allowed(req.session, f"Cluster:{ctx.node.cluster_id}", "Admin"):
            entry.update(error_code=ErrorCode.topic_authorization_failed, error_message="Cluster Admin is not granted")
        elif not kafka_topic_ok(t.name):
            entry.update(error_code=ErrorCode.invalid_topic_exception, error_message="invalid topic name")
        elif kind is None:
            entry.update(error_code=ErrorCode.invalid_config,
                         error_message=f"{_TIMESTAMP_TYPE} must be one of {', '.join(TIMESTAMP_TYPES)}")
        elif ctx.broker.topics.exists(t.name):
            entry.update(error_code=ErrorCode.topic_already_exists, error_message=f"topic {t.name!r} exists")
        elif not b.validate_only:
            try:
                ctx.broker.topics.create(t.name, queues, "rw", timestamp_type=kind)
            except TopicExistsError as exc:
                entry.update(error_code=ErrorCode.topic_already_exists, error_message=exc.message)
            except BrokerError as exc:
                entry.update(error_code=ErrorCode.invalid_request, error_message=exc.message)
        out.append(entry)
    return {"throttle_time": 0, "topics": out}


async def delete_topics(ctx: KafkaContext, req: Request) -> dict[str, Any]:
    b = req.body
    names = list(b.topic_names) if hasattr(b, "topic_names") else [t.name for t in b.topics]
    out = []
    for name in names:
        entry: dict[str, Any] = {"name": name, "topic_id": uuid.UUID(int=0), "error_code": 0, "error_message": None}
        if not ctx.allowed(req.session, f"Cluster:{ctx.node.cluster_id}", "Admin"):
            entry.update(error_code=ErrorCode.topic_authorization_failed, error_message="Cluster Admin is not granted")
        elif name is None or not kafka_topic_ok(name) or not ctx.broker.topics.exists(name):
            entry.update(error_code=ErrorCode.unknown_topic_or_partition, error_message="no such topic")
        else:
            try:
                ctx.broker.topics.delete(name, ctx.broker.store)
                ctx.broker.groups.drop_topic(name)
            except TopicNotFoundError as exc:
                entry.update(error_code=ErrorCode.unknown_topic_or_partition, error_message=exc.message)
            except BrokerError as exc:
                entry.update(error_code=ErrorCode.invalid_request, error_message=exc.message)
        out.append(entry)
    return {"throttle_time": 0, "responses": out}


def _config(name: str, value: str) -> dict[str, Any]:
    return {"name": name, "value": value, "read_only": True, "config_source": 5, "is_sensitive": False,
            "synonyms": [], "config_type": 0, "documentation": None}


def _topic_configs(ctx: KafkaContext, name: str) -> list[dict[str, Any]]:
    store = ctx.broker.settings.store
    retention_ms = int(getattr(store, "retention_hours", 72) * 3600 * 1000)
    kind = ctx.broker.topics.get(name).timestamp_type
    return [_config("cleanup.policy", "delete"), _config("retention.ms", str(retention_ms)),
            _config(_TIMESTAMP_TYPE, kind), _config("compression.type", "producer"),
            _config("max.message.bytes", str(getattr(store, "max_message_bytes", 4 << 20)))]


def _broker_configs(ctx: KafkaContext) -> list[dict[str, Any]]:
    s = ctx.broker.settings
    return [_config("broker.id", str(ctx.node.node_id)), _config("num.partitions", str(s.broker.default_queues)),
            _config("auto.create.topics.enable", str(s.broker.auto_create_topics).lower()),
            _config("default.replication.factor", "1")]


async def describe_configs(ctx: KafkaContext, req: Request) -> dict[str, Any]:
    out = []
    for r in req.body.resources:
        entry: dict[str, Any] = {"error_code": 0, "error_message": None, "resource_type": r.resource_type,
                                 "resource_name": r.resource_name, "configs": []}
        if r.resource_type == _TOPIC:
            if not kafka_topic_ok(r.resource_name) or not ctx.broker.topics.exists(r.resource_name):
                entry.update(error_code=ErrorCode.unknown_topic_or_partition, error_message="no such topic")
            else:
                entry["configs"] = _topic_configs(ctx, r.resource_name)
        elif r.resource_type == _BROKER:
            entry["configs"] = _broker_configs(ctx)
        else:
            entry.update(error_code=ErrorCode.invalid_request, error_message="only topic and broker resources")
        keys = r.configuration_keys
        if keys is not None:
            entry["configs"] = [c for c in entry["configs"] if c["name"] in keys]
        out.append(entry)
    return {"throttle_time": 0, "results": out}


async def describe_cluster(ctx: KafkaContext, req: Request) -> dict[str, Any]:
    n = ctx.node
    return {"throttle_time": 0, "error_code": 0, "error_message": None, "endpoint_type": 1,
            "cluster_id": n.cluster_id, "controller_id": n.node_id,
            "brokers": [{"broker_id": n.node_id, "host": n.host, "port": n.port, "rack": None}],
            "cluster_authorized_operations": -2147483648}


ADMIN_HANDLERS = {19: create_topics, 20: delete_topics, 32: describe_configs, 60: describe_cluster}
