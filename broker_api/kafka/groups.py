"""The group coordinator of Kafka's classic group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup).

States as in Kafka's GroupMetadata::

    Empty --join--> PreparingRebalance --all members joined (or rebalance timeout)--> CompletingRebalance
    CompletingRebalance --leader's SyncGroup--> Stable --join / leave / session expiry--> PreparingRebalance

Membership lives in memory (a restarted broker makes clients join again, as a coordinator move does);
committed offsets do not: they are the broker's group offsets (``broker_api.model.groups``), the same
the HTTP API and the Spark source read and write. Everything runs on the broker's event loop.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from .codec import ErrorCode

__all__ = ["GroupCoordinator", "Group", "Member", "JoinAnswer"]

_EXPIRY_CHECK_S = 0.5


@dataclass
class Member:
    """One member of a group, as its last JoinGroup described it."""

    member_id: str
    client_id: str
    client_host: str
    session_timeout_s: float
    rebalance_timeout_s: float
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    instance_id: str | None = None
    assignment: bytes = b""
    last_seen: float = field(default_factory=time.monotonic)
    join: asyncio.Future[dict[str, Any]] | None = None
    sync: asyncio.Future[dict[str, Any]] | None = None


JoinAnswer = dict[str, Any]


@dataclass
class Group:
    """One consumer group's membership and generation."""

    name: str
    state: str = "Empty"
    generation: int = 0
    protocol_type: str = ""
    protocol: str | None = None
    leader: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    timer: asyncio.TimerHandle | None = None
    delay_until: float = 0.0


class GroupCoordinator:
    """Every group's state; one per listener."""

    def __init__(self, ctx: Any) -> None:
        self.ctx = ctx
        self.groups: dict[str, Group] = {}
        self.pending: set[str] = set()  # member ids handed out with MEMBER_ID_REQUIRED, not joined yet
        self._reaper = asyncio.get_running_loop().create_task(self._expire_forever())

    def close(self) -> None:
        self._reaper.cancel()
        for g in self.groups.values():
            if g.timer is not None:
                g.timer.cancel()
            for m in g.members.values():
                _fail(m, ErrorCode.coordinator_not_available)

    def group(self, name: str) -> Group:
        g = self.groups.get(name)
        if g is None:
            g = self.groups[name] = Group(name)
        return g

    # -- join ------------------------------------------------------------------------------------

    async def join(self, name: str, member: Member, known: bool) -> JoinAnswer:
        g = self.group(name)
        if known and member.member_id not in g.members and member.member_id not in self.pending:
            return _join_error(ErrorCode.unknown_member_id, member.member_id)
        self.pending.discard(member.member_id)
        if g.members and member.protocol_type != g.protocol_type:
            return _join_error(ErrorCode.inconsistent_group_protocol, member.member_id)
        if g.members and not _common_protocol(list(g.members.values()) + [member], g, member):
            return _join_error(ErrorCode.inconsistent_group_protocol, member.member_id)
        old = g.members.get(member.member_id)
        if old is not None:
            _fail(old, ErrorCode.rebalance_in_progress, only_join=True)
        member.join = asyncio.get_running_loop().create_future()
        g.members[member.member_id] = member
        g.protocol_type = member.protocol_type
        if old is not None and old.protocols == member.protocols and member.member_id != g.leader \
                and g.state in ("CompletingRebalance", "Stable"):
            member.assignment = old.assignment  # a follower joining again unchanged: the current generation
            self._complete_one(g, member)
        else:
            self._prepare(g, first=g.state == "Empty")
            self._maybe_complete(g)
        return await member.join

    def _prepare(self, g: Group, first: bool = False) -> None:
        """Start (or keep) a rebalance: every member must join again before it completes."""
        if g.state != "PreparingRebalance":
            g.state = "PreparingRebalance"
            for m in g.members.values():
                _fail(m, ErrorCode.rebalance_in_progress, only_sync=True)
            delay = self.ctx.config.group_initial_rebalance_delay_ms / 1000 if first else 0.0
            timeout = max(max((m.rebalance_timeout_s for m in g.members.values()), default=0.0), delay)
            if g.timer is not None:
                g.timer.cancel()
            loop = asyncio.get_running_loop()
            g.timer = loop.call_later(timeout, self._complete, g, True)
            g.delay_until = time.monotonic() + delay
            if delay:  # the first members get a short window to arrive together
                loop.call_later(delay, self._maybe_complete, g)

    def _maybe_complete(self, g: Group) -> None:
        if g.state != "PreparingRebalance" or time.monotonic() < g.delay_until:
            return
        if any(m.join is None or m.join.done() for m in g.members.values()):
            return  # someone has not joined again yet
        self._complete(g, False)

    def _complete(self, g: Group, timed_out: bool) -> None:
        """Every member that joined gets the new generation; the others are dropped."""
        if g.state != "PreparingRebalance":
            return
        if g.timer is not None:
            g.timer.cancel()
            g.timer = None
        for mid in [mid for mid, m in g.members.items() if m.join is None or m.join.done()]:
            del g.members[mid]
        if not g.members:
            g.state, g.leader, g.protocol = "Empty", None, None
            g.generation += 1
            return
        g.generation += 1
        g.protocol = _common_protocol(list(g.members.values()), g, None)
        if g.leader not in g.members:
            g.leader = next(iter(g.members))
        g.state = "CompletingRebalance"
        for m in g.members.values():
            self._complete_one(g, m)

    def _complete_one(self, g: Group, m: Member) -> None:
        members = [{"member_id": x.member_id, "group_instance_id": x.instance_id,
                    "metadata": dict(x.protocols).get(g.protocol or "", b"")} for x in g.members.values()]
        answer = {"error_code": 0, "generation_id": g.generation, "protocol_type": g.protocol_type,
                  "protocol_name": g.protocol, "leader": g.leader or "", "member_id": m.member_id,
                  "members": members if m.member_id == g.leader else []}
        if m.join is not None and not m.join.done():
            m.join.set_result(answer)
        m.last_seen = time.monotonic()

    # -- sync, heartbeat, leave ------------------------------------------------------------------

    def check(self, name: str, member_id: str, generation: int) -> ErrorCode:
        """Whether ``member_id`` of generation ``generation`` may sync, heartbeat or commit."""
        g = self.groups.get(name)
        if g is None or member_id not in g.members:
            return ErrorCode.unknown_member_id
        if generation != g.generation:
            return ErrorCode.illegal_generation
        g.members[member_id].last_seen = time.monotonic()
        if g.state == "PreparingRebalance":
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    async def sync(self, name: str, member_id: str, generation: int,
                   assignments: dict[str, bytes]) -> tuple[ErrorCode, bytes, Group | None]:
        error = self.check(name, member_id, generation)
        if error:
            return error, b"", None
        g = self.groups[name]
        m = g.members[member_id]
        if member_id == g.leader and g.state == "CompletingRebalance":
            for x in g.members.values():
                x.assignment = assignments.get(x.member_id, b"")
            g.state = "Stable"
            for x in g.members.values():
                if x.sync is not None and not x.sync.done():
                    x.sync.set_result({"error_code": 0, "assignment": x.assignment})
        if g.state == "Stable":
            return ErrorCode.none, m.assignment, g
        m.sync = asyncio.get_running_loop().create_future()
        answer = await m.sync
        return ErrorCode(answer["error_code"]), answer.get("assignment", b""), g

    def leave(self, name: str, member_ids: list[str]) -> dict[str, ErrorCode]:
        g = self.groups.get(name)
        out: dict[str, ErrorCode] = {}
        for mid in member_ids:
            if g is None or mid not in g.members:
                out[mid] = ErrorCode.unknown_member_id
                continue
            m = g.members.pop(mid)
            _fail(m, ErrorCode.unknown_member_id)
            out[mid] = ErrorCode.none
        if g is not None and any(e == ErrorCode.none for e in out.values()):
            self._membership_changed(g)
        return out

    def _membership_changed(self, g: Group) -> None:
        if not g.members:
            if g.timer is not None:
                g.timer.cancel()
                g.timer = None
            g.state, g.leader, g.protocol = "Empty", None, None
            g.generation += 1
            return
        self._prepare(g)
        self._maybe_complete(g)

    async def _expire_forever(self) -> None:
        while True:
            await asyncio.sleep(_EXPIRY_CHECK_S)
            now = time.monotonic()
            for g in list(self.groups.values()):
                gone = [mid for mid, m in g.members.items()
                        if (m.join is None or m.join.done()) and now - m.last_seen > m.session_timeout_s]
                if gone:
                    for mid in gone:
                        _fail(g.members.pop(mid), ErrorCode.unknown_member_id)
                    self._membership_changed(g)

    def new_member_id(self, client_id: str) -> str:
        """A member id for a first join (KIP-394: the client joins again with it)."""
        member_id = f"{client_id or 'member'}-{uuid.uuid4()}"
        if len(self.pending) > 10_000:  # ids never used: forget them rather than grow
            self.pending.clear()
        self.pending.add(member_id)
        return member_id


def _common_protocol(members: list[Member], g: Group, newcomer: Member | None) -> str | None:
    """The first protocol of the leader (or first member) that every member supports."""
    if not members:
        return None
    first = g.members.get(g.leader or "") or members[0]
    names = [n for n, _ in first.protocols]
    for name in names:
        if all(name in dict(m.protocols) for m in members):
            return name
    return None


def _join_error(code: ErrorCode, member_id: str) -> JoinAnswer:
    return {"error_code": code, "generation_id": -1, "protocol_type": None, "protocol_name": None,
            "leader": "", "member_id": member_id, "members": []}


def _fail(m: Member, code: ErrorCode, only_join: bool = False, only_sync: bool = False) -> None:
    if not only_sync and m.join is not None and not m.join.done():
        m.join.set_result(_join_error(code, m.member_id))
    if not only_join and m.sync is not None and not m.sync.done():
        m.sync.set_result({"error_code": code})
