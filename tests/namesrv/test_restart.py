"""A NameServer restart under load (issue 31): clients keep their routes, brokers re-register at once.

A NameServer that comes back empty answers "not found" until brokers
register again.  It reports its start time, so clients keep their cached
routes while it is young, and brokers (probing it every second) register
within a second of it answering.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from broker_api.client import SendError, SparkMQClient
from broker_api.errors import BrokerError
from tests.broker_api.conftest import FAST_ENV

from .support import NamesrvProcess, free_port, register_body, wait_until


def _broker_env(addr: str, name: str) -> dict[str, str]:
    return {**FAST_ENV, "SPARKMQ_BROKER__NAMESRV_ADDR": addr, "SPARKMQ_BROKER__NAME": name,
            "SPARKMQ_BROKER__CLUSTER": "c1", "SPARKMQ_BROKER__REGISTER_INTERVAL_S": "30"}


def _load(addr: str, stop: threading.Event, failures: list[str], sent: list[int]) -> None:
    with SparkMQClient(namesrv=addr, route_ttl_s=0.1, send_timeout_s=3.0) as c:
        i = 0
        while not stop.is_set():
            batch = [{"body": f"k{i}", "keys": [f"key-{i % 16}"]}, f"free{i}"]
            try:
                c.produce("busy", batch)
                sent.append(2)
            except SendError as exc:
                failures.append(exc.message)
                sent.append(2 - len(exc.failed))
            except BrokerError as exc:
                failures.append(f"{type(exc).__name__}: {exc.message}")
            i += 1


def test_namesrv_restart_under_load_costs_no_send(broker_factory: Callable[..., Any], tmp_path: Path) -> None:
    namesrv = NamesrvProcess(free_port(), tmp_path / "namesrv.log").start()
    try:
        addr = namesrv.url.removeprefix("http://")
        broker_factory(env=_broker_env(addr, "broker-a"))
        broker_factory(env=_broker_env(addr, "broker-b"))
        wait_until(lambda: len(namesrv.get("/v1/cluster").json()["brokers"]) == 2, timeout_s=15)
        with SparkMQClient(namesrv=addr) as admin:
            admin.create_topic("busy", queues=4)
        stop, failures, sent = threading.Event(), [], []
        loader = threading.Thread(target=_load, args=(addr, stop, failures, sent), daemon=True)
        loader.start()
        wait_until(lambda: len(sent) > 20, timeout_s=20)
        assert namesrv.proc is not None
        namesrv.proc.kill()  # SIGKILL: no goodbye, its tables are gone
        namesrv.proc.wait(10)
        time.sleep(1.0)
        namesrv.start()  # same port, empty tables
        answering = time.monotonic()
        wait_until(lambda: len(namesrv.get("/v1/cluster").json()["brokers"]) == 2, timeout_s=10, step_s=0.02)
        registered_s = time.monotonic() - answering
        before = len(sent)
        wait_until(lambda: len(sent) > before + 20, timeout_s=20)
        stop.set()
        loader.join(15)
        assert failures == []  # not one send failed across the restart
        assert registered_s < 1.5, f"brokers re-registered {registered_s:.2f} s after the NameServer answered"
        info = namesrv.get("/v1/namesrv").json()
        assert 0 <= info["uptime_s"] < 120 and info["started_ms"] > 0
    finally:
        namesrv.stop()


def test_spark_lookup_waits_out_a_young_namesrv_instead_of_failing(tmp_path: Path) -> None:
    """The Spark side has no cached route: a just-started NameServer's "not found" is asked again."""
    from streaming.namesrv import NamesrvLookup

    namesrv = NamesrvProcess(free_port(), tmp_path / "namesrv.log").start()
    try:
        def register_later() -> None:
            time.sleep(0.5)
            namesrv.post("/v1/brokers/register", register_body("late", {"late-topic": 2}, port=free_port()))

        threading.Thread(target=register_later, daemon=True).start()
        with NamesrvLookup((namesrv.url,), timeout_s=10.0) as lookup:
            routes = lookup.route("late-topic")  # a broker re-registering after the restart
        assert list(routes) == ["late"] and routes["late"].write_queues == 2
    finally:
        namesrv.stop()
