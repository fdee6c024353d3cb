"""APIs Kafka's command-line tools and AdminClient use beyond the basics: CreatePartitions,
DescribeTopicPartitions, OffsetForLeaderEpoch, DeleteGroups and OffsetDelete.

CreatePartitions grows a topic's queue count (a topic never loses queues; explicit replica
assignments are refused, there being one replica). OffsetForLeaderEpoch answers the partition's end
offset for any epoch (this broker has one leader epoch per partition, -1 on the wire elsewhere).
DeleteGroups refuses a group with live members (NON_EMPTY_GROUP), as Kafka does.
"""

from __future__ import annotations

from typing import Any

from ..errors import BrokerError
from .codec import ErrorCode, Request
from .context import KafkaContext
from .handlers import has_partition, topic_entry, visible_topics

__all__ = ["TOOLS_HANDLERS"]


async def create_partitions(ctx: KafkaContext, req: Request) -> dict[str, Any]:
    b = req.body
    out = []
    for t in b.topics:
        entry: dict[str, Any] = {"name": t.name, "error_code": 0, "error_message": None}
        topics = ctx.broker.topics
        if not ctx.allowed(req.session, f"Cluster:{ctx.node.cluster_id}", "Admin"):
            entry.update(error_code=ErrorCode.topic_authorization_failed, error_message="Cluster Admin is not granted")
        elif not has_partition(ctx, t.name, 0):
            entry.update(error_code=ErrorCode.unknown_topic_or_partition, error_message="no such topic")
        elif t.assignments is not None:
            entry.update(error_code=ErrorCode.invalid_replica_assignment, error_message="one replica: no assignments")
        elif t.count <= topics.get(t.name).queues:
            entry.update(error_code=ErrorCode.invalid_partitions,
                         error_message=f"topic has {topics.get(t.name).queues} partitions; it can only grow")
        elif not b.validate_only:
            try:
                topics.grow(t.name, t.count)
            except BrokerError as exc:
                entry.update(error_code=ErrorCode.invalid_partitions, error_message=exc.message)
        out.append(entry)
    return {"throttle_time": 0, "results": out}


async def describe_topic_partitions(ctx: KafkaContext, req: Request) -> dict[str, Any]:
    b = req.body
    names = [t.name for t in b.topics] if b.topics else visible_topics(ctx, req.session)
    cursor = b.cursor
    if cursor is not None:
        names = [n for n in sorted(names) if n >= cursor.topic_name]
    topics = []
    for name in sorted(names):
        entry = topic_entry(ctx, req.session, name, False)
        if cursor is not None and name == cursor.topic_name:
            entry["partitions"] = [p for p in entry["partitions"] if p["partition_index"] >= cursor.partition_index]
        for p in entry["partitions"]:
            p.update(eligible_leader_replicas=[], last_known_elr=[])
        topics.append(entry)
    return {"throttle_time": 0, "topics": topics, "next_cursor": None}


async def offset_for_leader_epoch(ctx: KafkaContext, req: Request) -> dict[str, Any]:
    out = []
    for t in req.body.topics:
        parts = []
        for p in t.partitions:
            entry: dict[str, Any] = {"error_code": 0, "partition": p.partition, "leader_epoch": -1, "end_offset": -1}
            if not ctx.topic_allowed(req.session, t.topic, "Sub"):
                entry["error_code"] = ErrorCode.topic_authorization_failed
            elif not has_partition(ctx, t.topic, p.partition):
                entry["error_code"] = ErrorCode.unknown_topic_or_partition
            else:
                entry.update(leader_epoch=p.leader_epoch, end_offset=ctx.broker.queue_range(t.topic, p.partition)[1])
            parts.append(entry)
        out.append({"topic": t.topic, "partitions": parts})
    return {"throttle_time": 0, "topics": out}


async def delete_groups(ctx: KafkaContext, req: Request) -> dict[str, Any]:
    out = []
    for name in req.body.groups_names:
        g = ctx.coordinator.groups.get(name) if ctx.coordinator is not None else None
        code = ErrorCode.none
        if not ctx.allowed(req.session, f"Group:{name}", "Sub"):
            code = ErrorCode.group_authorization_failed
        elif g is not None and g.members:
            code = ErrorCode.non_empty_group
        elif g is None and not ctx.broker.groups.exists(name):
            code = ErrorCode.group_id_not_found
        else:
            ctx.broker.groups.delete(name)
            if g is not None:
                ctx.coordinator.groups.pop(name, None)
        out.append({"group_id": name, "error_code": code})
    return {"throttle_time": 0, "results": out}


async def offset_delete(ctx: KafkaContext, req: Request) -> dict[str, Any]:
    b = req.body
    if not ctx.allowed(req.session, f"Group:{b.group_id}", "Sub"):
        return {"error_code": ErrorCode.group_authorization_failed, "throttle_time": 0, "topics": []}
    if not ctx.broker.groups.exists(b.group_id):
        return {"error_code": ErrorCode.group_id_not_found, "throttle_time": 0, "topics": []}
    g = ctx.coordinator.groups.get(b.group_id) if ctx.coordinator is not None else None
    busy = g is not None and bool(g.members)
    topics = []
    for t in b.topics:
        code = ErrorCode.group_subscribed_to_topic if busy else ErrorCode.none
        if not busy:
            ctx.broker.groups.delete(b.group_id, t.name, {p.partition_index for p in t.partitions})
        topics.append({"name": t.name, "partitions": [{"partition_index": p.partition_index, "error_code": code}
                                                       for p in t.partitions]})
    return {"error_code": 0, "throttle_time": 0, "topics": topics}


TOOLS_HANDLERS = {37: create_partitions, 75: describe_topic_partitions, 23: offset_for_leader_epoch,
                  42: delete_groups, 47: offset_delete}
