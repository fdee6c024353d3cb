"""Arrow produce by columns: the same answers, queues and stored messages as the per-message path."""

from __future__ import annotations

import zlib

import httpx
import pyarrow as pa

from tests.broker_api.test_produce_pull import wait_visible

ARROW = "application/vnd.apache.arrow.stream"


def _arrow(columns: dict[str, pa.Array]) -> bytes:
    table = pa.table(columns)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def _post(client: httpx.Client, topic: str, body: bytes) -> httpx.Response:
    return client.post(f"/v1/topics/{topic}/messages", content=body, headers={"Content-Type": ARROW})


def _bodies(client: httpx.Client, topic: str, qid: int) -> list[str]:
    page = client.get(f"/v1/topics/{topic}/queues/{qid}/messages", params={"offset": 0, "max_messages": 1000})
    return [m["body"] for m in page.json()["messages"]]


def test_bodies_only_go_round_robin_in_request_order(client: httpx.Client) -> None:
    bodies = [f"m{i:03d}" for i in range(10)] + ["a longer body"] * 3
    resp = _post(client, "rr", _arrow({"body": pa.array(bodies, pa.string())}))
    assert resp.status_code == 200, resp.text
    doc = resp.json()
    assert doc["status"] == "SEND_OK" and len(doc["results"]) == 13
    qids = [r["queue_id"] for r in doc["results"]]
    assert all((b - a) % 4 == 1 for a, b in zip(qids, qids[1:]))  # one queue after the other
    wait_visible(client, "rr", doc["results"])
    for r, body in zip(doc["results"], bodies):
        got = client.get(f"/v1/messages/{r['msg_id']}").json()
        assert got["body"] == body and got["queue_id"] == r["queue_id"] and got["offset"] == r["queue_offset"]
    assert _bodies(client, "rr", qids[0]) == bodies[0::4]


def test_keys_pick_the_same_queues_as_json_and_are_indexed(client: httpx.Client) -> None:
    keys = [f"order-{i}" for i in range(40)]
    arrow = _arrow({"body": pa.array([k.encode() for k in keys], pa.binary()),
                    "keys": pa.array([[k] for k in keys], pa.list_(pa.string())), "tags": pa.array(["paid"] * 40)})
    doc = _post(client, "keyed", arrow).json()
    assert [r["queue_id"] for r in doc["results"]] == [zlib.crc32(k.encode()) % 4 for k in keys]
    json_doc = client.post("/v1/topics/keyed/messages",
                           json={"messages": [{"body": k, "keys": [k]} for k in keys]}).json()
    assert [r["queue_id"] for r in json_doc["results"]] == [r["queue_id"] for r in doc["results"]]
    wait_visible(client, "keyed", json_doc["results"])
    found = client.get("/v1/topics/keyed/messages", params={"key": "order-7"}).json()
    assert {m["body"] for m in found["messages"]} == {"order-7"} and len(found["messages"]) == 2
    first = client.get(f"/v1/messages/{doc['results'][7]['msg_id']}").json()
    assert first["tags"] == "paid" and first["keys"] == ["order-7"]


def test_one_queue_and_large_batches(client: httpx.Client) -> None:
    n = 5000
    arrow = _arrow({"body": pa.array([b"x" * 100] * n, pa.binary()), "queue_id": pa.array([2] * n, pa.int32())})
    resp = _post(client, "bulk", arrow)
    assert resp.status_code == 200, resp.text
    doc = resp.json()
    assert {r["queue_id"] for r in doc["results"]} == {2}
    assert [r["queue_offset"] for r in doc["results"]] == list(range(n))


def test_limits_and_bad_rows_give_the_precise_errors(client: httpx.Client) -> None:
    big = _arrow({"body": pa.array([b"ok", b"ok", b"ok", b"y" * (5 << 20)], pa.binary())})
    resp = _post(client, "limits", big)
    assert resp.status_code == 413 and "message 3 has a" in resp.json()["message"], resp.text
    bad_key = _arrow({"body": pa.array(["a", "b"]), "keys": pa.array(["fine", "bad\x01key"])})
    resp = _post(client, "limits", bad_key)
    assert resp.status_code == 400 and "key" in resp.json()["message"], resp.text
    assert _post(client, "limits", _arrow({"body": pa.array(["a"]), "queue_id": pa.array([9])})).status_code == 404
    null_body = _arrow({"body": pa.array([b"a", None], pa.binary())})
    resp = _post(client, "limits", null_body)
    assert resp.status_code == 400 and "row 1 has a null body" in resp.json()["message"]
    queues = {q["queue_id"]: q["max_offset"] for q in client.get("/v1/topics/limits/queues").json()}
    assert sum(queues.values()) == 0  # nothing of the refused requests was stored


def test_json_batches_of_plain_bodies_round_trip_like_before(client: httpx.Client) -> None:
    texts = [f"plain-{i}" for i in range(100)] + ["ünïcode ✓"] * 10
    resp = client.post("/v1/topics/plainjson/messages", json={"messages": [{"body": t} for t in texts]})
    assert resp.status_code == 200, resp.text
    results = resp.json()["results"]
    qids = [r["queue_id"] for r in results]
    assert all((b - a) % 4 == 1 for a, b in zip(qids, qids[1:]))
    wait_visible(client, "plainjson", results)
    assert _bodies(client, "plainjson", qids[0]) == texts[0::4]
    got = client.get(f"/v1/messages/{results[-1]['msg_id']}").json()
    assert got["body"] == "ünïcode ✓"
    too_big = client.post("/v1/topics/plainjson/messages",
                          json={"messages": [{"body": "a"}] * 70 + [{"body": "b" * (5 << 20)}]})
    assert too_big.status_code == 413 and "message 70 has a" in too_big.json()["message"]
