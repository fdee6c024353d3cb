"""The controller's state machine (RocketMQ 5's ReplicasInfoManager): pure, no I/O, no clock.

Per broker name (a *group*)::

    master               replica id of the master, or None before the first one registers
    master_epoch         +1 at every election; a broker that sees a newer epoch than its own is fenced
    sync_state_set       replica ids holding every acknowledged write (the master included)
    sync_state_set_epoch +1 at every alter and election; fences stale alter requests
    replicas             replica id -> broker id (stable, 1, 2, ...), HTTP and HA addresses,
                         last reported max offset and epoch, last heartbeat (monotonic, not persisted)
    epochs               [(epoch, start offset)]: the group's history, each master's first offset
    last_election        when, why, who, and how long it took

Operations take ``now`` (monotonic seconds) from the caller, so tests drive time.
``to_dict``/``from_dict`` give the persisted form (heartbeat times are not
kept: after a controller restart every replica gets a full timeout of grace).

Election (``elect``): candidates are the live members of the in-sync set other
than the old master (live = a heartbeat within ``master_timeout_s``); with
``allow_unclean_election`` any live replica when none is in sync.  They are
ranked by (reported epoch desc, max offset desc, broker id asc).  The winner
gets ``master_epoch + 1`` and the in-sync set shrinks to it alone, as in
RocketMQ (slaves rejoin once they catch up).  No candidate: the old master
stays recorded (it is master again when it returns) and the failure is logged
in ``failed_election``.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

from ..errors import ControllerFencedError, ControllerGroupNotFoundError

__all__ = ["ControllerState", "Heartbeat", "Group", "Replica", "Election"]


@dataclass(slots=True)
class Heartbeat:
    """What a broker reports every second (its first one registers it)."""

    cluster: str
    broker_name: str
    replica_id: str  # stable per data directory
    address: str  # HTTP URL clients and slaves use
    ha_address: str | None = None  # host:port of its HA listener when it is master
    ha_client_address: str | None = None  # a slave: the local end of its HA connection
    max_offset: int = 0
    epoch: int = 0  # the last epoch in its epoch file
    epoch_start: int | None = None  # a master: where its current epoch starts
    confirm_offset: int | None = None  # a master: its in-sync set's lowest ack (slaves read below it)


@dataclass(slots=True)
class Replica:
    replica_id: str
    broker_id: int
    address: str
    ha_address: str | None = None
    ha_client_address: str | None = None
    max_offset: int = 0
    epoch: int = 0
    last_heartbeat: float = 0.0
    confirm_offset: int | None = None


@dataclass(slots=True)
class Election:
    at_ms: int  # wall clock
    reason: str
    old_master: str | None
    new_master: str | None  # None: no candidate, nothing changed
    epoch: int
    master_silent_ms: int  # how long the old master had been silent when the controller acted
    took_ms: int | None = None  # from the old master's last heartbeat to the new master's first as master


@dataclass(slots=True)
class Group:
    cluster: str
    name: str
    master: str | None = None
    master_epoch: int = 0
    sync_state_set: set[str] = field(default_factory=set)
    sync_state_set_epoch: int = 0
    replicas: dict[str, Replica] = field(default_factory=dict)
    epochs: list[tuple[int, int]] = field(default_factory=list)
    last_election: Election | None = None  # the last one that moved the master
    failed_election: Election | None = None  # the last attempt that found no candidate
    next_broker_id: int = 1
    _silent_since: float = 0.0  # monotonic: old master's last heartbeat at the last election


class ControllerState:
    """All groups; every method that returns True from ``changed`` needs a save."""

    def __init__(self, master_timeout_s: float, allow_unclean_election: bool = False) -> None:
        self.master_timeout_s = master_timeout_s
        self.allow_unclean_election = allow_unclean_election
        self.groups: dict[str, Group] = {}

    # -- broker requests ---------------------------------------------------

    def heartbeat(self, hb: Heartbeat, now: float) -> bool:
        """Record a heartbeat (registering a new replica); True when the persisted state changed."""
        group = self.groups.get(hb.broker_name)
        changed = False
        if group is None:
            group = self.groups[hb.broker_name] = Group(hb.cluster, hb.broker_name)
            changed = True
        rep = group.replicas.get(hb.replica_id)
        if rep is None:
            rep = group.replicas[hb.replica_id] = Replica(hb.replica_id, group.next_broker_id, hb.address)
            group.next_broker_id += 1
            changed = True
        if (rep.address, rep.ha_address) != (hb.address, hb.ha_address):
            changed = True
        rep.address, rep.ha_address, rep.ha_client_address = hb.address, hb.ha_address, hb.ha_client_address
        rep.max_offset, rep.epoch, rep.last_heartbeat = hb.max_offset, hb.epoch, now
        rep.confirm_offset = hb.confirm_offset
        if group.master is None:
            self._crown(group, rep.replica_id, "first replica of the group", now, max(hb.epoch, group.master_epoch))
            changed = True
        if group.master == hb.replica_id and hb.epoch_start is not None and hb.epoch == group.master_epoch:
            changed |= self._record_epoch(group, hb.epoch, hb.epoch_start, now)
        return changed

    def alter_sync_state_set(self, name: str, master: str, master_epoch: int, sss_epoch: int,
                             new_set: set[str]) -> Group:
        """The master shrinks or expands its in-sync set; raises ControllerFencedError on a stale request."""
        group = self.group(name)
        if group.master != master or group.master_epoch != master_epoch:
            raise ControllerFencedError(
                f"broker {name!r}: {master!r} at epoch {master_epoch} is not the master (the master is "
                f"{group.master!r} at epoch {group.master_epoch}); stop writing and follow the controller")
        if group.sync_state_set_epoch != sss_epoch:
            raise ControllerFencedError(
                f"broker {name!r}: in-sync set epoch {sss_epoch} is stale (now {group.sync_state_set_epoch}); "
                "take the current set from the heartbeat answer and retry")
        unknown = new_set - set(group.replicas)
        if master not in new_set or unknown:
            raise ControllerFencedError(f"broker {name!r}: an in-sync set must hold the master and known replicas "
                                        f"only (unknown: {sorted(unknown)})")
        group.sync_state_set = set(new_set)
        group.sync_state_set_epoch += 1
        return group

    # -- elections ---------------------------------------------------------

    def scan(self, now: float) -> list[Election]:
        """Elect for every group whose master stopped heartbeating; the elections that moved a master."""
        done = []
        for group in self.groups.values():
            master = group.replicas.get(group.master or "")
            if master is None or now - master.last_heartbeat <= self.master_timeout_s:
                continue
            if group.failed_election is not None and group._silent_since == master.last_heartbeat \
                    and not self._candidates(group, now):
                continue  # already failed for this silence and nothing changed
            election = self.elect(group.name, now, f"master heartbeat timeout ({self.master_timeout_s:g} s)")
            if election.new_master is not None:
                done.append(election)
        return done

    def elect(self, name: str, now: float, reason: str, preferred: str | None = None) -> Election:
        """Pick a new master from the live in-sync replicas (see the module docstring)."""
        group = self.group(name)
        old = group.replicas.get(group.master or "")
        silent_since = old.last_heartbeat if old is not None else now
        candidates = self._candidates(group, now)
        if preferred is not None:
            candidates = [c for c in candidates if c.replica_id == preferred]
        group._silent_since = silent_since
        if not candidates:
            why = "no live in-sync replica" + ("" if self.allow_unclean_election else
                                               " (allow_unclean_election is false)")
            group.failed_election = Election(_wall_ms(), f"{reason}: {why}", group.master, None,
                                             group.master_epoch, int((now - silent_since) * 1000))
            return group.failed_election
        best = min(candidates, key=lambda r: (-r.epoch, -r.max_offset, r.broker_id))
        old_master = group.master
        self._crown(group, best.replica_id, reason, now, group.master_epoch, silent_since)
        assert group.last_election is not None
        group.last_election.old_master = old_master
        return group.last_election

    def _candidates(self, group: Group, now: float) -> list[Replica]:
        live = [r for r in group.replicas.values()
                if r.replica_id != group.master and now - r.last_heartbeat <= self.master_timeout_s]
        in_sync = [r for r in live if r.replica_id in group.sync_state_set]
        return in_sync or (live if self.allow_unclean_election else [])

    def _crown(self, group: Group, replica_id: str, reason: str, now: float, epoch: int,
               silent_since: float | None = None) -> None:
        group.master = replica_id
        group.master_epoch = epoch + 1
        group.sync_state_set = {replica_id}
        group.sync_state_set_epoch += 1
        since = now if silent_since is None else silent_since
        group.last_election = Election(_wall_ms(), reason, None, replica_id, group.master_epoch,
                                       int((now - since) * 1000))
        group.failed_election = None
        group._silent_since = since

    def _record_epoch(self, group: Group, epoch: int, start: int, now: float) -> bool:
        if group.epochs and group.epochs[-1][0] >= epoch:
            return False
        group.epochs.append((epoch, start))
        if group.last_election is not None and group.last_election.epoch == epoch:
            group.last_election.took_ms = int((now - group._silent_since) * 1000)
        return True

    # -- answers -----------------------------------------------------------

    def group(self, name: str) -> Group:
        group = self.groups.get(name)
        if group is None:
            raise ControllerGroupNotFoundError(f"no broker named {name!r} has registered with this controller; "
                                               "start it with --controller pointing here")
        return group

    def answer(self, name: str, replica_id: str, now: float) -> dict[str, Any]:
        """What a broker needs: its role and id, the master's addresses, the epoch, the in-sync set."""
        group = self.group(name)
        master = group.replicas.get(group.master or "")
        me = group.replicas.get(replica_id)
        role = "master" if replica_id == group.master else "slave"
        return {**self.view(group, now), "role": role,
                "broker_id": 0 if role == "master" else (me.broker_id if me else -1),
                "master_address": master.address if master else None,
                "confirm_offset": master.confirm_offset if master else None,
                "master_ha_address": master.ha_address if master else None}

    def view(self, group: Group, now: float) -> dict[str, Any]:
        """The group as GET /v1/controller/groups shows it."""
        replicas = [{"replica_id": r.replica_id, "broker_id": r.broker_id, "address": r.address,
                     "ha_address": r.ha_address, "ha_client_address": r.ha_client_address,
                     "max_offset": r.max_offset, "epoch": r.epoch, "in_sync": r.replica_id in group.sync_state_set,
                     "master": r.replica_id == group.master, "silent_s": round(now - r.last_heartbeat, 3),
                     "alive": now - r.last_heartbeat <= self.master_timeout_s}
                    for r in sorted(group.replicas.values(), key=lambda r: r.broker_id)]
        return {"cluster": group.cluster, "broker_name": group.name, "master": group.master,
                "master_timeout_s": self.master_timeout_s,
                "master_epoch": group.master_epoch, "sync_state_set": sorted(group.sync_state_set),
                "sync_state_set_epoch": group.sync_state_set_epoch, "epochs": [list(e) for e in group.epochs],
                "replicas": replicas,
                "last_election": asdict(group.last_election) if group.last_election else None,
                "failed_election": asdict(group.failed_election) if group.failed_election else None}

    # -- persistence -------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, g in self.groups.items():
            out[name] = {"cluster": g.cluster, "master": g.master, "master_epoch": g.master_epoch,
                         "sync_state_set": sorted(g.sync_state_set), "sync_state_set_epoch": g.sync_state_set_epoch,
                         "epochs": [list(e) for e in g.epochs], "next_broker_id": g.next_broker_id,
                         "last_election": asdict(g.last_election) if g.last_election else None,
                         "failed_election": asdict(g.failed_election) if g.failed_election else None,
                         "replicas": {r.replica_id: {"broker_id": r.broker_id, "address": r.address,
                                                     "ha_address": r.ha_address, "max_offset": r.max_offset,
                                                     "epoch": r.epoch} for r in g.replicas.values()}}
        return {"version": 1, "groups": out}

    def load(self, data: dict[str, Any], now: float) -> None:
        """Replace the state with a persisted one; every replica counts as heard from ``now``."""
        self.groups = {}
        for name, g in data.get("groups", {}).items():
            group = Group(g["cluster"], name, g["master"], g["master_epoch"], set(g["sync_state_set"]),
                          g["sync_state_set_epoch"], epochs=[(int(e), int(s)) for e, s in g["epochs"]],
                          next_broker_id=g["next_broker_id"], _silent_since=now)
            group.last_election = Election(**g["last_election"]) if g.get("last_election") else None
            group.failed_election = Election(**g["failed_election"]) if g.get("failed_election") else None
            for rid, r in g["replicas"].items():
                group.replicas[rid] = Replica(rid, r["broker_id"], r["address"], r["ha_address"],
                                              max_offset=r["max_offset"], epoch=r["epoch"], last_heartbeat=now)
            self.groups[name] = group


def _wall_ms() -> int:
    return int(time.time() * 1000)
