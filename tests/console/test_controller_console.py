"""The NameServer's console shows the controller's broker groups: master, epoch, in-sync set, last election."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.broker_api.ha_support import wait_for
from tests.broker_api.test_controller_failover import controller, group, master_of, start_group  # noqa: F401
from tests.namesrv.support import NamesrvProcess

from .conftest import open_view, shot


def test_the_cluster_view_shows_each_group_and_its_last_election(
        page: Any, broker_factory: Callable[..., Any], controller: NamesrvProcess,  # noqa: F811
        tmp_path: Path) -> None:
    first, second = start_group(broker_factory, controller, "sync_master")
    text = open_view(page, controller.url + "/console", "cluster")
    assert "Controller: broker groups" in text
    row = page.locator("#view tbody tr", has_text="bk").last.inner_text()
    assert row.split("\t")[2] == first.url and "first replica of the group" in row

    first.kill()
    wait_for(lambda: master_of(controller) == second.url, 30, "the slave to be elected")
    wait_for(lambda: group(controller)["last_election"]["took_ms"] is not None, 30, "the new master's first heartbeat")
    election = group(controller)["last_election"]
    page.click("#refresh")
    text = open_view(page, controller.url + "/console", "cluster")
    row = page.locator("#view tbody tr", has_text=election["reason"]).inner_text()
    cells = row.split("\t")
    assert cells[2] == second.url and cells[3] == str(group(controller)["master_epoch"]) == "2"
    assert cells[4] == second.url  # the dead master left the in-sync set
    assert f"{first.url} → {second.url}" in cells[5] and " s" in cells[5]  # who replaced whom, how long it took
    shot(page, tmp_path / "namesrv-controller.png")


def test_a_namesrv_without_the_controller_shows_no_controller_section(page: Any, tmp_path: Path) -> None:
    from tests.namesrv.support import free_port

    ns = NamesrvProcess(free_port(), tmp_path / "namesrv.log").start()
    try:
        text = open_view(page, ns.url + "/console", "cluster")
        assert "Live brokers" in text and "Controller" not in text and "404" not in text
    finally:
        ns.stop()
