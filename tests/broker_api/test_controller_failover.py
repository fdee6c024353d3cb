"""Controller mode with real processes and SIGKILL: election, no acknowledged loss, the old master's cut."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.namesrv.support import NamesrvProcess, free_port

from .conftest import FAST_ENV
from .ha_support import dump, wait_for

MASTER_TIMEOUT_S = 2.0


@pytest.fixture
def controller(tmp_path: Path) -> Iterator[NamesrvProcess]:
    env = {"SPARKMQ_NAMESRV_CONTROLLER_ENABLED": "true",
           "SPARKMQ_NAMESRV_CONTROLLER_MASTER_TIMEOUT_S": str(MASTER_TIMEOUT_S),
           "SPARKMQ_NAMESRV_CONTROLLER_SCAN_INTERVAL_S": "0.2",
           "SPARKMQ_NAMESRV_CONTROLLER_STATE_FILE": str(tmp_path / "controller" / "state.json")}
    ns = NamesrvProcess(free_port(), tmp_path / "namesrv.log", env).start()
    yield ns
    ns.stop()


def group_env(ns: NamesrvProcess, role: str, **extra: str) -> dict[str, str]:
    return {**FAST_ENV, "SPARKMQ_HA__CONTROLLER": f"127.0.0.1:{ns.port}", "SPARKMQ_BROKER__NAME": "bk",
            "SPARKMQ_BROKER__NAMESRV_ADDR": f"127.0.0.1:{ns.port}", "SPARKMQ_HA__ROLE": role,
            "SPARKMQ_HA__SLAVE_TIMEOUT_MS": "3000", "SPARKMQ_HA__HEARTBEAT_INTERVAL_S": "1",
            "SPARKMQ_HA__RECONNECT_MAX_S": "0.5", "SPARKMQ_HA__METADATA_SYNC_INTERVAL_S": "1",
            "SPARKMQ_BROKER__LOG_LEVEL": "info",
            # heartbeats well inside an async master's lease (the master timeout minus one heartbeat), so
            # one late heartbeat on a loaded machine does not fence the master between a test's sends
            "SPARKMQ_HA__CONTROLLER_HEARTBEAT_INTERVAL_S": "0.3", **extra}


def group(ns: NamesrvProcess) -> dict[str, Any]:
    return dict(ns.get("/v1/controller/groups/bk").json())


def master_of(ns: NamesrvProcess) -> str | None:
    g = group(ns)
    return next((r["address"] for r in g["replicas"] if r["master"]), None)


def start_group(broker_factory: Callable[..., Any], ns: NamesrvProcess, role: str,
                **extra: str) -> tuple[Any, Any]:
    first = broker_factory(env=group_env(ns, role, **extra))
    second = broker_factory(env=group_env(ns, role, **extra))
    wait_for(lambda: len(group(ns)["sync_state_set"]) == 2, 30, "the slave to join the in-sync set")
    assert master_of(ns) == first.url
    r = httpx.post(first.url + "/v1/topics", json={"name": "t", "queues": 4}, timeout=10)
    assert r.status_code in (200, 201), r.text
    wait_for(lambda: httpx.get(second.url + "/v1/topics/t/queues", timeout=5).status_code == 200, 20,
             "the slave to learn the topic")
    return first, second


def send(url: str, bodies: list[str], timeout_s: float = 5) -> str | None:
    """The SendStatus, or None when the broker refused or did not answer."""
    try:
        r = httpx.post(f"{url}/v1/topics/t/messages", timeout=timeout_s,
                       json={"messages": [{"body": b, "queue_id": i % 4} for i, b in enumerate(bodies)]})
    except httpx.HTTPError:
        return None
    return str(r.json()["status"]) if r.status_code == 200 else None


def send_or_why(url: str, bodies: list[str]) -> str:
    """The SendStatus, or the broker's refusal or the client's error, for an assertion to show.

    A 503 ``master_fenced`` stores nothing: an async master whose heartbeat ran late on a loaded
    machine refuses writes until its next heartbeat answer, so the send is retried for a while.
    """
    deadline = time.monotonic() + 20
    while True:
        try:
            r = httpx.post(f"{url}/v1/topics/t/messages", timeout=60,
                           json={"messages": [{"body": b, "queue_id": i % 4} for i, b in enumerate(bodies)]})
        except httpx.HTTPError as exc:
            return f"{type(exc).__name__}: {exc}"
        if r.status_code == 200:
            return str(r.json()["status"])
        if r.status_code != 503 or "master_fenced" not in r.text or time.monotonic() > deadline:
            return f"{r.status_code}: {r.text[:300]}"
        time.sleep(0.1)


def bodies_on(url: str) -> set[str]:
    return {body for _, body in dump(url, "t").values()}


def test_master_killed_under_sync_writes_the_slave_takes_over_and_every_send_ok_is_there(
        broker_factory: Callable[..., Any], controller: NamesrvProcess) -> None:
    master, slave = start_group(broker_factory, controller, "sync_master")
    acked: list[str] = []
    stop = threading.Event()

    def writer() -> None:
        n = 0
        while not stop.is_set() and n < 100_000:
            batch = [f"m{n + i}" for i in range(20)]
            n += 20
            if send(master.url, batch) == "SEND_OK":
                acked.extend(batch)

    t = threading.Thread(target=writer)
    t.start()
    wait_for(lambda: len(acked) >= 200, 30, "200 SEND_OK messages")
    killed_at = time.monotonic()
    master.kill()
    stop.set()
    t.join(10)
    status = wait_for(lambda: send(slave.url, ["after"]), MASTER_TIMEOUT_S + 8, "a send to the new master", 0.1)
    took = time.monotonic() - killed_at
    assert status in ("SEND_OK", "SLAVE_NOT_AVAILABLE")  # alone in its in-sync set: the master only
    assert took < MASTER_TIMEOUT_S + 4, took
    g = group(controller)
    assert g["master_epoch"] == 2 and master_of(controller) == slave.url
    assert g["last_election"]["reason"].startswith("master heartbeat timeout")
    # the new master registers as brokerId 0 on its next registration (asynchronous, like every registration)
    wait_for(lambda: controller.get("/v1/routes/t").json()["brokers"][0]["addresses"].get("0") == slave.url, 15,
             "the route to name the new master as brokerId 0")
    on_new = bodies_on(slave.url)
    missing = [b for b in acked if b not in on_new]
    assert not missing, f"{len(missing)} SEND_OK messages lost, e.g. {missing[:5]}"
    # the old master comes back as a slave and ends up identical
    master.start()
    wait_for(lambda: len(group(controller)["sync_state_set"]) == 2, 30, "the old master to rejoin in sync")
    assert master_of(controller) == slave.url
    wait_for(lambda: dump(master.url, "t") == dump(slave.url, "t"), 30, "the old master to match the new one")
    r = httpx.post(f"{master.url}/v1/topics/t/messages", json={"messages": [{"body": "x"}]}, timeout=5)
    assert r.status_code == 403  # a slave now


def test_old_async_master_rejoins_and_cuts_only_its_unreplicated_tail(
        broker_factory: Callable[..., Any], controller: NamesrvProcess) -> None:
    master, slave = start_group(broker_factory, controller, "async_master",
                                SPARKMQ_HA__MAX_TIME_SLAVE_NOT_CATCHUP_S="30")
    assert send_or_why(master.url, [f"early{i}" for i in range(100)]) == "SEND_OK"
    wait_for(lambda: len(bodies_on(slave.url)) == 100, 20, "the slave to hold the early messages")
    assert slave.proc is not None and master.proc is not None
    os.kill(slave.proc.pid, signal.SIGSTOP)  # the slave stops reading: what follows is not replicated
    try:
        big = "x" * 4000
        for k in range(8):  # 8 x 500 x 4 KB = 16 MB, more than any socket buffer between them
            assert send_or_why(master.url, [f"late{k}-{i}-{big}" for i in range(500)]) == "SEND_OK"
        master_end = httpx.get(master.url + "/v1/broker", timeout=5).json()["ha"]["max_offset"]
        master.kill()
    finally:
        os.kill(slave.proc.pid, signal.SIGCONT)
    wait_for(lambda: master_of(controller) == slave.url, MASTER_TIMEOUT_S + 10, "the slave's election")
    new_end = wait_for(lambda: group(controller)["epochs"][-1][0] == 2 and group(controller)["epochs"][-1][1],
                       10, "the new master's epoch")
    assert new_end < master_end  # the old master held a tail the new one never got
    early = {f"early{i}" for i in range(100)}
    assert early <= bodies_on(slave.url)
    # the controller has elected it; the broker takes the master role at its next heartbeat answer
    status = wait_for(lambda: send(slave.url, ["new-epoch"]), 15, "the new master to take writes", 0.1)
    assert status in ("SEND_OK", "SLAVE_NOT_AVAILABLE")
    master.start()
    assert "cut at offset" in master.log_tail(20000) or "CommitLog cut" in master.log_tail(20000)
    wait_for(lambda: dump(master.url, "t") == dump(slave.url, "t"), 30, "the old master to match the new one")
    on_old = bodies_on(master.url)
    assert early <= on_old and "new-epoch" in on_old
    # its epoch file learns epoch 2 from the new master's HA stream, which may come after the bytes it copies
    wait_for(lambda: httpx.get(master.url + "/v1/broker", timeout=5).json()["ha"]["controller"]["epochs"][-1][0] == 2,
             15, "the old master to record the new epoch")


def test_a_controller_restart_under_sync_writes_fails_no_send_and_changes_no_role(
        broker_factory: Callable[..., Any], controller: NamesrvProcess) -> None:
    master, slave = start_group(broker_factory, controller, "sync_master")
    before = group(controller)
    statuses: list[str | None] = []
    stop = threading.Event()

    def writer() -> None:
        n = 0
        while not stop.is_set() and n < 100_000:
            statuses.append(send(master.url, [f"w{n}"]))
            n += 1

    t = threading.Thread(target=writer)
    t.start()
    try:
        wait_for(lambda: len(statuses) >= 20, 30, "writes before the restart")
        assert controller.proc is not None
        controller.proc.kill()  # SIGKILL: the state file is all that is left
        controller.proc.wait(10)
        controller.start()
        wait_for(lambda: group(controller)["replicas"][0]["silent_s"] < 1.5, 20, "heartbeats to come back")
        time.sleep(MASTER_TIMEOUT_S + 1)  # long enough for a wrong election to happen
        n_after = len(statuses)
        wait_for(lambda: len(statuses) >= n_after + 20, 30, "writes after the restart")
    finally:
        stop.set()
        t.join(10)
    after = group(controller)
    keys = ("master", "master_epoch", "sync_state_set", "epochs")
    assert {k: after[k] for k in keys} == {k: before[k] for k in keys}
    assert set(statuses) == {"SEND_OK"}, {s: statuses.count(s) for s in set(statuses)}
