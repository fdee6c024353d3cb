"""The broker-side NamesrvRegistrar against real NameServers (and one that is down)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import pytest

from broker_api.cluster.registration import BrokerIdentity, DataVersion, NamesrvRegistrar

from .support import NamesrvProcess, free_port, wait_until


class FakeBrokerTopics:
    """Stands in for a broker's topic table: topics plus the data version bumped on change."""

    def __init__(self, topics: dict[str, int]) -> None:
        self.topics = dict(topics)
        self.version = DataVersion()

    def change(self, topics: dict[str, int]) -> None:
        self.topics = dict(topics)
        self.version.next_version()

    def provide(self) -> dict[str, dict[str, Any]]:
        return {t: {"read_queues": n, "write_queues": n, "perm": "rw"} for t, n in self.topics.items()}


def _registrar(addrs: Any, name: str, port: int, topics: FakeBrokerTopics, **kw: Any) -> NamesrvRegistrar:
    ident = BrokerIdentity("c1", name, 0, f"127.0.0.1:{port}")
    return NamesrvRegistrar(addrs, ident, topics.provide, lambda: topics.version, **kw)


def _live(ns: NamesrvProcess, name: str) -> dict[str, Any] | None:
    found = [b for b in ns.get("/v1/cluster").json()["brokers"] if b["broker_name"] == name]
    return found[0] if found else None


def test_unchanged_data_version_sends_no_body(namesrv: NamesrvProcess) -> None:
    topics = FakeBrokerTopics({"reg-dv-a": 4})
    reg = _registrar(namesrv.url, "reg-dv", 18301, topics)
    assert reg.register_all() == {namesrv.url: True}
    assert reg.register_all() == {namesrv.url: False}  # needRegister said no: heartbeat only
    live = _live(namesrv, "reg-dv")
    assert live is not None and live["registrations"] == 1 and live["version_checks"] == 1

    topics.change({"reg-dv-b": 2})  # topic a deleted, b created
    assert reg.register_all() == {namesrv.url: True}
    assert namesrv.get("/v1/routes/reg-dv-a").status_code == 404
    assert namesrv.get("/v1/routes/reg-dv-b").json()["queues"][0]["write_queues"] == 2
    [state] = reg.status()
    assert (state["full_registrations"], state["skipped_registrations"], state["up"]) == (2, 1, True)


def test_register_now_pushes_a_topic_change_at_once(namesrv: NamesrvProcess) -> None:
    topics = FakeBrokerTopics({"reg-now-a": 1})
    reg = _registrar(namesrv.url, "reg-now", 18302, topics, interval_s=60.0)
    reg.start()
    try:
        wait_until(lambda: namesrv.get("/v1/routes/reg-now-a").status_code == 200)
        topics.change({"reg-now-a": 1, "reg-now-b": 3})
        reg.register_now()  # the next periodic round is a minute away
        wait_until(lambda: namesrv.get("/v1/routes/reg-now-b").status_code == 200)
    finally:
        reg.stop()


def test_all_namesrvs_get_it_and_a_dead_one_blocks_nothing(
    namesrv: NamesrvProcess, namesrv_factory: Callable[..., NamesrvProcess], caplog: pytest.LogCaptureFixture
) -> None:
    second = namesrv_factory()
    dead_port = free_port()
    dead = f"127.0.0.1:{dead_port}"
    topics = FakeBrokerTopics({"reg-multi-t": 2})
    reg = _registrar(f"{namesrv.url};{second.url.removeprefix('http://')};{dead}", "reg-multi", 18303, topics)
    caplog.set_level(logging.WARNING, logger="sparkmq.registration")

    results = [reg.register_all() for _ in range(3)]
    assert results[0] == {namesrv.url: True, second.url: True, f"http://{dead}": None}
    assert results[2][f"http://{dead}"] is None
    for ns in (namesrv, second):
        assert ns.get("/v1/routes/reg-multi-t").status_code == 200
    outage_logs = [r for r in caplog.records if dead in r.getMessage()]
    assert len(outage_logs) == 1, "a NameServer outage is logged once, not every round"

    revived = namesrv_factory(port=dead_port)  # the dead NameServer comes back
    assert reg.register_all()[revived.url] is True
    assert revived.get("/v1/routes/reg-multi-t").status_code == 200
    assert any("reachable again" in r.getMessage() for r in caplog.records)


def test_stop_unregisters_and_leaves_no_threads(namesrv: NamesrvProcess) -> None:
    before = set(threading.enumerate())
    topics = FakeBrokerTopics({"reg-stop-t": 1})
    reg = _registrar([namesrv.url, f"127.0.0.1:{free_port()}"], "reg-stop", 18304, topics, interval_s=0.1)
    reg.start()
    wait_until(lambda: reg.rounds >= 3)
    assert namesrv.get("/v1/routes/reg-stop-t").status_code == 200
    reg.stop()
    reg.stop()  # twice is safe
    assert namesrv.get("/v1/routes/reg-stop-t").status_code == 404
    assert _live(namesrv, "reg-stop") is None
    leaked = [t.name for t in set(threading.enumerate()) - before if t.is_alive()]
    assert leaked == []


def test_start_with_every_namesrv_down_returns_and_keeps_trying() -> None:
    topics = FakeBrokerTopics({"t": 1})
    reg = _registrar(f"127.0.0.1:{free_port()};127.0.0.1:{free_port()}", "reg-down", 18305, topics, interval_s=0.1)
    reg.start()  # never blocks broker start
    try:
        wait_until(lambda: reg.rounds >= 2)
        assert all(s["up"] is False and "Connect" in s["last_error"] for s in reg.status())
    finally:
        reg.stop()


def test_a_namesrv_that_comes_up_late_is_registered_with_in_seconds(tmp_path: Any) -> None:
    """Broker and NameServer started together: the broker retries quickly, not once per interval."""
    topics = FakeBrokerTopics({"late": 2})
    port = free_port()
    reg = _registrar(f"127.0.0.1:{port}", "reg-late", 18306, topics, interval_s=60.0)
    reg.start()
    ns = NamesrvProcess(port, tmp_path / "namesrv.log")
    try:
        wait_until(lambda: reg.rounds >= 1)  # the first round found the NameServer down
        assert reg.status()[0]["up"] is False
        ns.start()
        wait_until(lambda: _live(ns, "reg-late") is not None, timeout_s=20.0)  # far less than the 60 s interval
        assert ns.get("/v1/routes/late").status_code == 200
    finally:
        reg.stop()
        ns.stop()
