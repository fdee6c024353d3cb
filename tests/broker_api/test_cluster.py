"""A real NameServer and real brokers: registration, routing, and the NameServer-aware client and CLI."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from typer.testing import CliRunner

from broker_api.cli import app
from broker_api.client import SparkMQClient
from broker_api.errors import BadRequestError, TopicNotFoundError
from tests.namesrv.support import NamesrvProcess, free_port, wait_until

from .conftest import FAST_ENV

REPO = Path(__file__).resolve().parents[2]
runner = CliRunner()


@dataclass
class Cluster:
    namesrv: NamesrvProcess
    a: Any
    b: Any

    @property
    def addr(self) -> str:
        return self.namesrv.url.removeprefix("http://")


def _broker_env(namesrv_addr: str, name: str, interval_s: float = 30.0) -> dict[str, str]:
    return {"SPARKMQ_BROKER__NAMESRV_ADDR": namesrv_addr, "SPARKMQ_BROKER__NAME": name,
            "SPARKMQ_BROKER__CLUSTER": "c1", "SPARKMQ_BROKER__REGISTER_INTERVAL_S": str(interval_s)}


@pytest.fixture
def cluster(fast_broker: Callable[..., Any], tmp_path: Path) -> Iterator[Cluster]:
    """A NameServer and two masters (broker-a, broker-b) re-registering every 30 s."""
    namesrv = NamesrvProcess(free_port(), tmp_path / "namesrv.log").start()
    try:
        addr = namesrv.url.removeprefix("http://")
        a = fast_broker(_broker_env(addr, "broker-a"))
        b = fast_broker(_broker_env(addr, "broker-b"))
        wait_until(lambda: len(namesrv.get("/v1/cluster").json()["brokers"]) == 2, timeout_s=10)
        yield Cluster(namesrv, a, b)
    finally:
        assert namesrv.stop() == 0


def _serve_with_flags(tmp_path: Path, *flags: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARKMQ_")} | FAST_ENV
    cmd = [sys.executable, "-m", "broker_api", "serve", "--port", str(port), "--data-dir", str(tmp_path / "s"),
           *flags]
    with open(tmp_path / "slave.log", "ab") as log:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        assert proc.poll() is None, (tmp_path / "slave.log").read_text()
        try:
            return httpx.get(url + "/readyz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    wait_until(ready, timeout_s=60)
    return proc, url


def test_serve_flags_register_identity_and_roles(cluster: Cluster, tmp_path: Path) -> None:
    proc, url = _serve_with_flags(tmp_path, "--namesrv", f"127.0.0.1:9;{cluster.addr}", "--cluster", "c1",
                                  "--broker-name", "broker-a", "--broker-id", "1")
    try:
        info = httpx.get(url + "/v1/broker").json()
        assert (info["cluster"], info["name"], info["broker_id"], info["role"]) == ("c1", "broker-a", 1, "slave")

        def registered() -> list[dict[str, Any]]:
            brokers = cluster.namesrv.get("/v1/cluster").json()["brokers"]
            return brokers if len(brokers) == 3 else []

        roles = {(b["broker_name"], b["role"], b["address"]) for b in wait_until(registered)}
        assert roles == {("broker-a", "master", cluster.a.url), ("broker-a", "slave", url),
                         ("broker-b", "master", cluster.b.url)}
        expected = {"http://127.0.0.1:9": False, cluster.namesrv.url: True}  # a dead one blocks nothing
        wait_until(lambda: {s["address"]: s["up"] for s in httpx.get(url + "/v1/broker").json()["namesrv"]}
                   == expected)
        assert httpx.get(cluster.a.url + "/v1/broker").json()["role"] == "master"
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    # a clean shutdown unregisters the slave at once
    assert len(cluster.namesrv.get("/v1/cluster").json()["brokers"]) == 2


def test_created_topic_is_routable_at_once_and_client_spreads_by_key(cluster: Cluster) -> None:
    started = time.monotonic()
    assert httpx.post(cluster.a.url + "/v1/topics", json={"name": "pushed", "queues": 2}).status_code == 201
    wait_until(lambda: cluster.namesrv.get("/v1/routes/pushed").status_code == 200, timeout_s=5)
    assert time.monotonic() - started < 5  # pushed, not waiting for the 30 s re-registration

    with SparkMQClient(namesrv=cluster.addr) as client:
        created = client.create_topic("spread", queues=2)
        assert sorted(created) == ["broker-a", "broker-b"]
        keys = [f"k{i}" for i in range(12)]
        sent = client.produce("spread", [{"body": f"{k}-{n}", "keys": [k]} for n in range(10) for k in keys])
        assert {r.broker for r in sent} == {"broker-a", "broker-b"}
        assert len({(r.broker, r.queue_id) for r in sent}) > 2  # several queues, not one per broker
        by_key: dict[str, set[tuple[str, int]]] = {}
        for r, k in zip(sent, [k for _ in range(10) for k in keys]):
            by_key.setdefault(k, set()).add((r.broker, r.queue_id))
        assert all(len(slots) == 1 for slots in by_key.values())  # same key -> same broker + queue

        queues = client.queues("spread")
        assert {(q.broker, q.queue_id) for q in queues} == {(b, q) for b in ("broker-a", "broker-b") for q in (0, 1)}
        bodies: list[str] = []
        for q in queues:
            page = client.pull("spread", q.queue_id, 0, max_messages=1000, broker=q.broker)
            assert page.broker == q.broker
            bodies += [m["body"] for m in page.messages]
        assert sorted(bodies) == sorted(f"{k}-{n}" for n in range(10) for k in keys)  # each exactly once
        for k in keys:
            assert [b for b in bodies if b.startswith(k + "-")] == [f"{k}-{n}" for n in range(10)]

        client.commit_offsets("g1", "spread", {0: 3}, broker="broker-b")
        assert client.get_offsets("g1", "spread") == {"broker-a": {}, "broker-b": {0: 3}}
        with pytest.raises(BadRequestError, match="pass broker="):
            client.pull("spread", 0, 0)
        with pytest.raises(TopicNotFoundError, match="no live broker serves topic"):
            client.produce("never-created", ["x"])


def test_cli_produce_consume_through_namesrv(cluster: Cluster) -> None:
    addr = cluster.addr
    created = runner.invoke(app, ["topic", "create", "cli-ns", "--queues", "2", "--namesrv", addr])
    assert created.exit_code == 0 and "on broker-a" in created.output and "on broker-b" in created.output
    # each broker registers the new topic with the NameServer on its own (asynchronously): both routed first
    wait_until(lambda: {b["broker_name"] for b in cluster.namesrv.get("/v1/routes/cli-ns").json()["brokers"]}
               == {"broker-a", "broker-b"}, timeout_s=20)
    # Free messages fill one queue per batch (at most 10,000 messages), then the next queue in turn:
    # 25,000 lines are three batches at least, so both brokers' queues get some.
    n = 25_000
    lines = "".join(f"m{i}\n" for i in range(n))
    produced = runner.invoke(app, ["produce", "cli-ns", "--namesrv", addr], input=lines)
    assert produced.exit_code == 0 and f"produced {n} message(s)" in produced.output, produced.output
    consumed = runner.invoke(app, ["consume", "cli-ns", "--group", "g", "--json"], env={"SPARKMQ_NAMESRV": addr})
    assert consumed.exit_code == 0, consumed.output
    msgs = [orjson.loads(x) for x in consumed.output.splitlines() if x.startswith("{")]
    assert sorted(m["body"] for m in msgs) == sorted(f"m{i}" for i in range(n))
    assert {m["broker"] for m in msgs} == {"broker-a", "broker-b"}
    again = runner.invoke(app, ["consume", "cli-ns", "--group", "g", "--json", "--namesrv", addr])
    assert [x for x in again.output.splitlines() if x.startswith("{")] == []  # offsets committed per broker
    shown = runner.invoke(app, ["offsets", "g", "--topic", "cli-ns", "--namesrv", addr])
    assert shown.exit_code == 0 and "broker-a" in shown.output and "broker-b" in shown.output
    described = runner.invoke(app, ["topic", "describe", "cli-ns", "--namesrv", addr])
    assert "cli-ns on broker-a" in described.output and "cli-ns on broker-b" in described.output


def test_broker_starts_with_namesrv_down_and_registers_when_it_comes_up(
        fast_broker: Callable[..., Any], tmp_path: Path) -> None:
    port = free_port()
    broker = fast_broker(_broker_env(f"127.0.0.1:{port}", "broker-late", interval_s=0.3))
    assert httpx.get(broker.url + "/readyz").status_code == 200  # served although the NameServer is down
    assert httpx.post(broker.url + "/v1/topics", json={"name": "late", "queues": 1}).status_code == 201
    assert httpx.get(broker.url + "/v1/broker").json()["namesrv"][0]["up"] is False
    namesrv = NamesrvProcess(port, tmp_path / "namesrv.log").start()
    try:
        wait_until(lambda: namesrv.get("/v1/routes/late").status_code == 200, timeout_s=10)
        assert namesrv.get("/v1/cluster").json()["brokers"][0]["broker_name"] == "broker-late"
        assert httpx.get(broker.url + "/v1/broker").json()["namesrv"][0]["up"] is True
    finally:
        assert broker.stop() == 0
        assert namesrv.stop() == 0


def test_namesrv_command_help_and_client_argument_errors() -> None:
    out = subprocess.run([sys.executable, "-m", "broker_api", "namesrv", "--help"], check=False, cwd=REPO,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "--port" in out.stdout and "NameServer" in out.stdout
    serve_help = runner.invoke(app, ["serve", "--help"])
    for flag in ("--namesrv", "--cluster", "--broker-name", "--broker-id"):
        assert flag in serve_help.output
    with pytest.raises(BadRequestError, match="exactly one"):
        SparkMQClient()
    down = runner.invoke(app, ["topic", "list", "--namesrv", "127.0.0.1:9"])
    assert down.exit_code == 1 and "no NameServer answered" in down.output
