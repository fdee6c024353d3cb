"""The broker's web console in headless Chromium: every view against a real broker with real messages."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import expect

from .conftest import Stack, loaded, open_view, shot


def make_topic(http: httpx.Client, name: str, queues: int) -> None:
    assert http.post("/v1/topics", json={"name": name, "queues": queues}).status_code in (200, 201)


def send(http: httpx.Client, topic: str, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    answer = http.post(f"/v1/topics/{topic}/messages", json={"messages": messages})
    assert answer.status_code == 200, answer.text
    return list(answer.json()["results"])


def rows(page: Any, selector: str) -> list[str]:
    return [str(t) for t in page.locator(selector).all_inner_texts()]


def test_overview_shows_role_registration_and_mirror(page: Any, stack: Stack, tmp_path: Path) -> None:
    text = open_view(page, stack.broker.url + "/console", "overview")
    assert "console-broker (id 0)" in text and "console-cluster" in text
    assert "master" in text and "async_master" in text  # role and HA role
    assert f"http://127.0.0.1:{stack.namesrv.port}\tup" in text  # registered with the NameServer
    assert "Mirrored up to" in text and "Mirror lag" in text
    expect(page.locator("#subtitle")).to_have_text("console-broker · master · console-cluster")
    shot(page, tmp_path / "overview.png")


def test_topics_view_lists_queues_with_offsets(page: Any, stack: Stack, tmp_path: Path) -> None:
    make_topic(stack.http, "con-topics", 2)
    send(stack.http, "con-topics", [{"body": f"m{i}", "queue_id": 0} for i in range(3)]
         + [{"body": "n", "queue_id": 1} for _ in range(5)])
    open_view(page, stack.broker.url + "/console", "topics")
    card = "details[data-topic='con-topics']"
    assert "con-topics 2 queues, perm rw, 8 messages" in page.inner_text(f"{card} summary")
    assert rows(page, f"{card} tbody tr") == ["0\t0\t3\t3", "1\t0\t5\t5"]
    shot(page, tmp_path / "topics.png")


def _search(page: Any, mode: str, **fields: str) -> str:
    page.select_option("#search-form select[name=mode]", mode)
    for name, value in fields.items():
        page.fill(f"#search-form [name={name}]", value)
    page.click("#search-form button[type=submit]")
    page.wait_for_function("!document.querySelector('#search-results').innerText.includes('searching')")
    return str(page.inner_text("#search-results"))


def test_message_search_by_key_id_and_time(page: Any, stack: Stack, tmp_path: Path) -> None:
    make_topic(stack.http, "con-search", 2)
    text_id = send(stack.http, "con-search", [{"body": "hello from the console test", "keys": ["order-42"],
                                               "tags": "TagA"}])[0]["msg_id"]
    raw = stack.http.post("/v1/topics/con-search/messages?key=bin-1", content=b"\x00\x01\xfe\xff",
                          headers={"content-type": "application/octet-stream"})
    assert raw.status_code == 200, raw.text
    binary_id = raw.json()["results"][0]["msg_id"]
    open_view(page, stack.broker.url + "/console", "messages")

    found = _search(page, "key", topic="con-search", key="order-42")
    assert "1 message(s)" in found and text_id in found
    assert "text, 27 B: hello from the console test" in found and "TagA" in found

    found = _search(page, "id", msg_id=binary_id)
    assert "hex, 4 B: 00 01 fe ff" in found and "bin-1" in found

    found = _search(page, "time", topic="con-search", key="", msg_id="")
    assert "2 message(s)" in found and "hello from the console test" in found and "00 01 fe ff" in found
    shot(page, tmp_path / "search.png")

    assert "a search by key needs: key" in _search(page, "key", topic="con-search", key="")
    found = _search(page, "id", msg_id="7F0000010000000100000000FFFFFFFF")
    assert "404 message_not_found: no CommitLog segment holds offset 4294967295" in found  # the API's own words


def test_groups_view_shows_lag_and_dead_letters(page: Any, stack: Stack, tmp_path: Path) -> None:
    make_topic(stack.http, "con-groups", 2)
    send(stack.http, "con-groups", [{"body": "a", "queue_id": 0} for _ in range(4)])
    ok = stack.http.put("/v1/groups/con-g/offsets", json={"topic": "con-groups", "offsets": {"0": 1, "1": 0}})
    assert ok.status_code == 200, ok.text
    open_view(page, stack.broker.url + "/console", "groups")
    card = "details[data-group='con-g']"
    assert rows(page, f"{card} tbody tr") == ["con-groups\t0\t1\t4\t3", "con-groups\t1\t0\t0\t0"]

    send(stack.http, "con-groups", [{"body": "b", "queue_id": 0} for _ in range(2)])
    popped = stack.http.post("/v1/groups/con-pop/pop", json={"topic": "con-groups", "max_messages": 1})
    assert popped.status_code == 200 and popped.json()["messages"], popped.text
    dead = stack.http.post("/v1/groups/con-pop/retry",
                           json={"msg_id": popped.json()["messages"][0]["msg_id"], "delay_level": -1})
    assert dead.status_code == 200, dead.text
    page.click("#refresh")
    text = loaded(page, "groups")
    assert rows(page, f"{card} tbody tr")[0] == "con-groups\t0\t1\t6\t5"  # lag grew with the new messages
    pop_line = page.inner_text("details[data-group='con-pop'] .pop")
    assert "Popped: 1" in pop_line and "%DLQ%con-pop: 1 messages" in pop_line, pop_line
    assert "con-g" in text
    shot(page, tmp_path / "groups.png")


def test_produce_form_shows_the_send_result(page: Any, stack: Stack, tmp_path: Path) -> None:
    make_topic(stack.http, "con-produce", 1)
    open_view(page, stack.broker.url + "/console", "produce")
    page.fill("#produce-form [name=topic]", "con-produce")
    page.fill("#produce-form [name=key]", "k-form")
    page.fill("#produce-form [name=tags]", "FormTag")
    page.fill("#produce-form [name=body]", "typed in the console")
    page.click("#produce-form button[type=submit]")
    result = page.wait_for_selector("#produce-result .ok").inner_text()
    assert "SendResult: SEND_OK" in result and "Queue offset\t0" in result
    msg_id = page.inner_text("#produce-result code")
    stored = stack.http.get(f"/v1/messages/{msg_id}").json()
    assert stored["body"] == "typed in the console" and stored["keys"] == ["k-form"] and stored["tags"] == "FormTag"
    shot(page, tmp_path / "produce.png")

    page.fill("#produce-form [name=topic]", "bad topic!")
    page.click("#produce-form button[type=submit]")
    error = page.wait_for_selector("#produce-result .error").inner_text()
    assert error.startswith("400 bad_topic_name: topic name 'bad topic!' is invalid")


_PRODUCING = r"() => /^[1-9][0-9,]*\.\d msg\/s$/.test(document.querySelector('#produce-rate').innerText)"


def test_rates_view_shows_live_produce_rate(page: Any, stack: Stack, tmp_path: Path) -> None:
    make_topic(stack.http, "con-rates", 1)
    open_view(page, stack.broker.url + "/console?poll_ms=400", "rates")
    assert "Delta mirror lag" in page.inner_text("#view")
    stop = threading.Event()

    def produce() -> None:
        with httpx.Client(base_url=stack.broker.url, timeout=30) as http:
            while not stop.is_set():
                send(http, "con-rates", [{"body": "x"} for _ in range(50)])
                stop.wait(0.05)

    producer = threading.Thread(target=produce)
    producer.start()
    try:
        page.wait_for_function(_PRODUCING)
        assert "con-rates" in page.inner_text("#view")  # the per-topic table
        shot(page, tmp_path / "rates.png")
    finally:
        stop.set()
        producer.join(30)


def test_console_files_are_served_and_nothing_else(stack: Stack) -> None:
    page = stack.http.get("/console")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert '<script type="module" src="/console/main.js">' in page.text
    script = stack.http.get("/console/api.js")
    assert script.headers["content-type"].startswith("text/javascript") and "export async function api" in script.text
    for bad in ("/console/nope.js", "/console/..%2Fapp.py", "/console/console.py"):
        answer = stack.http.get(bad)
        assert answer.status_code == 404 and answer.json()["error"] == "not_found", bad
    assert "/console" not in stack.http.get("/openapi.json").json()["paths"]  # not part of the API
