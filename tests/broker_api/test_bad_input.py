"""Bad input found by hand: each answer names what was wrong, in the documented error shape."""

from __future__ import annotations

import httpx
import pytest


def _error(resp: httpx.Response, status: int, code: str) -> str:
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"].startswith("application/json")
    body = resp.json()
    assert body["error"] == code, body
    return str(body["message"])


@pytest.mark.parametrize("ctype", ["application/json", "application/json; charset=utf-8", None])
def test_topics_and_produce_take_the_same_json_content_types(client: httpx.Client, ctype: str | None) -> None:
    headers = {"Content-Type": ctype} if ctype else {}
    name = f"ct-{(ctype or 'none').replace('/', '-').replace(';', '').replace(' ', '').replace('=', '-')}"
    r = client.post("/v1/topics", content=b'{"name": "%s", "queues": 1}' % name.encode(), headers=headers)
    assert r.status_code == 201, r.text
    r = client.post(f"/v1/topics/{name}/messages", content=b'{"messages": [{"body": "x"}]}', headers=headers)
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("ctype", ["application/xml", "text/plain", "application/x-www-form-urlencoded"])
def test_topics_and_produce_refuse_other_content_types_alike(client: httpx.Client, ctype: str) -> None:
    client.post("/v1/topics", json={"name": "xml", "queues": 1}).raise_for_status()
    for path, body in (("/v1/topics", b'{"name": "xml2"}'), ("/v1/topics/xml/messages", b'{"messages": []}')):
        message = _error(client.post(path, content=body, headers={"Content-Type": ctype}),
                         415, "unsupported_media_type")
        assert f"'{ctype}'" in message and "application/json" in message


def test_create_topic_bad_bodies(client: httpx.Client) -> None:
    assert "not valid JSON" in _error(client.post("/v1/topics", content=b"{nope"), 400, "bad_json")
    assert "name" in _error(client.post("/v1/topics", json={"queues": 2}), 400, "bad_request")
    assert "queues" in _error(client.post("/v1/topics", json={"name": "q", "queues": 0}), 400, "bad_request")
    assert "JSON object" in _error(client.post("/v1/topics", json=["orders"]), 400, "bad_request")
    _error(client.post("/v1/topics", json={"name": "bad name"}), 400, "bad_topic_name")


def test_a_queue_id_that_is_not_a_number_is_bad_queue_id(client: httpx.Client) -> None:
    client.post("/v1/topics", json={"name": "qid", "queues": 2}).raise_for_status()
    message = _error(client.get("/v1/topics/qid/queues/abc/messages", params={"offset": 0}), 400, "bad_queue_id")
    assert "'abc'" in message
    _error(client.get("/v1/topics/qid/queues/-1/messages", params={"offset": 0}), 400, "bad_queue_id")
    _error(client.get("/v1/topics/qid/queues/abc/offset", params={"timestamp_ms": 0}), 400, "bad_queue_id")
    _error(client.post("/v1/topics/qid/messages", params={"queue_id": "x"}, content=b"raw",
                       headers={"Content-Type": "application/octet-stream"}), 400, "bad_queue_id")
    # the offset keeps its own code
    _error(client.get("/v1/topics/qid/queues/0/messages", params={"offset": "x"}), 400, "bad_offset")


@pytest.mark.parametrize("method,path", [
    ("POST", "/v1/topics/a%2Fb/messages"),
    ("POST", "/v1/topics/a/b/messages"),
    ("GET", "/v1/topics/a/b/queues/0/messages?offset=0"),
    ("GET", "/v1/topics/a/b"),
    ("DELETE", "/v1/topics/a/b"),
    ("GET", "/v1/topics/a/b/queues"),
    ("GET", "/v1/topics/a/b/queues/0/offset?timestamp_ms=0"),
])
def test_a_topic_name_with_a_slash_gets_the_topic_name_rule(client: httpx.Client, method: str, path: str) -> None:
    r = client.request(method, path, content=b'{"messages": [{"body": "x"}]}' if method == "POST" else None)
    message = _error(r, 400, "bad_topic_name")
    assert "'a/b'" in message and "A-Z a-z 0-9" in message


def test_an_unknown_route_is_still_not_found(client: httpx.Client) -> None:
    assert "no route" in _error(client.get("/v1/nothing/here"), 404, "not_found")


def test_a_misspelt_produce_field_is_refused_by_name_and_nothing_is_stored(client: httpx.Client) -> None:
    client.post("/v1/topics", json={"name": "typo", "queues": 1}).raise_for_status()
    # "key" for "keys" and "tag" for "tags": ignored, they would lose the routing and the filter silently
    r = client.post("/v1/topics/typo/messages", json={"messages": [{"body": "a", "keys": ["k"]},
                                                                   {"body": "b", "key": "k", "tag": "t"}]})
    message = _error(r, 400, "bad_message")
    assert "messages[1]" in message and "'key', 'tag'" in message and "keys" in message and "tags" in message
    message = _error(client.post("/v1/topics/typo/messages", json={"messages": [{"body": "c"}], "transactionl": True}),
                     400, "bad_request")
    assert "'transactionl'" in message and "transactional" in message
    assert client.get("/v1/topics/typo/queues").json()[0]["max_offset"] == 0  # neither batch stored a message
    ok = client.post("/v1/topics/typo/messages", json={"messages": [{"body": "d", "keys": "k", "tags": "t"}]})
    assert ok.status_code == 200, ok.text


def test_a_misspelt_field_in_other_json_bodies_is_refused_by_name_and_changes_nothing(client: httpx.Client) -> None:
    client.post("/v1/topics", json={"name": "typo2", "queues": 1}).raise_for_status()
    client.post("/v1/topics/typo2/messages", json={"messages": [{"body": "a"}]}).raise_for_status()
    # "invisible_time_ms" for "invisible_ms": the message would stay hidden for the default minute
    message = _error(client.post("/v1/groups/g2/pop", json={"topic": "typo2", "invisible_time_ms": 200}),
                     400, "bad_request")
    assert "unknown field 'invisible_time_ms'" in message, message
    popped = client.post("/v1/groups/g2/pop", json={"topic": "typo2", "invisible_ms": 200}).json()
    assert len(popped["messages"]) == 1  # the refused pop took nothing
    message = _error(client.put("/v1/groups/g3/offsets", json={"topic": "typo2", "offset": {"0": 1}}),
                     400, "bad_request")
    assert "unknown field 'offset'" in message
    assert client.get("/v1/groups/g3/offsets", params={"topic": "typo2"}).json().get("offsets", {}) in ({}, None)
    message = _error(client.put("/v1/groups/g3", json={"consume_enable": False}), 400, "bad_request")
    assert "unknown field 'consume_enable'" in message


@pytest.mark.parametrize("group", ["", "a b", "-lead", "x" * 121])
def test_a_pull_with_a_group_name_outside_the_rule_is_refused(client: httpx.Client, group: str) -> None:
    """The contract says ``group`` matches the group-name rule; an empty or illegal one was read as no group."""
    client.post("/v1/topics", json={"name": "grp-rule", "queues": 1}).raise_for_status()
    message = _error(client.get("/v1/topics/grp-rule/queues/0/messages", params={"offset": 0, "group": group}),
                     400, "bad_request")
    assert "group name" in message
    client.get("/v1/topics/grp-rule/queues/0/messages", params={"offset": 0, "group": "ok-1"}).raise_for_status()
