"""Controller mode fencing, attacked from outside: too few in-sync replicas, a lost controller (ASYNC)."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from typing import Any

import httpx

from tests.namesrv.support import NamesrvProcess

from .ha_support import wait_for
from .test_controller_failover import controller, group, send, send_or_why, start_group  # noqa: F401 - fixture

Body = dict[str, Any]


def _produce(url: str) -> httpx.Response:
    return httpx.post(f"{url}/v1/topics/t/messages", json={"messages": [{"body": "x"}]}, timeout=10)


def test_min_in_sync_replicas_refuses_writes_once_the_slave_is_gone(
        broker_factory: Callable[..., Any], controller: NamesrvProcess) -> None:  # noqa: F811
    master, slave = start_group(broker_factory, controller, "sync_master", SPARKMQ_HA__MIN_IN_SYNC_REPLICAS="2")
    assert send(master.url, ["a"]) == "SEND_OK"
    slave.kill()
    wait_for(lambda: len(group(controller)["sync_state_set"]) == 1, 30, "the master to drop its dead slave")
    r = wait_for(lambda: (r := _produce(master.url)).status_code == 503 and r, 10, "writes to be refused")
    assert r.json()["error"] == "master_fenced" and "min_in_sync_replicas" in r.json()["message"]
    slave.start()
    wait_for(lambda: len(group(controller)["sync_state_set"]) == 2, 30, "the slave to rejoin")
    assert wait_for(lambda: send(master.url, ["b"]) == "SEND_OK", 10, "SEND_OK again")


def test_an_async_master_that_loses_its_controller_stops_taking_writes_and_resumes_when_it_returns(
        broker_factory: Callable[..., Any], controller: NamesrvProcess) -> None:  # noqa: F811
    master, _slave = start_group(broker_factory, controller, "async_master")
    assert send_or_why(master.url, ["a"]) == "SEND_OK"
    assert controller.proc is not None
    controller.proc.kill()
    controller.proc.wait(10)
    try:
        r = wait_for(lambda: (r := _produce(master.url)).status_code == 503 and r, 10, "the lease to run out")
        assert r.json()["error"] == "master_fenced" and "controller" in r.json()["message"]
    finally:
        controller.start()
    assert wait_for(lambda: send(master.url, ["b"]) == "SEND_OK", 30, "writes after the controller is back")
    assert group(controller)["master_epoch"] == 1  # no election happened


def test_a_paused_master_that_was_replaced_refuses_writes_at_once_and_becomes_a_slave_in_place(
        broker_factory: Callable[..., Any], controller: NamesrvProcess) -> None:  # noqa: F811
    master, slave = start_group(broker_factory, controller, "async_master")
    assert send_or_why(master.url, ["before"]) == "SEND_OK"
    assert master.proc is not None
    pid = master.proc.pid
    os.kill(pid, signal.SIGSTOP)  # a long GC pause, as far as the controller can tell
    try:
        wait_for(lambda: group(controller)["master_epoch"] == 2, 20, "the slave's election")
    finally:
        os.kill(pid, signal.SIGCONT)
    r = _produce(master.url)  # the first request after the pause
    assert r.status_code in (403, 503), r.text
    wait_for(lambda: httpx.get(master.url + "/v1/broker", timeout=5).json()["ha"]["role"] == "slave", 20,
             "the old master to follow the new one")
    assert _produce(master.url).status_code == 403
    status = wait_for(lambda: send(slave.url, ["after"]), 15, "the new master to take writes", 0.1)
    assert status in ("SEND_OK", "SLAVE_NOT_AVAILABLE")
    wait_for(lambda: len(group(controller)["sync_state_set"]) == 2, 30, "the old master to rejoin the set")
