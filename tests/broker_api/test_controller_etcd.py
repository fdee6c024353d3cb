"""The controller's state in a three-member etcd: losing etcd's leader under load, elections still happen."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from etcd3gw.client import Etcd3Client

from tests.namesrv.support import NamesrvProcess, free_port

from .etcd_support import EtcdCluster
from .ha_support import wait_for
from .test_controller_failover import (
    MASTER_TIMEOUT_S,
    bodies_on,
    group,
    master_of,
    send,
    start_group,
)


@pytest.fixture
def etcd(tmp_path: Path) -> Iterator[EtcdCluster]:
    cluster = EtcdCluster(tmp_path).start()
    yield cluster
    cluster.stop()


def controller_on(etcd: EtcdCluster, tmp_path: Path, name: str) -> NamesrvProcess:
    env = {"SPARKMQ_NAMESRV_CONTROLLER_ENABLED": "true",
           "SPARKMQ_NAMESRV_CONTROLLER_MASTER_TIMEOUT_S": str(MASTER_TIMEOUT_S),
           "SPARKMQ_NAMESRV_CONTROLLER_SCAN_INTERVAL_S": "0.2",
           "SPARKMQ_NAMESRV_CONTROLLER_ETCD_ENDPOINTS": etcd.endpoints}
    return NamesrvProcess(free_port(), tmp_path / f"{name}.log", env).start()


def stored(etcd: EtcdCluster, member: int) -> dict[str, Any]:
    """The controller state as etcd holds it, read from one member."""
    client = Etcd3Client("127.0.0.1", etcd.clients[member], timeout=2)
    return dict(json.loads(client.get("/sparkmq/controller/state")[0])["groups"]["bk"])


def test_a_controller_of_three_etcd_members_loses_the_leader_under_load_and_still_elects(
        broker_factory: Callable[..., Any], etcd: EtcdCluster, tmp_path: Path) -> None:
    ns = controller_on(etcd, tmp_path, "namesrv")
    try:
        master, slave = start_group(broker_factory, ns, "sync_master")
        acked: list[str] = []
        failed: list[str] = []
        stop = threading.Event()

        def writer() -> None:
            n = 0
            while not stop.is_set() and n < 1_000_000:
                bodies = [f"w{n + i}" for i in range(10)]
                n += 10
                status = send(master.url, bodies)
                (acked if status == "SEND_OK" else failed).extend(bodies)

        t = threading.Thread(target=writer)
        t.start()
        try:
            wait_for(lambda: len(acked) >= 200, 30, "SEND_OK writes before the etcd leader dies")
            lost_member = etcd.wait_leader(10)
            etcd.kill(lost_member)
            survivor = etcd.wait_leader(10)
            assert survivor != lost_member
            n = len(acked)
            wait_for(lambda: len(acked) >= n + 200, 30, "writes after the etcd leader died")
            assert not failed, f"{len(failed)} sends failed while etcd changed leader"
            master.kill()
        finally:
            stop.set()
            t.join(15)
        killed_at = time.monotonic()
        wait_for(lambda: master_of(ns) == slave.url, MASTER_TIMEOUT_S + 10, "an election with one etcd member down")
        wait_for(lambda: send(slave.url, ["after"]), 10, "a write to the new master")
        assert time.monotonic() - killed_at < MASTER_TIMEOUT_S + 8
        g = group(ns)
        kept = stored(etcd, survivor)
        assert kept["master"] == g["master"] and kept["master_epoch"] == g["master_epoch"] == 2
        on_new = bodies_on(slave.url)
        assert not [b for b in acked if b not in on_new]
    finally:
        ns.stop()


def test_a_standby_controller_takes_over_when_the_leading_one_dies(
        broker_factory: Callable[..., Any], etcd: EtcdCluster, tmp_path: Path) -> None:
    first = controller_on(etcd, tmp_path, "ns1")
    second = controller_on(etcd, tmp_path, "ns2")
    try:
        assert first.get("/v1/controller/groups").status_code == 200
        standby = second.get("/v1/controller/groups")
        assert standby.status_code == 503 and standby.json()["error"] == "controller_unavailable"
        both = f"127.0.0.1:{first.port},127.0.0.1:{second.port}"
        master, slave = start_group(broker_factory, first, "sync_master", SPARKMQ_HA__CONTROLLER=both)
        assert first.proc is not None
        first.proc.kill()
        first.proc.wait(10)
        wait_for(lambda: second.get("/v1/controller/groups/bk").status_code == 200, 15, "the standby to lead")
        assert master_of(second) == master.url  # it read the state the first one stored
        master.kill()
        wait_for(lambda: master_of(second) == slave.url, MASTER_TIMEOUT_S + 10, "an election by the new leader")
        assert group(second)["master_epoch"] == 2
    finally:
        first.stop()
        second.stop()
