"""Failure handling without a SparkSession: back-off, master/slave order, down brokers.

Real HTTP against real broker processes where a broker is involved; clocks
are passed in, never patched.
"""

from __future__ import annotations

import socket
from typing import Any

import httpx
import numpy as np
import pyarrow as pa
import pytest

import streaming
from streaming.brokers import SingleBroker
from streaming.client import BrokerClient
from streaming.errors import BrokerUnavailableError, OptionError
from streaming.health import BrokerHealth
from streaming.namesrv import BrokerRoute, parse_route
from streaming.offsets import QueueRange, plan_end, plan_ranges
from streaming.options import ClientConfig, parse_reader, parse_writer
from streaming.outages import BrokerOutages
from streaming.routing import free_rows, place

from .support import NO_MIRROR, create_topic, produce, wait_visible


class Clock:
    """A hand-moved clock (seconds)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def test_backoff_prefers_the_master_falls_back_and_switches_back() -> None:
    clock = Clock()
    health = BrokerHealth(base_s=1.0, cap_s=4.0, clock=clock, wall=clock)
    master, slave = "http://m:1", "http://s:1"
    assert health.order([master, slave]) == [master, slave]
    health.failed(master, "refused")
    assert health.order([master, slave]) == [slave, master]  # the slave while the master waits
    clock.now += 1.0
    assert health.order([master, slave]) == [master, slave]  # back-off over: master first again
    health.failed(master, "refused")  # still down: the back-off doubles
    assert health.retry_in(master) == pytest.approx(2.0)
    health.failed(master, "refused")
    health.failed(master, "refused")
    assert health.retry_in(master) == pytest.approx(4.0)  # capped
    assert health.failure(master) is not None and health.failure(master).failures == 4
    assert health.all_backing_off([master]) and not health.all_backing_off([master, slave])
    health.succeeded(master)
    assert health.order([master, slave]) == [master, slave] and health.failure(master) is None


def test_route_keeps_slaves_after_the_master_and_only_a_master_takes_writes() -> None:
    body = {"brokers": [
        {"broker_name": "a", "addresses": {"1": "http://s1:8", "0": "http://m:8/", "2": "http://s2:8"}},
        {"broker_name": "b", "addresses": {"1": "http://bs:8"}},
    ], "queues": [{"broker_name": "a", "read_queues": 4, "write_queues": 4, "perm": "rw"},
                  {"broker_name": "b", "read_queues": 4, "write_queues": 4, "perm": "rw"}]}
    routes = parse_route(body)
    assert routes["a"].addresses == ("http://m:8", "http://s1:8", "http://s2:8")
    assert routes["a"].writable and routes["a"].address == "http://m:8"
    assert routes["b"].addresses == ("http://bs:8",) and not routes["b"].writable
    assert routes["b"].read_queues == 4  # readable from its slave while the master is gone


def test_endpoint_list_reads_from_the_next_address_when_the_first_does_not_answer(
    broker_factory: Any,
) -> None:
    live = broker_factory(env=NO_MIRROR)
    create_topic(live.url, "ha", queues=1)
    produce(live.url, "ha", 3, queues=1)
    wait_visible(live.url, "ha", 3)
    dead = _dead_url()
    health = BrokerHealth()
    with BrokerClient(ClientConfig((dead, live.url)), health=health) as client:
        assert client.queues("ha") == {0: QueueRange(0, 3)}
        assert health.order([dead, live.url]) == [live.url, dead]  # the dead master backs off
        page = client.pull_arrow("ha", 0, 0, 10, None)
        assert page.table.num_rows == 3
        with pytest.raises(BrokerUnavailableError, match="writes go to the master only"):
            client.produce("ha", [{"body": "x"}])  # never written to the second address
    assert sum(int(r["max_offset"]) for r in httpx.get(f"{live.url}/v1/topics/ha/queues").json()) == 3


def test_a_down_endpoint_broker_is_waited_for_then_fails_naming_it() -> None:
    dead = _dead_url()
    view = SingleBroker(ClientConfig((dead,), timeout_s=2.0))
    begin = {("t", 0): 5, ("t", 1): 7}
    try:
        with pytest.raises(BrokerUnavailableError) as first:
            view.queues("t")
        clock = Clock()
        outages = BrokerOutages(timeout_ms=10_000, fail_on_data_loss=True, clock=clock)
        view.unavailable[""] = first.value
        assert outages.update(begin, {}, view) == {""}
        clock.now += 9.0
        outages.update(begin, {}, view)  # still within the timeout: a warning only
        clock.now += 2.0
        with pytest.raises(BrokerUnavailableError, match=f"at {dead}.*down for 11.0 s.*t \\[0, 1\\]"
                           ".*brokerDownTimeoutMs=10000"):
            outages.update(begin, {}, view)
        at_once = BrokerOutages(timeout_ms=0, fail_on_data_loss=True, clock=clock)
        with pytest.raises(BrokerUnavailableError, match="down for 0.0 s"):
            at_once.update(begin, {}, view)
        lenient = BrokerOutages(timeout_ms=0, fail_on_data_loss=False, clock=clock)
        assert lenient.update(begin, {}, view) == {""}
        view.new_round()  # it answers again: no longer down
        assert outages.update(begin, {("t", 0): QueueRange(0, 9)}, view) == set()
        assert outages.down == {}
    finally:
        view.close()


def test_a_down_brokers_queues_keep_their_offsets_and_data_loss_goes_back_to_max() -> None:
    begin = {("t", "a", 0): 5, ("t", "b", 0): 3}
    end = plan_end(begin, {("t", "a", 0): QueueRange(0, 9)})
    assert end == {("t", "a", 0): 9, ("t", "b", 0): 3}
    assert [(p.broker, p.start, p.end) for p in plan_ranges(begin, end)] == [("a", 5, 9)]
    # b came back with less than was planned (failOnDataLoss=false): go on from its max
    back = plan_end(end, {("t", "a", 0): QueueRange(0, 9), ("t", "b", 0): QueueRange(0, 1)})
    assert back[("t", "b", 0)] == 1


def test_keyless_rows_avoid_a_down_broker_and_keyed_rows_keep_theirs() -> None:
    brokers = [BrokerRoute("a", ("http://a",), 2, 2), BrokerRoute("b", ("http://b",), 2, 2)]
    keys = [[f"k{i}"] for i in range(20)] + [[]] * 10
    table = pa.table({"body": [b"x"] * 30, "keys": pa.array(keys, pa.list_(pa.string()))})
    before = place(table, brokers, seed=0)
    after = place(table, brokers, seed=0, avoid=frozenset({"b"}))
    keyed_b = {int(r) for r in before["b"].rows if r < 20}
    assert keyed_b and {int(r) for r in after["b"].rows} == keyed_b  # keys do not move
    assert all(r < 20 for r in after["b"].rows)  # no free row goes to b
    free = free_rows(table)
    assert free.tolist() == [False] * 20 + [True] * 10
    with_queue = table.append_column("queue_id", pa.array([None] * 29 + [1], pa.int32()))
    assert int(np.sum(free_rows(with_queue))) == 9


def test_new_options_parse_and_validate() -> None:
    base = {"namesrv": "127.0.0.1:9876", "subscribe": "t"}
    opts = parse_reader(base, batch=False)
    assert opts.broker_down_timeout_ms == 600_000 and not opts.skip_unavailable_brokers
    assert parse_reader({**base, "brokerdowntimeoutms": "0"}, batch=False).broker_down_timeout_ms == 0
    assert parse_reader({**base, "skipUnavailableBrokers": "true"}, batch=True).skip_unavailable_brokers
    with pytest.raises(OptionError, match="batch reads"):
        parse_reader({**base, "skipUnavailableBrokers": "true"}, batch=False)
    with pytest.raises(OptionError, match="brokerDownTimeoutMs"):
        parse_reader({**base, "brokerDownTimeoutMs": "-1"}, batch=False)
    sink = {"namesrv": "127.0.0.1:9876", "topic": "t"}
    assert parse_writer(sink).send_retries == 2
    assert parse_writer({**sink, "sendRetries": "0"}).send_retries == 0


def test_spark_reads_through_the_endpoint_list_when_the_first_address_is_down(
    spark: Any, broker_factory: Any
) -> None:
    streaming.register(spark)
    live = broker_factory(env=NO_MIRROR)
    create_topic(live.url, "halist", queues=2)
    produce(live.url, "halist", 6, queues=2)
    wait_visible(live.url, "halist", 6)
    df = (spark.read.format("sparkmq").option("endpoint", f"{_dead_url()},{live.url}")
          .option("subscribe", "halist").load())
    assert sorted(bytes(r[0]) for r in df.select("value").collect()) == sorted(
        f"halist-{i}".encode() for i in range(6))


def test_sink_keys_of_a_masterless_broker_wait_then_fail_naming_it_instead_of_moving(
        broker_factory: Any, tmp_path: Any) -> None:
    """The NameServer still routes broker-b by its slave (its master is gone): keys keep hashing onto it."""
    from streaming.sending import TaskSender
    from tests.namesrv.support import NamesrvProcess, free_port, register_body

    namesrv = NamesrvProcess(free_port(), tmp_path / "namesrv.log").start()
    try:
        addr = namesrv.url.removeprefix("http://")
        a = broker_factory(env={**NO_MIRROR, "SPARKMQ_BROKER__NAMESRV_ADDR": addr, "SPARKMQ_BROKER__NAME": "a"})
        create_topic(a.url, "pinned", queues=2)
        # broker-b: only its slave is registered (the master died and was dropped)
        assert namesrv.post("/v1/brokers/register", register_body("b", {"pinned": 2}, broker_id=1,
                                                                   port=free_port())).status_code == 200
        opts = parse_writer({"namesrv": addr, "topic": "pinned", "requestTimeoutMs": "1000"})
        sender = TaskSender(opts)
        keys = [[f"k{i}"] for i in range(20)]
        table = pa.table({"body": [b"x"] * 20, "keys": pa.array(keys, pa.list_(pa.string()))})
        routes = sender.router.writable("pinned")  # type: ignore[union-attr]
        placed = place(table, routes, seed=0)
        assert sorted(placed) == ["a", "b"]  # b's keys stay b's while it has no master
        with pytest.raises(streaming.errors.SinkError, match="broker 'b' has no live master"):
            sender.send_topic("pinned", table, seed=0)
        sender.rollback()
        sender.close()
    finally:
        namesrv.stop()
