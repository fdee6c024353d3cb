"""Every documented error answers a precise status and {"error", "message"}."""

from __future__ import annotations

from typing import Any

import httpx


def _assert_error(resp: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert set(body) == {"error", "message"}
    assert body["error"] == code
    assert len(body["message"]) > 20
    return body


def test_unknown_topic_with_auto_create_off(fast_broker: Any) -> None:
    b = fast_broker({"SPARKMQ_BROKER__AUTO_CREATE_TOPICS": "false"})
    with httpx.Client(base_url=b.url) as c:
        body = _assert_error(c.post("/v1/topics/nope/messages", json={"messages": [{"body": "x"}]}),
                             404, "topic_not_found")
        assert "POST /v1/topics" in body["message"]
        _assert_error(c.get("/v1/topics/nope/queues/0/messages", params={"offset": 0}), 404, "topic_not_found")
        _assert_error(c.get("/v1/topics/nope"), 404, "topic_not_found")
        assert c.post("/v1/topics", json={"name": "yes", "queues": 2}).status_code == 201
        assert c.post("/v1/topics/yes/messages", json={"messages": [{"body": "x"}]}).status_code == 200


def test_bad_offsets_and_queues(client: httpx.Client) -> None:
    client.post("/v1/topics", json={"name": "t", "queues": 2})
    pull = "/v1/topics/t/queues/{}/messages"
    _assert_error(client.get(pull.format(0), params={"offset": "abc"}), 400, "bad_offset")
    _assert_error(client.get(pull.format(0), params={"offset": -1}), 400, "bad_offset")
    _assert_error(client.get(pull.format(0)), 400, "bad_offset")
    _assert_error(client.get(pull.format(5), params={"offset": 0}), 404, "queue_not_found")
    _assert_error(client.get(pull.format("x"), params={"offset": 0}), 400, "bad_queue_id")
    _assert_error(client.put("/v1/groups/g/offsets", json={"topic": "t", "offsets": {"0": -3}}), 400, "bad_offset")
    _assert_error(client.put("/v1/groups/g/offsets", json={"topic": "t", "offsets": {"7": 1}}),
                  404, "queue_not_found")
    _assert_error(client.post("/v1/topics/t/messages", json={"messages": [{"body": "x", "queue_id": 9}]}),
                  404, "queue_not_found")


def test_oversized_message_and_batch(fast_broker: Any) -> None:
    b = fast_broker({"SPARKMQ_STORE__MAX_MESSAGE_BYTES": "10000", "SPARKMQ_LIMITS__MAX_BATCH_MESSAGES": "10",
                     "SPARKMQ_LIMITS__MAX_REQUEST_BYTES": "200000"})
    with httpx.Client(base_url=b.url) as c:
        big = {"messages": [{"body": "x" * 20_000}]}
        _assert_error(c.post("/v1/topics/t/messages", json=big), 413, "message_too_large")
        many = {"messages": [{"body": "x"}] * 11}
        _assert_error(c.post("/v1/topics/t/messages", json=many), 413, "batch_too_large")
        huge = b"x" * 300_000
        _assert_error(c.post("/v1/topics/t/messages", content=huge,
                             headers={"Content-Type": "application/octet-stream"}), 413, "batch_too_large")
        # Nothing of the refused requests was stored.
        queues = c.get("/v1/topics/t/queues").json()
        assert sum(q["max_offset"] for q in queues) == 0


def test_bad_json_and_bad_messages(client: httpx.Client) -> None:
    url = "/v1/topics/t/messages"
    _assert_error(client.post(url, content=b"{not json", headers={"Content-Type": "application/json"}),
                  400, "bad_json")
    _assert_error(client.post(url, json={"nomessages": []}), 400, "bad_request")
    _assert_error(client.post(url, json={"messages": []}), 400, "bad_request")
    _assert_error(client.post(url, json={"messages": [{"keys": ["k"]}]}), 400, "bad_message")
    _assert_error(client.post(url, json={"messages": [{"body": 5}]}), 400, "bad_message")
    _assert_error(client.post(url, json={"messages": [{"body_base64": "!!!"}]}), 400, "bad_message")
    _assert_error(client.post(url, content=b"x", headers={"Content-Type": "image/png"}), 415,
                  "unsupported_media_type")
    _assert_error(client.post("/v1/topics", content=b"{oops", headers={"Content-Type": "application/json"}),
                  400, "bad_json")
    _assert_error(client.post("/v1/topics", json={"queues": 2}), 400, "bad_request")


def test_bad_topic_names(client: httpx.Client) -> None:
    for name in ("..", ".hidden", "a" * 200, "sp ace", "RMQ_SYS_TRANS_HALF_TOPIC", "semi;colon"):
        _assert_error(client.post("/v1/topics", json={"name": name}), 400, "bad_topic_name")
    _assert_error(client.post("/v1/topics/bad%20name/messages", json={"messages": [{"body": "x"}]}),
                  400, "bad_topic_name")
    # Internal topics are neither writable nor readable by clients.
    _assert_error(client.post("/v1/topics/RMQ_SYS_TRANS_HALF_TOPIC/messages", json={"messages": [{"body": "x"}]}),
                  400, "bad_topic_name")
    _assert_error(client.get("/v1/topics/RMQ_SYS_TRANS_HALF_TOPIC/queues/0/messages", params={"offset": 0}),
                  400, "bad_topic_name")


def test_conflicts_permissions_and_unknown_things(client: httpx.Client) -> None:
    assert client.post("/v1/topics", json={"name": "t", "queues": 2}).status_code == 201
    assert client.post("/v1/topics", json={"name": "t", "queues": 2}).status_code == 200
    _assert_error(client.post("/v1/topics", json={"name": "t", "queues": 3}), 409, "topic_exists")
    client.post("/v1/topics", json={"name": "ro", "queues": 1, "perm": "r"})
    _assert_error(client.post("/v1/topics/ro/messages", json={"messages": [{"body": "x"}]}),
                  403, "permission_denied")
    _assert_error(client.get("/v1/messages/00000000000000000000000000FFFFFF"), 404, "message_not_found")
    _assert_error(client.get("/v1/groups/nobody"), 404, "group_not_found")
    _assert_error(client.get("/v1/nowhere"), 404, "not_found")
    _assert_error(client.delete("/v1/topics/missing"), 404, "topic_not_found")
    _assert_error(client.post("/v1/transactions/unknown", json={"action": "commit"}), 404, "transaction_not_found")
    _assert_error(client.post("/v1/transactions/unknown", json={"action": "explode"}), 400, "bad_request")
