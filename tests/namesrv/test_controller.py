"""The controller embedded in a real NameServer process: heartbeats, election, routes, restart."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .support import REPO_ROOT, NamesrvProcess, free_port, register_body, wait_until


def _namesrv(tmp_path: Path, port: int | None = None, enabled: bool = True) -> NamesrvProcess:
    env = {"SPARKMQ_NAMESRV_CONTROLLER_ENABLED": str(enabled).lower(),
           "SPARKMQ_NAMESRV_CONTROLLER_MASTER_TIMEOUT_S": "1.0",
           "SPARKMQ_NAMESRV_CONTROLLER_SCAN_INTERVAL_S": "0.1",
           "SPARKMQ_NAMESRV_CONTROLLER_STATE_FILE": str(tmp_path / "ctl" / "state.json")}
    return NamesrvProcess(port or free_port(), tmp_path / "namesrv.log", env).start()


def _hb(ns: NamesrvProcess, rid: str, port: int, **extra: Any) -> dict[str, Any]:
    body = {"cluster": "c1", "broker_name": "bk", "replica_id": rid, "address": f"http://127.0.0.1:{port}",
            "ha_address": f"127.0.0.1:{port + 1}", **extra}
    r = ns.post("/v1/controller/heartbeat", body)
    assert r.status_code == 200, r.text
    return dict(r.json())


def test_a_silent_master_is_replaced_by_its_in_sync_slave_and_the_route_follows_at_once(tmp_path: Path) -> None:
    ns = _namesrv(tmp_path)
    try:
        assert _hb(ns, "r1", 18081)["role"] == "master"
        _hb(ns, "r1", 18081, epoch=1, epoch_start=0)
        slave = _hb(ns, "r2", 18083)
        assert slave["role"] == "slave" and slave["master_ha_address"] == "127.0.0.1:18082"
        ns.post("/v1/brokers/register", register_body("bk", {"t": 4}, 0, 18081))
        ns.post("/v1/brokers/register", register_body("bk", {"t": 4}, slave["broker_id"], 18083))
        r = ns.post("/v1/controller/alter-sync-state-set", {"broker_name": "bk", "master": "r1", "master_epoch": 1,
                                                             "sync_state_set_epoch": slave["sync_state_set_epoch"],
                                                             "sync_state_set": ["r1", "r2"]})
        assert r.status_code == 200 and r.json()["sync_state_set"] == ["r1", "r2"]
        stale = ns.post("/v1/controller/alter-sync-state-set", {"broker_name": "bk", "master": "r1",
                                                                 "master_epoch": 1, "sync_state_set_epoch": 0,
                                                                 "sync_state_set": ["r1"]})
        assert stale.status_code == 409 and stale.json()["error"] == "controller_fenced"
        t0 = time.monotonic()
        # r1 falls silent; r2 keeps heartbeating
        answer = wait_until(lambda: (a := _hb(ns, "r2", 18083, max_offset=10, epoch=1))["role"] == "master" and a,
                            timeout_s=5, step_s=0.2)
        assert answer["master_epoch"] == 2 and answer["sync_state_set"] == ["r2"]
        assert time.monotonic() - t0 < 3.0
        assert ns.get("/v1/routes/t").json()["brokers"][0]["addresses"]["0"] == "http://127.0.0.1:18083"
        group = ns.get("/v1/controller/groups/bk").json()
        assert group["last_election"]["old_master"] == "r1" and "timeout" in group["last_election"]["reason"]
        assert _hb(ns, "r1", 18081, epoch=1)["role"] == "slave"  # the old master comes back: a slave
        out = subprocess.run([sys.executable, "-m", "broker_api", "cluster", "--namesrv", f"127.0.0.1:{ns.port}"],
                             capture_output=True, text=True, timeout=60, cwd=REPO_ROOT).stdout
        row = next(line for line in out.splitlines() if "r1 -> r2" in line)
        assert "http://127.0.0.1:18083" in row and " 2 " in row and "master heartbeat timeout" in row
    finally:
        ns.stop()


def test_a_controller_restart_loses_no_state(tmp_path: Path) -> None:
    port = free_port()
    ns = _namesrv(tmp_path, port)
    try:
        _hb(ns, "r1", 18081)
        _hb(ns, "r1", 18081, epoch=1, epoch_start=0)
        r2 = _hb(ns, "r2", 18083)
        ns.post("/v1/controller/alter-sync-state-set", {"broker_name": "bk", "master": "r1", "master_epoch": 1,
                                                         "sync_state_set_epoch": r2["sync_state_set_epoch"],
                                                         "sync_state_set": ["r1", "r2"]})
        before = ns.get("/v1/controller/groups/bk").json()
    finally:
        assert ns.proc is not None
        ns.proc.kill()  # SIGKILL: only what was written before the answers counts
        ns.proc.wait(10)
    ns = _namesrv(tmp_path, port)
    try:
        after = ns.get("/v1/controller/groups/bk").json()
        keys = ("master", "master_epoch", "sync_state_set", "sync_state_set_epoch", "epochs")
        assert {k: after[k] for k in keys} == {k: before[k] for k in keys}
        assert _hb(ns, "r2", 18083)["broker_id"] == r2["broker_id"]  # same id after the restart
    finally:
        ns.stop()


def test_controller_routes_answer_404_when_the_controller_is_off(tmp_path: Path) -> None:
    ns = _namesrv(tmp_path, enabled=False)
    try:
        r = ns.get("/v1/controller/groups")
        assert r.status_code == 404 and r.json()["error"] == "controller_disabled"
    finally:
        ns.stop()
