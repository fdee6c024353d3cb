"""The controller's state machine, driven with an explicit clock (no I/O)."""

from __future__ import annotations

import pytest

from broker_api.cluster.controller_state import ControllerState, Heartbeat
from broker_api.errors import ControllerFencedError, ControllerGroupNotFoundError

T = 3.0  # master timeout


def hb(rid: str, max_offset: int = 0, epoch: int = 0, start: int | None = None) -> Heartbeat:
    return Heartbeat("c1", "bk", rid, f"http://127.0.0.1:80{rid[-1]}", f"127.0.0.1:90{rid[-1]}",
                     max_offset=max_offset, epoch=epoch, epoch_start=start)


def two(state: ControllerState, now: float = 0.0) -> None:
    """r1 master at epoch 1, r2 in sync."""
    state.heartbeat(hb("r1"), now)
    state.heartbeat(hb("r1", 0, 1, 0), now)
    state.heartbeat(hb("r2"), now)
    g = state.group("bk")
    state.alter_sync_state_set("bk", "r1", 1, g.sync_state_set_epoch, {"r1", "r2"})


def test_first_replica_becomes_master_at_epoch_1_and_the_next_is_a_slave_with_its_own_id() -> None:
    s = ControllerState(T)
    assert s.heartbeat(hb("r1"), 0.0)
    assert s.heartbeat(hb("r2"), 0.0)
    a1, a2 = s.answer("bk", "r1", 0.0), s.answer("bk", "r2", 0.0)
    assert (a1["role"], a1["broker_id"], a1["master_epoch"]) == ("master", 0, 1)
    assert (a2["role"], a2["broker_id"], a2["master_address"]) == ("slave", 2, "http://127.0.0.1:801")
    assert a2["sync_state_set"] == ["r1"]
    assert not s.heartbeat(hb("r2", 10), 0.5)  # a plain heartbeat changes nothing persisted


def test_the_master_reports_its_epoch_start_once() -> None:
    s = ControllerState(T)
    s.heartbeat(hb("r1"), 0.0)
    assert s.heartbeat(hb("r1", 0, 1, 0), 0.1)
    assert not s.heartbeat(hb("r1", 50, 1, 0), 0.2)
    assert s.group("bk").epochs == [(1, 0)]


def test_master_timeout_elects_the_in_sync_slave_with_a_new_epoch_and_a_set_of_one() -> None:
    s = ControllerState(T)
    two(s)
    s.heartbeat(hb("r2", 100, 1), 2.0)
    assert s.scan(2.9) == []  # r1 silent 2.9 s < 3 s
    s.heartbeat(hb("r2", 120, 1), 3.0)
    [e] = s.scan(3.1)
    g = s.group("bk")
    assert (g.master, g.master_epoch, g.sync_state_set) == ("r2", 2, {"r2"})
    assert (e.old_master, e.new_master, e.master_silent_ms) == ("r1", "r2", 3100)
    assert s.answer("bk", "r1", 3.1)["role"] == "slave"
    s.heartbeat(hb("r2", 120, 2, 120), 3.5)
    assert g.epochs == [(1, 0), (2, 120)] and g.last_election and g.last_election.took_ms == 3500


def test_an_out_of_sync_replica_is_never_elected_unless_unclean_election_is_allowed() -> None:
    s = ControllerState(T)
    s.heartbeat(hb("r1"), 0.0)
    s.heartbeat(hb("r2", 999, 1), 0.0)  # alive, ahead, but not in the set
    s.heartbeat(hb("r2", 999, 1), 3.0)
    assert s.scan(3.5) == []
    g = s.group("bk")
    assert g.master == "r1" and g.failed_election and g.failed_election.new_master is None
    assert "no live in-sync replica" in g.failed_election.reason
    assert g.last_election is not None and g.last_election.new_master == "r1"  # the last real one is kept
    unclean = ControllerState(T, allow_unclean_election=True)
    unclean.heartbeat(hb("r1"), 0.0)
    unclean.heartbeat(hb("r2", 999, 1), 3.0)
    assert [e.new_master for e in unclean.scan(3.5)] == ["r2"]


def test_a_dead_in_sync_slave_is_not_a_candidate_and_ranking_prefers_epoch_then_offset() -> None:
    s = ControllerState(T)
    two(s)
    s.heartbeat(hb("r3"), 0.0)
    g = s.group("bk")
    s.alter_sync_state_set("bk", "r1", 1, g.sync_state_set_epoch, {"r1", "r2", "r3"})
    s.heartbeat(hb("r2", 500, 1), 3.0)
    s.heartbeat(hb("r3", 400, 1), 3.0)
    assert [e.new_master for e in s.scan(3.5)] == ["r2"]  # more data wins
    s2 = ControllerState(T)
    two(s2)
    s2.heartbeat(hb("r2", 500, 1), 0.5)  # r2 then falls silent too
    assert s2.scan(3.6) == []


def test_alter_is_fenced_by_master_epoch_and_set_epoch() -> None:
    s = ControllerState(T)
    two(s)
    g = s.group("bk")
    with pytest.raises(ControllerFencedError, match="in-sync set epoch"):
        s.alter_sync_state_set("bk", "r1", 1, g.sync_state_set_epoch - 1, {"r1"})
    with pytest.raises(ControllerFencedError, match="not the master"):
        s.alter_sync_state_set("bk", "r2", 1, g.sync_state_set_epoch, {"r2"})
    with pytest.raises(ControllerFencedError, match="must hold the master"):
        s.alter_sync_state_set("bk", "r1", 1, g.sync_state_set_epoch, {"r2"})
    with pytest.raises(ControllerGroupNotFoundError):
        s.group("nope")


def test_persisted_state_survives_a_restart_and_gives_every_replica_a_full_timeout_of_grace() -> None:
    s = ControllerState(T)
    two(s)
    s.heartbeat(hb("r2", 120, 1), 3.0)
    s.scan(3.5)
    data = s.to_dict()
    back = ControllerState(T)
    back.load(data, now=100.0)
    g = back.group("bk")
    assert (g.master, g.master_epoch, g.sync_state_set, g.epochs) == ("r2", 2, {"r2"}, [(1, 0)])
    assert g.replicas["r1"].broker_id == 1 and g.next_broker_id == 3
    assert back.scan(102.0) == []  # nobody is silent yet after the restart
    assert back.to_dict() == data
