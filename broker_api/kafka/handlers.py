"""ApiVersions, Metadata, ListOffsets and InitProducerId: each takes the decoded request and
answers a dict that :func:`broker_api.kafka.codec.build` turns into the version asked for."""

from __future__ import annotations

import uuid
from typing import Any

from ..errors import BrokerError
from .codec import API_VERSIONS, ErrorCode, Request
from .context import KafkaContext
from .mapping import kafka_topic_ok

__all__ = ["api_versions", "metadata", "topic_entry", "visible_topics", "list_offsets", "init_producer_id", "api_versions_answer"]

_ZERO_UUID = uuid.UUID(int=0)
EARLIEST, LATEST, MAX_TIMESTAMP = -2, -1, -3


def api_versions_answer(error: ErrorCode = ErrorCode.none) -> dict[str, Any]:
    keys = [{"api_key": k, "min_version": lo, "max_version": hi} for k, (lo, _, hi) in sorted(API_VERSIONS.items())]
    return {"error_code": error, "api_keys": keys, "throttle_time": 0}


async def api_versions(ctx: KafkaContext, req: Request) -> dict[str, Any]:
    return api_versions_answer()


def _partitions(ctx: KafkaContext, queues: int) -> list[dict[str, Any]]:
    me = ctx.node.node_id
    return [{"error_code": 0, "partition_index": q, "leader_id": me, "leader_epoch": -1,
             "replica_nodes": [me], "isr_nodes": [me], "offline_replicas": []} for q in range(queues)]


def visible_topics(ctx: KafkaContext, session: dict[str, Any]) -> list[str]:
    """Topic names Kafka clients may see: names Kafka accepts, and (with [auth]) Pub or Sub granted."""
    return [t.name for t in ctx.kafka_topics() if _visible(ctx, session, t.name)]


def _visible(ctx: KafkaContext, session: dict[str, Any], name: str) -> bool:
    return ctx.topic_allowed(session, name, "Sub") or ctx.topic_allowed(session, name, "Pub")


def topic_entry(ctx: KafkaContext, session: dict[str, Any], name: str, auto_create: bool) -> dict[str, Any]:
    """One topic as Metadata and DescribeTopicPartitions describe it (an error when not visible)."""
    topics = ctx.broker.topics
    entry: dict[str, Any] = {"name": name, "topic_id": _ZERO_UUID, "is_internal": False, "partitions": [],
                             "topic_authorized_operations": -2147483648}
    if not kafka_topic_ok(name):
        return {**entry, "error_code": ErrorCode.invalid_topic_exception}
    if not _visible(ctx, session, name):
        return {**entry, "error_code": ErrorCode.topic_authorization_failed}
    if not topics.exists(name) and auto_create and ctx.broker.settings.broker.auto_create_topics:
        try:
            topics.for_produce(name)
        except BrokerError:
            pass
    if not topics.exists(name) or topics.get(name).system:
        return {**entry, "error_code": ErrorCode.unknown_topic_or_partition}
    return {**entry, "error_code": 0, "partitions": _partitions(ctx, topics.get(name).queues)}


async def metadata(ctx: KafkaContext, req: Request) -> dict[str, Any]:
    body = req.body
    wanted = body.topics
    if wanted is None or (req.api_version == 0 and not wanted):
        names = visible_topics(ctx, req.session)
        auto = False
    else:
        names = [t.name for t in wanted if t.name is not None]
        auto = bool(getattr(body, "allow_auto_topic_creation", True))
    n = ctx.node
    return {
        "throttle_time": 0,
        "brokers": [{"node_id": n.node_id, "host": n.host, "port": n.port, "rack": None}],
        "cluster_id": n.cluster_id,
        "controller_id": n.node_id,
        "topics": [topic_entry(ctx, req.session, name, auto) for name in names],
        "cluster_authorized_operations": -2147483648,
    }


def offset_for(ctx: KafkaContext, topic: str, partition: int, timestamp: int) -> tuple[int, int]:
    """(offset, timestamp) ListOffsets answers: earliest, latest, or the first at/after ``timestamp``
    (by the store's time index: store time, which is the born time within clock skew)."""
    lo, hi = ctx.broker.queue_range(topic, partition)
    if timestamp == EARLIEST:
        return lo, -1
    if timestamp in (LATEST, MAX_TIMESTAMP):
        return hi, -1
    if hi == lo:
        return -1, -1
    offset = ctx.broker.store.offset_for_timestamp(topic, partition, timestamp)
    if offset >= hi:
        return -1, -1
    return max(offset, lo), timestamp


async def list_offsets(ctx: KafkaContext, req: Request) -> dict[str, Any]:
    ctx.broker.settle(0.5)
    topics = []
    for t in req.body.topics:
        parts = []
        for p in t.partitions:
            entry: dict[str, Any] = {"partition_index": p.partition_index, "leader_epoch": -1,
                                     "timestamp": -1, "offset": -1, "error_code": 0}
            if not ctx.topic_allowed(req.session, t.name, "Sub"):
                entry["error_code"] = ErrorCode.topic_authorization_failed
            elif not _has_partition(ctx, t.name, p.partition_index):
                entry["error_code"] = ErrorCode.unknown_topic_or_partition
            else:
                entry["offset"], entry["timestamp"] = offset_for(ctx, t.name, p.partition_index, p.timestamp)
            parts.append(entry)
        topics.append({"name": t.name, "partitions": parts})
    return {"throttle_time": 0, "topics": topics}


def _has_partition(ctx: KafkaContext, topic: str, partition: int) -> bool:
    topics = ctx.broker.topics
    return kafka_topic_ok(topic) and topics.exists(topic) and 0 <= partition < topics.get(topic).queues


def has_partition(ctx: KafkaContext, topic: str, partition: int) -> bool:
    """Whether ``topic`` (a name Kafka accepts) exists here with ``partition``."""
    return _has_partition(ctx, topic, partition)


async def init_producer_id(ctx: KafkaContext, req: Request) -> dict[str, Any]:
    body = req.body
    if body.transactional_id is not None:
        return {"throttle_time": 0, "error_code": ErrorCode.transactional_id_authorization_failed,
                "producer_id": -1, "producer_epoch": -1}
    old = getattr(body, "producer_id", -1)
    if old is not None and old >= 0:  # an epoch bump of a known producer keeps its id
        epoch = int(getattr(body, "producer_epoch", 0)) + 1
        return {"throttle_time": 0, "error_code": 0, "producer_id": old, "producer_epoch": epoch}
    return {"throttle_time": 0, "error_code": 0, "producer_id": ctx.new_producer_id(), "producer_epoch": 0}
