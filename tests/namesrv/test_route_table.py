"""The route table and scan service in-process: id moves, cluster moves, concurrent use, no leaked threads."""

from __future__ import annotations

import threading
import time

import pytest

from broker_api.namesrv import RouteTable, ScanService, TopicRouteNotFoundError
from broker_api.errors import BrokerNameOwnedError
from broker_api.namesrv.models import BrokerRef, RegisterBody

from .support import register_body, wait_until


def _reg(table: RouteTable, name: str, topics: dict[str, int], **kw: object) -> None:
    table.register(RegisterBody.model_validate(register_body(name, topics, **kw)))  # type: ignore[arg-type]


def test_an_address_has_one_entry_when_a_slave_becomes_master() -> None:
    table = RouteTable()
    _reg(table, "rt-a", {"t": 2}, port=1)
    _reg(table, "rt-a", {"t": 2}, broker_id=1, port=2)
    _reg(table, "rt-a", {"t": 2}, broker_id=0, port=2)  # the slave at :2 took over as master
    assert table.route("t")["brokers"][0]["addresses"] == {"0": "http://127.0.0.1:2"}
    assert [b["address"] for b in table.cluster()["brokers"]] == ["http://127.0.0.1:2"]


def test_a_broker_name_moving_cluster_leaves_the_old_one() -> None:
    table = RouteTable()
    _reg(table, "rt-b", {"t": 1}, port=3, cluster="old")
    with pytest.raises(BrokerNameOwnedError):  # the name is the old cluster's until it unregisters it
        _reg(table, "rt-b", {"t": 1}, port=3, cluster="new")
    table.unregister(BrokerRef(cluster="old", broker_name="rt-b", broker_id=0, address="http://127.0.0.1:3"))
    _reg(table, "rt-b", {"t": 1}, port=3, cluster="new")
    assert table.cluster()["clusters"] == {"new": ["rt-b"]}


def test_slave_registration_does_not_override_the_masters_topics() -> None:
    table = RouteTable()
    _reg(table, "rt-c", {"t": 4}, port=4)
    _reg(table, "rt-c", {"t": 1, "slave-only": 1}, broker_id=1, port=5)
    assert table.route("t")["queues"][0]["write_queues"] == 4
    with pytest.raises(TopicRouteNotFoundError):
        table.route("slave-only")


def test_a_late_registration_with_an_older_data_version_does_not_roll_the_topics_back() -> None:
    """A broker's registration that timed out on its side may still reach the NameServer after the
    next one (the topic just created): the older body must not replace the newer topics."""
    table = RouteTable()
    _reg(table, "rt-d", {"t": 1, "orders": 2}, port=6, counter=2)
    _reg(table, "rt-d", {"t": 1}, port=6, counter=1)  # sent before "orders" existed, arrived late
    assert table.route("orders")["queues"][0]["write_queues"] == 2
    _reg(table, "rt-d", {"t": 1}, port=6, counter=3)  # a newer body drops it (the topic was deleted)
    with pytest.raises(TopicRouteNotFoundError):
        table.route("orders")


def test_concurrent_registrations_expiry_and_reads_stay_consistent() -> None:
    table = RouteTable()
    stop = threading.Event()
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        i = 0
        while not stop.is_set():
            _reg(table, f"rt-w{n}", {f"t{i % 5}": 2, "shared": 1}, port=100 + n, counter=i)
            i += 1

    def reader() -> None:
        while not stop.is_set():
            try:
                route = table.route("shared")
                assert all(b["addresses"] for b in route["brokers"])
            except TopicRouteNotFoundError:
                pass
            except BaseException as exc:  # surfaced by the assertion below
                errors.append(exc)
            table.expire(0.001)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(3)] + [threading.Thread(target=reader)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    stop.set()
    for t in threads:
        t.join(5)
    assert errors == []
    table.expire(0.0)
    assert table.cluster() == {"clusters": {}, "brokers": []}
    assert table.topics() == {}


def test_scan_service_expires_and_stops_its_thread() -> None:
    table = RouteTable()
    _reg(table, "rt-s", {"t": 1}, port=6)
    scan = ScanService(table, interval_s=0.05, timeout_s=0.2)
    scan.start()
    try:
        wait_until(lambda: table.broker_count() == 0, timeout_s=5)
    finally:
        scan.stop()
        scan.stop()
    assert not [t for t in threading.enumerate() if t.name == "namesrv-scan"]
