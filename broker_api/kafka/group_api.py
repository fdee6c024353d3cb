"""Group APIs: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
OffsetFetch, ListGroups, DescribeGroups. This broker coordinates every group; committed offsets are
the broker's group offsets (a Kafka committed offset and a sparkmq group offset are both the next
offset to consume)."""

from __future__ import annotations

from typing import Any

from .codec import ErrorCode, Request, millis
from .context import KafkaContext
from .groups import GroupCoordinator, Member
from .handlers import has_partition

__all__ = ["GROUP_HANDLERS"]


_DENIED = ErrorCode.group_authorization_failed


def _denied(ctx: KafkaContext, req: Request, group: str) -> bool:
    return not ctx.allowed(req.session, f"Group:{group}", "Sub")


def _coordinator(ctx: KafkaContext) -> GroupCoordinator:
    assert ctx.coordinator is not None
    return ctx.coordinator  # type: ignore[no-any-return]


async def find_coordinator(ctx: KafkaContext, req: Request) -> dict[str, Any]:
    n = ctx.node
    me = {"node_id": n.node_id, "host": n.host, "port": n.port, "error_code": 0, "error_message": None}
    keys = getattr(req.body, "coordinator_keys", None)
    if keys is not None:  # v4+: several keys at once
        return {"throttle_time": 0, "coordinators": [{"key": k, **me} for k in keys]}
    return {"throttle_time": 0, **me}


async def join_group(ctx: KafkaContext, req: Request) -> dict[str, Any]:
    b = req.body
    coord = _coordinator(ctx)
    member_id = b.member_id
    if _denied(ctx, req, b.group_id):
        return {"error_code": _DENIED, "generation_id": -1, "leader": "", "member_id": member_id, "members": []}
    known = bool(member_id)
    if not known:
        member_id = coord.new_member_id(req.client_id or "")
        if req.api_version >= 4:  # KIP-394: the client joins again with the id it was given
            return {"error_code": ErrorCode.member_id_required, "generation_id": -1, "protocol_name": None,
                    "leader": "", "member_id": member_id, "members": [], "throttle_time": 0}
    session = millis(b.session_timeout) / 1000
    rebalance = millis(getattr(b, "rebalance_timeout", b.session_timeout)) / 1000
    member = Member(member_id, req.client_id or "", "/127.0.0.1", session, rebalance, b.protocol_type,
                    [(p.name, bytes(p.metadata)) for p in b.protocols], getattr(b, "group_instance_id", None))
    answer = await coord.join(b.group_id, member, known)
    return {"throttle_time": 0, **answer}


async def sync_group(ctx: KafkaContext, req: Request) -> dict[str, Any]:
    b = req.body
    if _denied(ctx, req, b.group_id):
        return {"throttle_time": 0, "error_code": _DENIED, "assignment": b""}
    assignments = {a.member_id: bytes(a.assignment) for a in b.assignments}
    error, assignment, group = await _coordinator(ctx).sync(b.group_id, b.member_id, b.generation_id, assignments)
    return {"throttle_time": 0, "error_code": error, "assignment": assignment,
            "protocol_type": group.protocol_type if group else None,
            "protocol_name": group.protocol if group else None}


async def heartbeat(ctx: KafkaContext, req: Request) -> dict[str, Any]:
    b = req.body
    if _denied(ctx, req, b.group_id):
        return {"throttle_time": 0, "error_code": _DENIED}
    return {"throttle_time": 0, "error_code": _coordinator(ctx).check(b.group_id, b.member_id, b.generation_id)}


async def leave_group(ctx: KafkaContext, req: Request) -> dict[str, Any]:
    b = req.body
    members = getattr(b, "members", None)
    ids = [m.member_id for m in members] if members is not None else [b.member_id]
    if _denied(ctx, req, b.group_id):
        return {"throttle_time": 0, "error_code": _DENIED, "members": []}
    result = _coordinator(ctx).leave(b.group_id, ids)
    if members is None:
        return {"throttle_time": 0, "error_code": result[b.member_id]}
    return {"throttle_time": 0, "error_code": 0,
            "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                         "error_code": result[m.member_id]} for m in members]}


async def offset_commit(ctx: KafkaContext, req: Request) -> dict[str, Any]:
    b = req.body
    generation = getattr(b, "generation_id_or_member_epoch", getattr(b, "generation_id", -1))
    error = ErrorCode.none
    if _denied(ctx, req, b.group_id):
        error = _DENIED
    elif generation >= 0 or b.member_id:
        error = _coordinator(ctx).check(b.group_id, b.member_id, generation)
        error = ErrorCode.none if error == ErrorCode.rebalance_in_progress else error
    topics = []
    for t in b.topics:
        parts, offsets = [], {}
        for p in t.partitions:
            code = error
            if not code and not has_partition(ctx, t.name, p.partition_index):
                code = ErrorCode.unknown_topic_or_partition
            elif not code:
                offsets[p.partition_index] = int(p.committed_offset)
            parts.append({"partition_index": p.partition_index, "error_code": code})
        if offsets:
            ctx.broker.groups.commit(b.group_id, t.name, offsets)
        topics.append({"name": t.name, "partitions": parts})
    return {"throttle_time": 0, "topics": topics}


def _fetch_offsets(ctx: KafkaContext, group: str, topics: Any) -> list[dict[str, Any]]:
    groups = ctx.broker.groups
    if topics is None:  # every topic the group has offsets for
        wanted = [(name, sorted(offsets)) for name, offsets in sorted(groups.topics_of(group).items())]
    else:
        wanted = [(t.name, list(t.partition_indexes)) for t in topics]
    out = []
    for name, partitions in wanted:
        committed = groups.offsets(group, name) if ctx.broker.topics.exists(name) else {}
        out.append({"name": name, "partitions": [
            {"partition_index": p, "committed_offset": committed.get(p, -1), "committed_leader_epoch": -1,
             "metadata": "", "error_code": 0} for p in partitions]})
    return out


async def offset_fetch(ctx: KafkaContext, req: Request) -> dict[str, Any]:
    b = req.body
    groups = getattr(b, "groups", None)
    if groups is not None:  # v8+: several groups at once
        return {"throttle_time": 0, "groups": [
            {"group_id": g.group_id, "topics": [], "error_code": _DENIED} if _denied(ctx, req, g.group_id) else
            {"group_id": g.group_id, "topics": _fetch_offsets(ctx, g.group_id, g.topics), "error_code": 0}
            for g in groups]}
    if _denied(ctx, req, b.group_id):
        return {"throttle_time": 0, "error_code": _DENIED, "topics": []}
    return {"throttle_time": 0, "error_code": 0, "topics": _fetch_offsets(ctx, b.group_id, b.topics)}


async def list_groups(ctx: KafkaContext, req: Request) -> dict[str, Any]:
    coord = _coordinator(ctx)
    wanted = set(getattr(req.body, "states_filter", ()) or ())
    rows = {name: (g.protocol_type, g.state) for name, g in coord.groups.items()}
    for name in ctx.broker.groups.names():  # groups known over HTTP or from before a restart
        rows.setdefault(name, ("consumer", "Empty"))
    groups = [{"group_id": name, "protocol_type": ptype, "group_state": state}
              for name, (ptype, state) in sorted(rows.items()) if not wanted or state in wanted]
    return {"throttle_time": 0, "error_code": 0, "groups": groups}


async def describe_groups(ctx: KafkaContext, req: Request) -> dict[str, Any]:
    coord = _coordinator(ctx)
    out = []
    for name in req.body.groups:
        if _denied(ctx, req, name):
            out.append({"error_code": _DENIED, "group_id": name, "group_state": "", "protocol_type": "",
                        "protocol_data": "", "members": [], "authorized_operations": -2147483648})
            continue
        g = coord.groups.get(name)
        if g is None:
            state = "Empty" if ctx.broker.groups.exists(name) else "Dead"
            out.append({"error_code": 0, "group_id": name, "group_state": state, "protocol_type": "",
                        "protocol_data": "", "members": [], "authorized_operations": -2147483648})
            continue
        members = [{"member_id": m.member_id, "group_instance_id": m.instance_id, "client_id": m.client_id,
                    "client_host": m.client_host, "member_metadata": dict(m.protocols).get(g.protocol or "", b""),
                    "member_assignment": m.assignment} for m in g.members.values()]
        out.append({"error_code": 0, "group_id": name, "group_state": g.state, "protocol_type": g.protocol_type,
                    "protocol_data": g.protocol or "", "members": members,
                    "authorized_operations": -2147483648})
    return {"throttle_time": 0, "groups": out}


GROUP_HANDLERS = {10: find_coordinator, 11: join_group, 14: sync_group, 12: heartbeat, 13: leave_group,
                  8: offset_commit, 9: offset_fetch, 16: list_groups, 15: describe_groups}
