"""Transactions and the exactly-once sink commit, including restarts and crashes."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pyarrow as pa


def _count(c: httpx.Client, topic: str) -> int:
    return sum(q["max_offset"] for q in c.get(f"/v1/topics/{topic}/queues").json())


def _wait_count(c: httpx.Client, topic: str, n: int, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if _count(c, topic) == n:
            return
        time.sleep(0.01)
    raise AssertionError(f"{topic} has {_count(c, topic)} messages, expected {n}")


def _bodies(c: httpx.Client, topic: str) -> list[str]:
    out = []
    for q in c.get(f"/v1/topics/{topic}/queues").json():
        page = c.get(f"/v1/topics/{topic}/queues/{q['queue_id']}/messages",
                     params={"offset": 0, "max_messages": 1000}).json()
        out += [m["body"] for m in page["messages"]]
    return sorted(out)


def _half(c: httpx.Client, topic: str, bodies: list[str], **extra: Any) -> dict[str, Any]:
    resp = c.post(f"/v1/topics/{topic}/messages",
                  json={"transactional": True, "messages": [{"body": b, **extra} for b in bodies]})
    assert resp.status_code == 200, resp.text
    return resp.json()


def test_commit_makes_halves_visible_once(client: httpx.Client) -> None:
    client.post("/v1/topics", json={"name": "tx", "queues": 2})
    opened = _half(client, "tx", ["a", "b", "c"], properties={"p": "1"})
    assert len(opened["results"]) == 3 and opened["transaction_id"]
    time.sleep(0.3)
    assert _count(client, "tx") == 0  # invisible before the commit
    assert "RMQ_SYS_TRANS_HALF_TOPIC" not in [t["name"] for t in client.get("/v1/topics").json()]
    tx = opened["transaction_id"]
    resp = client.post(f"/v1/transactions/{tx}", json={"action": "commit"})
    assert resp.status_code == 200 and resp.json()["messages"] == 3
    _wait_count(client, "tx", 3)
    again = client.post(f"/v1/transactions/{tx}", json={"action": "commit"})
    assert again.status_code == 200 and again.json()["state"] == "committed"
    time.sleep(0.2)
    assert _bodies(client, "tx") == ["a", "b", "c"]
    page = client.get("/v1/topics/tx/queues/0/messages", params={"offset": 0}).json()
    assert page["messages"][0]["properties"]["p"] == "1"
    assert client.get(f"/v1/transactions/{tx}").json()["state"] == "committed"


def test_rollback_drops_halves_and_blocks_commit(client: httpx.Client) -> None:
    tx = _half(client, "rb", ["x", "y"])["transaction_id"]
    assert client.post(f"/v1/transactions/{tx}", json={"action": "rollback"}).status_code == 200
    resp = client.post(f"/v1/transactions/{tx}", json={"action": "commit"})
    assert resp.status_code == 409 and resp.json()["error"] == "transaction_conflict"
    time.sleep(0.2)
    assert _count(client, "rb") == 0


def test_more_halves_via_transaction_id_and_arrow(client: httpx.Client) -> None:
    tx = _half(client, "multi", ["one"])["transaction_id"]
    table = pa.table({"body": pa.array([b"two", b"three"])})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    resp = client.post(f"/v1/topics/multi/messages?transaction_id={tx}", content=sink.getvalue().to_pybytes(),
                       headers={"Content-Type": "application/vnd.apache.arrow.stream"})
    assert resp.status_code == 200 and resp.json()["transaction_id"] == tx
    arrow_tx = client.post("/v1/topics/multi/messages?transactional=true", content=sink.getvalue().to_pybytes(),
                           headers={"Content-Type": "application/vnd.apache.arrow.stream"}).json()
    assert arrow_tx["transaction_id"] != tx
    client.post(f"/v1/transactions/{tx}", json={"action": "commit"})
    _wait_count(client, "multi", 3)
    assert _bodies(client, "multi") == ["one", "three", "two"]


def test_unresolved_transactions_roll_back_after_the_timeout(fast_broker: Any) -> None:
    b = fast_broker({"SPARKMQ_TRANSACTIONS__TIMEOUT_S": "0.5", "SPARKMQ_TRANSACTIONS__CHECK_INTERVAL_S": "0.1"})
    with httpx.Client(base_url=b.url) as c:
        tx = _half(c, "slow", ["late"])["transaction_id"]
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and c.get(f"/v1/transactions/{tx}").json()["state"] == "open":
            time.sleep(0.05)
        assert c.get(f"/v1/transactions/{tx}").json()["state"] == "rolled_back"
        assert c.post(f"/v1/transactions/{tx}", json={"action": "commit"}).status_code == 409
        assert _count(c, "slow") == 0


def test_sink_batch_commit_is_idempotent_across_restarts(fast_broker: Any) -> None:
    b = fast_broker()
    with httpx.Client(base_url=b.url) as c:
        t1 = _half(c, "out", ["r1", "r2"])["transaction_id"]
        t2 = _half(c, "out", ["r3"])["transaction_id"]
        first = c.post("/v1/sinks/q1/batches/7/commit", json={"transaction_ids": [t1, t2]})
        assert first.json() == {"status": "committed", "messages": 3}
        replay_tx = _half(c, "out", ["r1", "r2", "r3"])["transaction_id"]
        replay = c.post("/v1/sinks/q1/batches/7/commit", json={"transaction_ids": [replay_tx]})
        assert replay.status_code == 200 and replay.json() == {"status": "already_committed"}
        assert c.get(f"/v1/transactions/{replay_tx}").json()["state"] == "rolled_back"
        _wait_count(c, "out", 3)
    b.restart()
    with httpx.Client(base_url=b.url) as c:
        replay_tx = _half(c, "out", ["r1"])["transaction_id"]
        again = c.post("/v1/sinks/q1/batches/7/commit", json={"transaction_ids": [replay_tx]})
        assert again.json() == {"status": "already_committed"}
        info = c.get("/v1/sinks/q1").json()
        assert info["sink_id"] == "q1" and info["last_batch_id"] == 7
        assert info["batches"][-1]["messages"] == 3
        aborted_tx = _half(c, "out", ["never"])["transaction_id"]
        assert c.post("/v1/sinks/q1/batches/8/abort", json={"transaction_ids": [aborted_tx]}).status_code == 200
        empty = c.post("/v1/sinks/q1/batches/8/commit", json={"transaction_ids": []})
        assert empty.json() == {"status": "committed", "messages": 0}
        time.sleep(0.2)
        assert _bodies(c, "out") == ["r1", "r2", "r3"]


def test_decided_but_unpublished_commit_is_finished_on_restart(fast_broker: Any) -> None:
    """A crash between the fsynced decision and the publish: restart publishes exactly once."""
    b = fast_broker()
    with httpx.Client(base_url=b.url) as c:
        pending = _half(c, "rec", ["p1", "p2"])["transaction_id"]
        done_half = _half(c, "rec", ["d1"])
        done = done_half["transaction_id"]
        c.post(f"/v1/transactions/{done}", json={"action": "commit"})
        _wait_count(c, "rec", 1)
    b.stop()
    meta = b.data_dir / "config"
    # The published mark of `done` is lost, and `pending` was decided but never published.
    snapshot = json.loads((meta / "transactions.json").read_text())
    snapshot["txs"][done]["published"] = False
    snapshot["txs"][done]["halves"] = [r["msg_id"] for r in done_half["results"]]
    offset = snapshot["txs"][done]["from_offset"]
    (meta / "transactions.json").write_text(json.dumps(snapshot))
    decide = {"op": "decide", "txs": [pending], "state": "committed", "ts": int(time.time() * 1000), "from": offset}
    with open(meta / "transactions.jsonl", "a") as fh:
        fh.write(json.dumps(decide) + "\n")
    b.start()
    with httpx.Client(base_url=b.url) as c:
        _wait_count(c, "rec", 3)
        time.sleep(0.3)
        assert _bodies(c, "rec") == ["d1", "p1", "p2"]
        assert c.get(f"/v1/transactions/{pending}").json()["published"] is True


def test_a_journal_left_over_after_a_snapshot_is_not_applied_twice(tmp_path: Any) -> None:
    """Crash between writing the snapshot and emptying the journal: no half counted twice."""
    from broker_api.settings.broker import TransactionsSection
    from broker_api.transactions.service import TransactionService
    from store import Message, MessageStore, StoreConfig

    store = MessageStore(StoreConfig(root_dir=tmp_path / "store", commitlog_segment_bytes=1 << 20,
                                     index_slots=100, index_entries=400))
    store.start()
    try:
        meta = tmp_path / "config"
        tx = TransactionService(store, meta, TransactionsSection())
        tx.start()
        tx_id, _ = tx.add_halves([Message("t", b"a"), Message("t", b"b")], None)
        journal = (meta / "transactions.jsonl").read_bytes()
        tx.stop()  # snapshot written, journal emptied
        (meta / "transactions.jsonl").write_bytes(journal)  # as if the crash hit before the reset
        again = TransactionService(store, meta, TransactionsSection())
        again.start()
        assert again.describe(tx_id)["messages"] == 2
        assert again.commit(tx_id)["messages"] == 2
        again.stop()
    finally:
        store.shutdown()


def _ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def test_a_sink_batch_of_staged_bodies_keeps_keys_tags_queues_and_properties(client: httpx.Client) -> None:
    # by columns (one key per row, one tag, a queue per row) and by messages (a property per row)
    client.post("/v1/topics", json={"name": "sinkcols", "queues": 4}).raise_for_status()
    arrow = {"Content-Type": "application/vnd.apache.arrow.stream"}
    columnar = pa.table({"body": pa.array([b"c0", b"c1", b"c2"], pa.binary()),
                         "keys": pa.array(["k0", "key-1", "k2"]), "tags": pa.array(["T", "T", "T"]),
                         "queue_id": pa.array([2, 0, 2], pa.int32())})
    per_row = pa.table({"body": pa.array([b"p0", b"p1"], pa.binary()),
                        "properties": pa.array([[("a", "1")], [("a", "2")]], pa.map_(pa.string(), pa.string()))})
    txids = []
    for table in (columnar, per_row):
        r = client.post("/v1/topics/sinkcols/messages", params={"transactional": "true", "staging": "raw"},
                        content=_ipc(table), headers=arrow)
        assert r.status_code == 200, r.text
        txids.append(r.json()["transaction_id"])
    assert _count(client, "sinkcols") == 0  # staged, not appended
    r = client.post("/v1/sinks/cols/batches/0/commit", json={"transaction_ids": txids})
    assert r.json() == {"status": "committed", "messages": 5}
    _wait_count(client, "sinkcols", 5)
    got = {}
    for q in range(4):
        page = client.get(f"/v1/topics/sinkcols/queues/{q}/messages", params={"offset": 0, "max_messages": 10}).json()
        for m in page["messages"]:
            got[m["body"]] = (q, m["keys"], m["tags"], m["properties"])
    assert got["c0"] == (2, ["k0"], "T", {"sparkmq.tx_id": txids[0]})
    assert got["c1"] == (0, ["key-1"], "T", {"sparkmq.tx_id": txids[0]})
    assert got["c2"][:2] == (2, ["k2"])
    assert got["p0"][3] == {"a": "1", "sparkmq.tx_id": txids[1]} and got["p1"][3]["a"] == "2"
    again = client.post("/v1/sinks/cols/batches/0/commit", json={"transaction_ids": txids})
    assert again.json()["status"] == "already_committed" and _count(client, "sinkcols") == 5


def test_a_staged_body_the_store_would_refuse_fails_the_commit_before_anything_is_decided(
        client: httpx.Client) -> None:
    # a 40,000-character tag: refused at commit, before the decision (never half published after it)
    client.post("/v1/topics", json={"name": "sinkbig", "queues": 2}).raise_for_status()
    big = pa.table({"body": pa.array([b"x", b"y"], pa.binary()), "tags": pa.array(["t" * 40_000] * 2)})
    r = client.post("/v1/topics/sinkbig/messages", params={"transactional": "true", "staging": "raw"},
                    content=_ipc(big), headers={"Content-Type": "application/vnd.apache.arrow.stream"})
    tx_id = r.json()["transaction_id"]
    r = client.post("/v1/sinks/big/batches/0/commit", json={"transaction_ids": [tx_id]})
    assert r.status_code == 400, r.text
    assert client.get(f"/v1/transactions/{tx_id}").json()["state"] == "open" and _count(client, "sinkbig") == 0
    assert client.get("/v1/sinks/big").json()["last_batch_id"] is None
    # a transactional JSON produce of such a message is refused when it is staged
    r = client.post("/v1/topics/sinkbig/messages",
                    json={"transactional": True, "messages": [{"body": "x", "tags": "t" * 40_000}]})
    assert r.status_code == 400 and "properties take" in r.json()["message"]
