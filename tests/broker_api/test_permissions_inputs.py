"""The one query parser, caps, content types, message ids and names, found by hand (issue 30).

Each test sends what a careless or hostile client sends to a real broker and
asserts the documented 4xx naming what was wrong, and that nothing else was
served in its place.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator

import httpx
import pyarrow as pa
import pytest

from broker_api.model.topics import CLIENT_TOPIC_PATTERN, GROUP_NAME_PATTERN
from tests.broker_api.conftest import FAST_ENV
from tests.conftest import _TEST_BROKER_ENV, BrokerProcess, _free_port


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    """One broker for the module (each test uses its own topics)."""
    base = tmp_path_factory.mktemp("inputs")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARKMQ_")}
    env.update({**_TEST_BROKER_ENV, **FAST_ENV})
    broker = BrokerProcess(base / "data", _free_port(), env, base / "broker.log").start()
    try:
        with httpx.Client(base_url=broker.url, timeout=30) as c:
            yield c
    finally:
        broker.stop()


def _error(resp: httpx.Response, status: int, code: str | None = None) -> str:
    assert resp.status_code == status, resp.text
    body = resp.json()
    if code is not None:
        assert body["error"] == code, body
    return str(body["message"])


def _topic(client: httpx.Client, name: str, queues: int = 1) -> None:
    client.post("/v1/topics", json={"name": name, "queues": queues}).raise_for_status()


def test_a_repeated_or_unknown_query_parameter_is_400_naming_it(client: httpx.Client) -> None:
    _topic(client, "orders")
    _topic(client, "secret")
    client.put("/v1/groups/g1/offsets", json={"topic": "secret", "offsets": {"0": 7}}).raise_for_status()
    message = _error(client.get("/v1/groups/g1/offsets?topic=orders&topic=secret"), 400, "bad_request")
    assert "'topic'" in message and "more than once" in message
    message = _error(client.get("/v1/topics/orders/queues/0/messages?offset=0&group=g1&group=g9"), 400)
    assert "'group'" in message
    message = _error(client.get("/v1/topics/orders/queues/0/messages?offset=0&max_message=5"), 400)
    assert "'max_message'" in message and "max_messages" in message and "wait_ms" in message  # the valid ones
    assert "'bogus'" in _error(client.get("/v1/topics?bogus=1"), 400)
    # names are decoded once, before the check: t%6Fpic *is* topic, t%256Fpic is the unknown "t%6Fpic"
    assert client.get("/v1/groups/g1/offsets?t%6Fpic=secret").json()["offsets"] == {"0": 7}
    assert "'t%6Fpic'" in _error(client.get("/v1/groups/g1/offsets?topic=orders&t%256Fpic=secret"), 400)
    assert "'topic'" in _error(client.get("/v1/groups/g1/offsets?topic=orders&t%6Fpic=secret"), 400)
    raw = client.post("/v1/topics/orders/messages?key=a&key=b", content=b"x",
                      headers={"Content-Type": "application/octet-stream"})
    assert raw.status_code == 200, raw.text  # a raw message's keys may repeat


def test_caps_are_400_past_their_limits_and_a_pop_does_not_wait_past_its_cap(client: httpx.Client) -> None:
    _topic(client, "capped")
    client.post("/v1/topics/capped/messages", json={"messages": [{"body": "a"}, {"body": "b"}]}).raise_for_status()
    pull = "/v1/topics/capped/queues/0/messages?offset=0"
    assert "max_messages=0" in _error(client.get(pull + "&max_messages=0"), 400)
    assert "max_pull_messages_json" in _error(client.get(pull + "&max_messages=100000"), 400)
    assert "max_wait_ms" in _error(client.get(pull + "&wait_ms=99999999"), 400)
    assert len(client.get(pull + "&max_messages=1").json()["messages"]) == 1
    started = time.monotonic()
    message = _error(client.post("/v1/groups/gc/pop", json={"topic": "nothing-here", "wait_ms": 99_999_999}), 400)
    assert "max_wait_ms" in message and time.monotonic() - started < 5


@pytest.mark.parametrize("ctype", ["text/plain", "application/x-www-form-urlencoded"])
def test_a_json_body_sent_as_text_or_form_is_415(client: httpx.Client, ctype: str) -> None:
    headers = {"Content-Type": ctype}
    _error(client.post("/v1/topics", content=b'{"name": "ct", "queues": 1}', headers=headers), 415,
           "unsupported_media_type")
    _topic(client, "ct")
    _error(client.post("/v1/topics/ct/messages", content=b'{"messages": [{"body": "x"}]}', headers=headers), 415)
    _error(client.post("/v1/groups/g/pop", content=b'{"topic": "ct"}', headers=headers), 415)
    _error(client.put("/v1/groups/g/offsets", content=b'{"topic": "ct", "offsets": {"0": 0}}', headers=headers), 415)
    assert client.get("/v1/topics/ct/queues").json()[0]["max_offset"] == 0


def test_a_message_id_naming_another_broker_is_404_not_another_message(client: httpx.Client) -> None:
    _topic(client, "ids")
    sent = client.post("/v1/topics/ids/messages", json={"messages": [{"body": "mine"}]}).json()["results"][0]
    msg_id = sent["msg_id"]
    assert client.get(f"/v1/messages/{msg_id}").json()["body"] == "mine"
    for host in ("0" * 16, "0A0000FE00002A9F"):  # no broker; another broker's address, same offset
        other = host + msg_id[16:]
        _error(client.get(f"/v1/messages/{other}"), 404, "message_not_found")
        _error(client.post("/v1/groups/gi/retry", json={"msg_id": other}), 404, "message_not_found")
    assert client.get(f"/v1/messages/{msg_id.lower()}").status_code == 200


def test_names_match_whole_strings_in_code_and_in_the_document(client: httpx.Client) -> None:
    assert "audit-secret" in _error(client.post("/v1/topics", json={"name": "audit-secret\n"}), 400, "bad_topic_name")
    assert all(t["name"] != "audit-secret\n" for t in client.get("/v1/topics").json())
    _error(client.get("/v1/groups/g%0A"), 400)
    _error(client.post("/v1/groups/g1/ack", json={"receipts": ["1:2:3\n"]}), 400, "bad_receipt")
    doc = client.get("/openapi.json").json()
    path_topic = next(p["schema"]["pattern"] for p in doc["paths"]["/v1/topics/{topic}"]["get"]["parameters"]
                      if p["name"] == "topic")
    assert path_topic == CLIENT_TOPIC_PATTERN
    for reserved in ("SCHEDULE_TOPIC_XXXX", "rmq_sys_wheel_timer", "RMQ_SYS_TRANS_HALF_TOPIC"):
        assert re.search(path_topic, reserved) is None, reserved
        assert re.search(doc["components"]["schemas"]["TopicCreate"]["properties"]["name"]["pattern"],
                         reserved) is None
    assert re.search(path_topic, "orders") and re.search(GROUP_NAME_PATTERN, "g1")


def _bad_utf8_strings(n: int) -> pa.Array:
    good = pa.array(["k"] * n, pa.binary())
    values = pa.py_buffer(b"\xff" * n)
    return pa.Array.from_buffers(pa.string(), n, [None, good.buffers()[1], values])


@pytest.mark.parametrize("column", ["keys", "tags"])
def test_an_arrow_produce_with_invalid_utf8_keys_or_tags_is_400(client: httpx.Client, column: str) -> None:
    _topic(client, "arrow-utf8")
    table = pa.table({"body": pa.array([b"a", b"b"], pa.binary()), column: _bad_utf8_strings(2)})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    for query in ("", "?transactional=true"):
        resp = client.post(f"/v1/topics/arrow-utf8/messages{query}", content=sink.getvalue().to_pybytes(),
                           headers={"Content-Type": "application/vnd.apache.arrow.stream"})
        assert f"'{column}'" in _error(resp, 400, "bad_request")
    assert client.get("/v1/topics/arrow-utf8/queues").json()[0]["max_offset"] == 0


def test_replay_dlq_of_a_raw_table_is_a_clear_4xx(client: httpx.Client) -> None:
    made = client.post("/v1/topics", json={"name": "rawtab", "queues": 1, "table": {"mode": "raw"}})
    assert made.status_code == 201, made.text
    resp = client.post("/v1/topics/rawtab/table/replay-dlq")
    assert 400 <= resp.status_code < 500, resp.text
    assert "raw" in resp.json()["message"]
