"""POP from the Python client and the CLI (pop, ack, dlq, filters) against real brokers, direct and routed."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from typer.testing import CliRunner

from broker_api.cli import app
from broker_api.client import PopMessage, SparkMQClient
from tests.namesrv.support import NamesrvProcess, free_port, wait_until

from .test_pop import POP_ENV

runner = CliRunner()


def _pop_until(c: SparkMQClient, want: int, **kw: Any) -> list[PopMessage]:
    got: list[PopMessage] = []
    deadline = time.monotonic() + 10
    while len(got) < want and time.monotonic() < deadline:
        got += c.pop("g", "t", wait_ms=200, **kw)
    return got


def test_client_and_cli_pop_ack_retry_dlq_and_filters(fast_broker: Callable[..., Any]) -> None:
    broker = fast_broker(POP_ENV)
    with SparkMQClient(broker.url) as c:
        c.create_topic("t", queues=2)
        c.produce("t", [{"body": f"m{i}", "queue_id": i % 2, "properties": {"a": str(i)}} for i in range(4)]
                  + [{"body": "late", "delay_level": 1}])
        got = _pop_until(c, 5, invisible_ms=5000)
        assert sorted(m.body or "" for m in got) == ["late", "m0", "m1", "m2", "m3"]  # delay_level passed through
        assert all(m.receipt.startswith("broker-a@") and m.broker == "broker-a" for m in got)
        moved = c.change_invisible("g", got[0], 10_000)
        assert moved.status == "OK" and moved.receipt.startswith("broker-a@")
        acks = c.ack("g", [moved.receipt, *got[1:]])
        assert [a.status for a in acks] == ["OK"] * 5
        assert c.retry("g", got[1].msg_id, delay_level=-1).status == "DLQ"
        [dead] = c.dlq("g")
        assert (dead.origin_topic, dead.origin_msg_id, dead.body) == ("t", got[1].msg_id, got[1].body)
        page = c.pull("t", 0, 0, filter="a >= 2")
        assert [m["body"] for m in page.messages] == ["m2"]
        c.produce("t", [{"body": "cli", "properties": {"a": "9"}}])

    popped = runner.invoke(app, ["pop", "t", "--group", "g", "--json", "--wait-ms", "2000", "--url", broker.url])
    assert popped.exit_code == 0, popped.output
    [line] = [orjson.loads(x) for x in popped.stdout.splitlines() if x.startswith("{")]
    assert line["body"] == "cli" and line["receipt"].startswith("broker-a@")
    acked = runner.invoke(app, ["ack", "--group", "g", line["receipt"], "--url", broker.url])
    assert acked.exit_code == 0 and "OK" in acked.stdout
    again = runner.invoke(app, ["ack", "--group", "g", "broker-a@1:0:1", "--url", broker.url])
    assert again.exit_code == 1 and "error:" in again.output  # not a receipt this group holds
    dlq = runner.invoke(app, ["dlq", "g", "--json", "--url", broker.url])
    assert [d["origin_topic"] for d in orjson.loads(dlq.stdout)] == ["t"]
    consumed = runner.invoke(app, ["consume", "t", "--filter", "a > 2", "--json", "--url", broker.url])
    assert sorted(orjson.loads(x)["body"] for x in consumed.stdout.splitlines()) == ["cli", "m3"]
    bad = runner.invoke(app, ["pop", "t", "--group", "g", "--filter", "a >> 1", "--url", broker.url])
    assert bad.exit_code == 1 and "bad_filter" in bad.output


def test_routed_pop_reaches_every_master_and_acks_where_popped(fast_broker: Callable[..., Any],
                                                             tmp_path: Path) -> None:
    namesrv = NamesrvProcess(free_port(), tmp_path / "namesrv.log").start()
    try:
        addr = namesrv.url.removeprefix("http://")
        for name in ("broker-a", "broker-b"):
            fast_broker({**POP_ENV, "SPARKMQ_BROKER__NAMESRV_ADDR": addr, "SPARKMQ_BROKER__NAME": name,
                         "SPARKMQ_BROKER__CLUSTER": "c1"})
        wait_until(lambda: len(namesrv.get("/v1/cluster").json()["brokers"]) == 2, timeout_s=10)
        with SparkMQClient(namesrv=addr) as c:
            c.create_topic("t", queues=2)
            c.produce("t", [f"m{i}" for i in range(8)])
            got = _pop_until(c, 8)
            assert {m.broker for m in got} == {"broker-a", "broker-b"} and len(got) == 8
            assert [a.status for a in c.ack("g", got)] == ["OK"] * 8
            assert {a.broker for a in c.ack("g", got)} == {"broker-a", "broker-b"}  # ALREADY_ACKED, routed
            assert c.pop("g", "t") == []
    finally:
        assert namesrv.stop() == 0
