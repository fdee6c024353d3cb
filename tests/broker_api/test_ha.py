"""Master/slave replication between real broker processes: SIGKILL, restarts, refusals, metadata.

Every broker is a ``python -m broker_api serve`` process on 127.0.0.1 with
1 MiB CommitLog segments; the slave copies the master's metadata every second.
"""

from __future__ import annotations

import io
import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa

from tests.namesrv.support import NamesrvProcess, free_port

from .ha_support import caught_up, dump, ha, master_env, produce, slave_env, start_pair, wait_for


def _segments(broker: Any) -> list[str]:
    return sorted(p.name for p in (Path(broker.data_dir) / "store" / "commitlog").iterdir())


def test_sync_master_send_ok_messages_survive_a_master_sigkill_byte_identical_on_the_slave(
        broker_factory: Callable[..., Any]) -> None:
    pair = start_pair(broker_factory, "sync_master")
    answered: list[dict[str, Any]] = []
    lock, stop = threading.Lock(), threading.Event()

    def producer(n: int) -> None:
        with httpx.Client(timeout=10) as c:
            for i in range(200):  # bounded; the master dies meanwhile
                if stop.is_set():
                    return
                msgs = [{"body": f"p{n}-{i}-{j}-" + "x" * 200, "queue_id": j % 4} for j in range(10)]
                try:
                    r = c.post(f"{pair.master.url}/v1/topics/orders/messages", json={"messages": msgs})
                except httpx.HTTPError:
                    return
                if r.status_code == 200:
                    with lock:
                        answered.append({**r.json(), "bodies": [m["body"] for m in msgs]})

    threads = [threading.Thread(target=producer, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    wait_for(lambda: len(answered) >= 60, 30, "60 answered produces")
    pair.master.kill()
    stop.set()
    for t in threads:
        t.join(30)
    ok = [a for a in answered if a["status"] == "SEND_OK"]
    assert ok and len(ok) >= 60 and {a["status"] for a in answered} == {"SEND_OK"}
    wanted = {(r["queue_id"], r["queue_offset"]) for a in ok for r in a["results"]}
    # the slave serves the topic the master auto-created, though the master died before telling it
    def complete() -> dict[tuple[int, int], tuple[str, str]] | None:
        found = dump(pair.slave.url, "orders")
        return found if wanted <= set(found) else None

    on_slave = wait_for(complete, 20, "every SEND_OK message on the slave")
    for a in ok:
        for r, body in zip(a["results"], a["bodies"]):
            assert on_slave[(r["queue_id"], r["queue_offset"])] == (r["msg_id"], body)
    # the slave kept serving reads with the master gone, and still refuses writes
    refused = httpx.post(f"{pair.slave.url}/v1/topics/orders/messages", json={"messages": [{"body": "x"}]})
    assert refused.status_code == 403 and refused.json()["error"] == "slave_read_only"


def test_sync_master_statuses_and_every_produce_form_carries_one(broker_factory: Callable[..., Any]) -> None:
    pair = start_pair(broker_factory, "sync_master")
    assert produce(pair.master.url, "t", ["a", "b"])["status"] == "SEND_OK"
    raw = httpx.post(f"{pair.master.url}/v1/topics/t/messages", content=b"raw",
                     headers={"content-type": "application/octet-stream"})
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, pa.schema([("body", pa.binary())])) as w:
        w.write_table(pa.table({"body": [b"arrow1", b"arrow2"]}))
    arrow = httpx.post(f"{pair.master.url}/v1/topics/t/messages", content=sink.getvalue(),
                       headers={"content-type": "application/vnd.apache.arrow.stream"})
    assert raw.json()["status"] == arrow.json()["status"] == "SEND_OK"
    # a connected slave that stops acknowledging: stored, but not confirmed in time
    os.kill(pair.slave.proc.pid, signal.SIGSTOP)
    try:
        late = produce(pair.master.url, "t", ["late"])
        assert late["status"] == "FLUSH_SLAVE_TIMEOUT" and late["results"][0]["msg_id"]
    finally:
        os.kill(pair.slave.proc.pid, signal.SIGCONT)
    pair.slave.kill()
    wait_for(lambda: ha(pair.master)["connected_slaves"] == 0, 30, "the master to notice")
    gone = produce(pair.master.url, "t", ["alone"])
    assert gone["status"] == "SLAVE_NOT_AVAILABLE"
    metrics = httpx.get(pair.master.url + "/metrics").text
    for status in ("SEND_OK", "FLUSH_SLAVE_TIMEOUT", "SLAVE_NOT_AVAILABLE"):
        assert f'sparkmq_produce_status_total{{status="{status}"}}' in metrics
    assert 'sparkmq_ha_role{role="sync_master"} 1' in metrics


def test_slave_refuses_writes_naming_the_master_and_follows_its_metadata(broker_factory: Callable[..., Any]) -> None:
    pair = start_pair(broker_factory)
    m, s = pair.master.url, pair.slave.url
    produce(m, "orders", [f"m{i}" for i in range(8)])
    assert httpx.put(f"{m}/v1/groups/billing/offsets", json={"topic": "orders", "offsets": {"0": 2, "1": 1}}
                     ).status_code == 200
    assert httpx.post(f"{m}/v1/topics", json={"name": "empty", "queues": 2}).status_code == 201
    # until the first sync the slave may not know the topic yet (404): keep asking
    wait_for(lambda: httpx.get(f"{s}/v1/groups/billing/offsets", params={"topic": "orders"}).json().get("offsets")
             == {"0": 2, "1": 1}, 20, "the master's offsets on the slave")
    wait_for(lambda: {t["name"] for t in httpx.get(f"{s}/v1/topics").json()} == {"orders", "empty"}, 20,
             "the master's topics on the slave")
    assert dump(s, "orders") == dump(m, "orders")
    refusals = [
        httpx.post(f"{s}/v1/topics/orders/messages", json={"messages": [{"body": "x"}]}),
        httpx.post(f"{s}/v1/topics", json={"name": "new", "queues": 1}),
        httpx.put(f"{s}/v1/groups/billing/offsets", json={"topic": "orders", "offsets": {"0": 5}}),
        httpx.delete(f"{s}/v1/topics/orders"),
    ]
    for r in refusals:
        assert r.status_code == 403 and r.json()["error"] == "slave_read_only", r.text
        assert m in r.json()["message"]
    info = ha(pair.slave)
    assert info["role"] == "slave" and info["connected"] and info["error"] is None
    assert info["metadata_sync"]["syncs"] >= 1
    slaves = ha(pair.master)["slaves"]
    assert len(slaves) == 1 and slaves[0]["lag_bytes"] == 0 and slaves[0]["ack_offset"] == ha(pair.master)["max_offset"]


def test_killed_slave_restarts_from_its_own_offset_and_an_empty_slave_copies_several_segments(
        broker_factory: Callable[..., Any]) -> None:
    pair = start_pair(broker_factory)
    m = pair.master.url
    big = "y" * 1000
    for n in range(3):
        produce(m, "bulk", [f"{n}-{i}-{big}" for i in range(400)])
    first = caught_up(pair.master, pair.slave)
    pair.slave.kill()
    for n in range(3, 6):
        produce(m, "bulk", [f"{n}-{i}-{big}" for i in range(400)])
    assert len(_segments(pair.master)) >= 3  # ~2.5 MiB in 1 MiB segments
    pair.slave.start()
    caught_up(pair.master, pair.slave)
    assert f"at offset {first}" in pair.slave.log_tail(200_000)  # resumed where its own log ended
    fresh = broker_factory(env=slave_env(pair.master, pair.ha_port))
    caught_up(pair.master, fresh)
    expected = dump(m, "bulk")
    assert len(expected) == 2400
    wait_for(lambda: dump(pair.slave.url, "bulk") == expected, 20, "the restarted slave's queues")
    wait_for(lambda: dump(fresh.url, "bulk") == expected, 20, "the empty slave's queues")
    assert _segments(fresh) == _segments(pair.master)


def test_a_slave_with_another_history_refuses_and_keeps_its_data(broker_factory: Callable[..., Any],
                                                                  tmp_path: Path) -> None:
    other = broker_factory(data_dir=tmp_path / "other", env=master_env())
    produce(other.url, "orders", [f"mine-{i}" for i in range(5)])
    mine = dump(other.url, "orders")
    other.stop()
    master = broker_factory(env=master_env(ha_port=(port := free_port())))
    produce(master.url, "orders", [f"theirs-{i}-" + "z" * 50 for i in range(40)])
    slave = broker_factory(data_dir=tmp_path / "other", env=slave_env(master, port))
    error = wait_for(lambda: ha(slave)["error"], 20, "the refusal")
    assert "refused" in error
    assert dump(slave.url, "orders") == mine  # nothing truncated or overwritten
    assert 'sparkmq_ha_replication_refused 1' in httpx.get(slave.url + "/metrics").text


def test_slave_learns_the_master_from_the_namesrv_and_clients_read_from_it_while_the_master_is_down(
        broker_factory: Callable[..., Any], tmp_path: Path) -> None:
    from broker_api.client import SparkMQClient

    ns = NamesrvProcess(free_port(), tmp_path / "namesrv.log").start()
    try:
        addr = ns.url.removeprefix("http://")
        reg = {"SPARKMQ_BROKER__NAMESRV_ADDR": addr, "SPARKMQ_BROKER__NAME": "broker-a",
               "SPARKMQ_BROKER__REGISTER_INTERVAL_S": "1"}
        master = broker_factory(env=master_env(ha_port=free_port(), **reg))
        slave = broker_factory(env=slave_env(None, None, **reg))  # no master address: the NameServer's
        wait_for(lambda: ha(slave)["connected"], 30, "the slave to find its master")
        assert ha(slave)["master_url"] == master.url
        with SparkMQClient(namesrv=addr, backoff_max_s=1.0) as c:
            c.create_topic("orders", queues=2)
            sent = c.produce("orders", [f"m{i}" for i in range(10)])
            caught_up(master, slave)
            # the slave serves the new topic once it took its metadata (a sync, or the replicated data): moments
            wait_for(lambda: httpx.get(f"{slave.url}/v1/topics/orders", timeout=5).status_code == 200, 10,
                     "the slave to serve the new topic")
            route = ns.get("/v1/routes/orders").json()
            assert route["brokers"][0]["addresses"] == {"0": master.url, "1": slave.url}
            master.kill()
            page = c.pull("orders", sent[0].queue_id, 0, max_messages=100)
            assert page.url == slave.url and len(page.messages) == 5
            master.start()
            wait_for(lambda: c.pull("orders", sent[0].queue_id, 0).url == master.url, 30,
                     "reads to go back to the master", step_s=0.3)
    finally:
        assert ns.stop() == 0


def test_the_ha_port_serves_no_log_to_a_raw_peer_nor_to_a_slave_with_the_wrong_secret(
        broker_factory: Callable[..., Any]) -> None:
    import socket

    master = broker_factory(env=master_env(ha_port=(port := free_port())))
    produce(master.url, "orders", [f"secret-{i}" for i in range(20)])
    with socket.create_connection(("127.0.0.1", port)) as raw:  # the reproduction: 8 zero bytes
        raw.sendall(b"\0" * 8)
        raw.settimeout(10)
        got = b""
        while chunk := raw.recv(1 << 16):
            got += chunk
    assert got == b""
    wrong = broker_factory(env=slave_env(master, port, SPARKMQ_HA__SECRET="not-the-secret"))
    wait_for(lambda: "secret" in (ha(wrong)["error"] or ""), 20, "the wrong-secret slave to be refused")
    assert dump(wrong.url, "orders") == {}
    metrics = httpx.get(master.url + "/metrics", timeout=10).text
    assert 'sparkmq_ha_refused_peers_total{reason="bad_secret"}' in metrics, metrics
    assert ha(master)["authenticated"] and ha(master)["connected_slaves"] == 0
