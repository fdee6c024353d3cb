"""Produce and pull round trips in JSON, raw bytes and Arrow, against a real server."""

from __future__ import annotations

import base64
import time

import httpx
import pyarrow as pa

ARROW = "application/vnd.apache.arrow.stream"


def _produce(client: httpx.Client, topic: str, messages: list[dict]) -> list[dict]:
    """Produce and wait (bounded) until the reput service made them pullable."""
    resp = client.post(f"/v1/topics/{topic}/messages", json={"messages": messages})
    assert resp.status_code == 200, resp.text
    results = resp.json()["results"]
    wait_visible(client, topic, results)
    return results


def wait_visible(client: httpx.Client, topic: str, results: list[dict], timeout_s: float = 10.0) -> None:
    want: dict[int, int] = {}
    for r in results:
        want[r["queue_id"]] = max(want.get(r["queue_id"], 0), r["queue_offset"] + 1)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        have = {q["queue_id"]: q["max_offset"] for q in client.get(f"/v1/topics/{topic}/queues").json()}
        if all(have.get(q, 0) >= n for q, n in want.items()):
            return
        time.sleep(0.01)
    raise AssertionError(f"messages not visible after {timeout_s}s: want {want}")


def _pull(client: httpx.Client, topic: str, qid: int, offset: int, **params: object) -> dict:
    resp = client.get(f"/v1/topics/{topic}/queues/{qid}/messages", params={"offset": offset, **params})
    assert resp.status_code == 200, resp.text
    return resp.json()


def test_json_round_trip_keeps_body_keys_tags_and_properties(client: httpx.Client) -> None:
    sent = [
        {"body": "héllo", "keys": ["k1"], "tags": "TagA", "properties": {"a": "1"}, "queue_id": 2},
        {"body_base64": base64.b64encode(b"\x00\xffbin").decode(), "queue_id": 2},
    ]
    results = _produce(client, "orders", sent)
    assert [r["queue_id"] for r in results] == [2, 2]
    assert [r["queue_offset"] for r in results] == [0, 1]
    page = _pull(client, "orders", 2, 0)
    assert page["status"] == "FOUND" and page["next_offset"] == 2 and page["max_offset"] == 2
    first, second = page["messages"]
    assert first["body"] == "héllo" and first["keys"] == ["k1"] and first["tags"] == "TagA"
    assert first["properties"] == {"a": "1"} and first["msg_id"] == results[0]["msg_id"]
    assert first["offset"] == 0 and first["topic"] == "orders" and first["store_timestamp"] > 0
    assert base64.b64decode(second["body_base64"]) == b"\x00\xffbin" and "body" not in second


def test_auto_created_topic_is_listed_with_default_queues(client: httpx.Client) -> None:
    _produce(client, "auto", [{"body": "x"}])
    topics = client.get("/v1/topics").json()
    listed = {t["name"]: t for t in topics}
    assert {k: listed["auto"][k] for k in ("queues", "perm")} == {"queues": 4, "perm": "rw"}
    assert listed["auto"]["table"]["mode"] == "off"  # an auto-created topic has no table of its own
    assert all(not t["name"].startswith("RMQ_SYS_") for t in topics)
    queues = client.get("/v1/topics/auto/queues").json()
    assert [q["queue_id"] for q in queues] == [0, 1, 2, 3]
    assert sum(q["max_offset"] for q in queues) == 1


def test_same_key_goes_to_one_queue_in_order(client: httpx.Client) -> None:
    msgs = [{"body": f"{key}-{i}", "keys": [key]} for i in range(20) for key in ("a", "b", "c")]
    results = _produce(client, "keyed", msgs)
    for key in ("a", "b", "c"):
        queues = {r["queue_id"] for m, r in zip(msgs, results) if m["keys"] == [key]}
        assert len(queues) == 1
        page = _pull(client, "keyed", queues.pop(), 0, max_messages=100)
        bodies = [m["body"] for m in page["messages"] if m["keys"] == [key]]
        assert bodies == [f"{key}-{i}" for i in range(20)]


def test_unkeyed_messages_spread_round_robin(client: httpx.Client) -> None:
    results = _produce(client, "spread", [{"body": str(i)} for i in range(8)])
    assert sorted(r["queue_id"] for r in results) == [0, 0, 1, 1, 2, 2, 3, 3]


def test_raw_octet_stream_message_with_query_keys(client: httpx.Client) -> None:
    resp = client.post("/v1/topics/raw/messages?key=k9&tags=T&queue_id=1", content=b"\xff\x02raw",
                       headers={"Content-Type": "application/octet-stream"})
    assert resp.status_code == 200, resp.text
    (result,) = resp.json()["results"]
    wait_visible(client, "raw", [result])
    msg = _pull(client, "raw", 1, 0)["messages"][0]
    assert result["queue_id"] == 1 and msg["keys"] == ["k9"] and msg["tags"] == "T"
    assert base64.b64decode(msg["body_base64"]) == b"\xff\x02raw"


def _arrow_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def test_arrow_bulk_produce_and_arrow_pull(client: httpx.Client) -> None:
    table = pa.table({
        "body": pa.array([f"m{i}".encode() for i in range(500)], pa.binary()),
        "keys": pa.array([[f"k{i}"] for i in range(500)], pa.list_(pa.string())),
        "tags": pa.array(["even" if i % 2 == 0 else "odd" for i in range(500)]),
        "queue_id": pa.array([0] * 500, pa.int32()),
    })
    resp = client.post("/v1/topics/bulk/messages", content=_arrow_bytes(table), headers={"Content-Type": ARROW})
    assert resp.status_code == 200, resp.text
    assert len(resp.json()["results"]) == 500
    wait_visible(client, "bulk", resp.json()["results"])
    resp = client.get("/v1/topics/bulk/queues/0/messages", params={"offset": 0, "max_messages": 10_000},
                      headers={"Accept": ARROW})
    assert resp.headers["content-type"] == ARROW
    assert resp.headers["x-sparkmq-status"] == "FOUND"
    assert resp.headers["x-sparkmq-next-offset"] == "500"
    assert resp.headers["x-sparkmq-min-offset"] == "0" and resp.headers["x-sparkmq-max-offset"] == "500"
    got = pa.ipc.open_stream(resp.content).read_all()
    assert got.column_names == ["topic", "queue_id", "offset", "msg_id", "keys", "tags", "properties", "body",
                                "born_timestamp", "store_timestamp"]
    assert got.schema.field("store_timestamp").type == pa.timestamp("ms", tz="UTC")
    assert got.schema.field("queue_id").type == pa.int32()
    assert got.column("offset").to_pylist() == list(range(500))
    assert got.column("body").to_pylist()[:2] == [b"m0", b"m1"]
    assert got.column("keys").to_pylist()[3] == ["k3"]


def test_arrow_pull_of_empty_queue_still_has_schema(client: httpx.Client) -> None:
    client.post("/v1/topics", json={"name": "empty", "queues": 2})
    resp = client.get("/v1/topics/empty/queues/1/messages", params={"offset": 0}, headers={"Accept": ARROW})
    assert resp.status_code == 200
    assert resp.headers["x-sparkmq-status"] == "NO_NEW_MESSAGE"
    table = pa.ipc.open_stream(resp.content).read_all()
    assert table.num_rows == 0 and "body" in table.column_names
    ahead = _pull(client, "empty", 1, 5)
    assert ahead["status"] == "OFFSET_OVERFLOW" and ahead["next_offset"] == 0


def test_tag_filter_and_offset_statuses(client: httpx.Client) -> None:
    _produce(client, "tagged", [{"body": str(i), "tags": "A" if i % 3 == 0 else "B", "queue_id": 0}
                                for i in range(9)])
    page = _pull(client, "tagged", 0, 0, tags="A", max_messages=100)
    assert [m["body"] for m in page["messages"]] == ["0", "3", "6"]
    assert _pull(client, "tagged", 0, 0, tags="A||B", max_messages=100)["next_offset"] == 9
    overflow = _pull(client, "tagged", 0, 50)
    assert overflow["status"] == "OFFSET_OVERFLOW" and overflow["messages"] == []
    assert _pull(client, "tagged", 0, 9)["status"] == "NO_NEW_MESSAGE"


def test_pull_page_sizes_are_capped(client: httpx.Client) -> None:
    _produce(client, "capped", [{"body": "x", "queue_id": 0} for _ in range(1200)])
    assert len(_pull(client, "capped", 0, 0)["messages"]) == 32
    assert len(_pull(client, "capped", 0, 0, max_messages=1000)["messages"]) == 1000
    over = client.get("/v1/topics/capped/queues/0/messages", params={"offset": 0, "max_messages": 5000})
    assert over.status_code == 400 and "max_pull_messages_json" in over.json()["message"]  # past the cap: 400


def test_lookup_by_id_key_and_time(client: httpx.Client) -> None:
    before = int(time.time() * 1000) - 1
    (r,) = _produce(client, "lookup", [{"body": "find me", "keys": ["order-42"], "queue_id": 1}])
    by_id = client.get(f"/v1/messages/{r['msg_id']}").json()
    assert by_id["body"] == "find me"
    by_key = client.get("/v1/topics/lookup/messages", params={"key": "order-42"}).json()["messages"]
    assert [m["msg_id"] for m in by_key] == [r["msg_id"]]
    at = client.get("/v1/topics/lookup/queues/1/offset", params={"timestamp_ms": before}).json()
    assert at == {"offset": 0}
    future = client.get("/v1/topics/lookup/queues/1/offset", params={"timestamp_ms": before + 10**9}).json()
    assert future == {"offset": 1}


def test_arrow_page_matches_the_json_page(client: httpx.Client) -> None:
    sent = [{"body_base64": base64.b64encode(bytes([i, 255])).decode(), "keys": [f"k{i}", "x"], "queue_id": 0,
             "tags": None if i % 2 else "T", "properties": {"p": str(i), "ü": "ß"} if i % 3 else {}}
            for i in range(30)]
    _produce(client, "same", sent)
    page = _pull(client, "same", 0, 5, max_messages=20, tags="*")
    resp = client.get("/v1/topics/same/queues/0/messages", params={"offset": 5, "max_messages": 20},
                      headers={"Accept": ARROW})
    rows = pa.ipc.open_stream(resp.content).read_all().to_pylist()
    assert len(rows) == len(page["messages"]) == 20
    assert resp.headers["x-sparkmq-next-offset"] == str(page["next_offset"]) == "25"
    for row, msg in zip(rows, page["messages"]):
        assert row["msg_id"] == msg["msg_id"] and row["offset"] == msg["offset"]
        assert row["keys"] == msg["keys"] and row["tags"] == msg["tags"]
        assert dict(row["properties"]) == msg["properties"]
        assert row["body"] == base64.b64decode(msg["body_base64"])
        assert int(row["store_timestamp"].timestamp() * 1000) == msg["store_timestamp"]
        assert client.get(f"/v1/messages/{msg['msg_id']}").json() == msg  # the per-record read agrees


def test_reads_see_every_answered_produce_at_once(client: httpx.Client) -> None:
    """Read your writes: no waiting loop between a produce and the pull, lookup or offsets after it."""
    client.post("/v1/topics", json={"name": "ryw", "queues": 2})
    for i in range(60):
        resp = client.post("/v1/topics/ryw/messages",
                           json={"messages": [{"body": f"m{i}-{j}", "keys": [f"k{i}"]} for j in range(50)]})
        assert resp.status_code == 200, resp.text
        last = resp.json()["results"][-1]
        qid, off = last["queue_id"], last["queue_offset"]
        page = _pull(client, "ryw", qid, off, max_messages=1)
        assert page["status"] == "FOUND" and page["messages"][0]["body"] == f"m{i}-49", (i, page)
        queues = {q["queue_id"]: q["max_offset"] for q in client.get("/v1/topics/ryw/queues").json()}
        assert queues[qid] == off + 1
        if i % 10 == 0:
            found = client.get("/v1/topics/ryw/messages", params={"key": f"k{i}", "max": 100}).json()["messages"]
            assert len(found) == 50
