"""A dead broker costs its own queues, not the cluster: the Python client and the CLI route around it.

A real NameServer and two real masters (broker-a, broker-b); broker-b is
SIGKILLed and the NameServer still routes it (it is dropped only after
120 s of silence), as a user sees in the first two minutes of an outage.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from broker_api.client import SendError, SparkMQClient

from .test_cluster import Cluster, cluster  # noqa: F401 - the NameServer + broker-a + broker-b fixture

REPO = Path(__file__).resolve().parents[2]


def _topic(c: SparkMQClient, name: str = "orders") -> None:
    c.create_topic(name, queues=4)


def test_message_ids_are_distinct_across_brokers_and_found_through_the_cluster(cluster: Cluster) -> None:
    with SparkMQClient(namesrv=cluster.addr) as c:
        _topic(c)
        firsts = {}
        for broker in ("broker-a", "broker-b"):
            url = c.brokers("orders")[broker]
            with SparkMQClient(url) as direct:
                firsts[broker] = direct.produce("orders", [f"first on {broker}"])[0]
        assert firsts["broker-a"].msg_id != firsts["broker-b"].msg_id
        # the id names the broker that stored it: the client finds each one in the cluster
        for broker, sent in firsts.items():
            assert c.message(sent.msg_id)["body"] == f"first on {broker}"
        port_a = cluster.a.url.rsplit(":", 1)[1]
        assert firsts["broker-a"].msg_id[8:16] == f"{int(port_a):08X}"


def test_unkeyed_sends_go_to_the_live_broker_while_one_is_dead(cluster: Cluster) -> None:
    with SparkMQClient(namesrv=cluster.addr) as c:
        _topic(c)
        cluster.b.kill()
        results = [c.produce("orders", [f"m{i}"])[0] for i in range(20)]
        assert {r.broker for r in results} == {"broker-a"}
        assert {r.status for r in results} == {"SEND_OK"}
        # every acknowledged message is really on broker-a, once
        bodies = []
        for q in c.queues("orders", on_unreachable=lambda *a: None):
            page = c.pull("orders", q.queue_id, q.min_offset, max_messages=100, broker=q.broker)
            bodies += [m["body"] for m in page.messages]
        assert sorted(bodies) == sorted(f"m{i}" for i in range(20))
        # a batch of unkeyed messages also lands whole
        assert len(c.produce("orders", [f"batch{i}" for i in range(50)])) == 50


def test_keyed_batch_across_both_reports_every_outcome_and_nothing_stored_is_unacknowledged(
        cluster: Cluster) -> None:
    with SparkMQClient(namesrv=cluster.addr) as c:
        _topic(c)
        cluster.b.kill()
        messages = [{"body": f"k{i}", "keys": [f"key-{i}"]} for i in range(40)]
        with pytest.raises(SendError) as info:
            c.produce("orders", messages)
        err = info.value
        assert len(err.results) == len(err.errors) == 40
        assert err.sent and err.failed  # keys hash over both brokers
        assert all(r.broker == "broker-a" for r in err.sent)
        assert all("broker-b" in str(err.errors[i]) for i in err.failed)
        assert "broker-b" in err.message and cluster.b.url.removeprefix("http://") in err.message
        stored = set()
        for q in c.queues("orders", on_unreachable=lambda *a: None):
            page = c.pull("orders", q.queue_id, q.min_offset, max_messages=100, broker=q.broker)
            stored |= {m["body"] for m in page.messages}
        assert stored == {messages[i]["body"] for i, r in enumerate(err.results) if r is not None}
        # per-key order: a failed key is not moved to the other broker
        assert stored.isdisjoint(messages[i]["body"] for i in err.failed)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "broker_api", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=120)


def test_cli_consumer_skips_a_dead_broker_with_a_warning_and_exits_non_zero(cluster: Cluster) -> None:
    with SparkMQClient(namesrv=cluster.addr) as c:
        _topic(c)
        sent = c.produce("orders", [f"m{i}" for i in range(40)])
        on_a = sum(1 for r in sent if r.broker == "broker-a")
    cluster.b.kill()
    out = _cli("consume", "orders", "--namesrv", cluster.addr, "--json")
    assert out.returncode == 3, out.stderr
    assert len(out.stdout.splitlines()) == on_a
    assert "warning: skipping broker 'broker-b' at " + cluster.b.url in out.stderr
    assert out.stderr.strip().splitlines()[-1].startswith("error: not every broker was read")
    accepted = _cli("consume", "orders", "--namesrv", cluster.addr, "--json", "--allow-partial")
    assert accepted.returncode == 0, accepted.stderr
    assert len(accepted.stdout.splitlines()) == on_a
    # back up: the whole topic is read again and the exit status is 0
    cluster.b.start()
    full = _cli("consume", "orders", "--namesrv", cluster.addr, "--json")
    assert full.returncode == 0, full.stderr
    assert len(full.stdout.splitlines()) == 40
