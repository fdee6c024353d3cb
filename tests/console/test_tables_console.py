"""The console's Tables view and the table mode in the Topics view, against a real typed Delta table."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx

from .conftest import Stack, open_view, shot

TOPIC = "con-orders"
_GOOD = [{"order_id": f"o{i}", "amount": 1.5 * i} for i in range(4)]


def _status(http: httpx.Client) -> dict[str, Any]:
    answer = http.get(f"/v1/topics/{TOPIC}")
    assert answer.status_code == 200, answer.text
    return dict(answer.json()["table_status"])


def _typed_topic_with_one_dead_letter(http: httpx.Client) -> dict[str, Any]:
    """Create the typed topic once, send 4 good bodies and 1 bad, and wait until all 5 are committed."""
    if http.get(f"/v1/topics/{TOPIC}").status_code == 404:
        created = http.post("/v1/topics", json={"name": TOPIC, "queues": 2, "table": {
            "mode": "typed", "schema": "order_id STRING, amount DOUBLE", "target_lag_s": 1}})
        assert created.status_code in (200, 201), created.text
        bodies = [json.dumps(b) for b in _GOOD] + ["this is not json"]
        sent = http.post(f"/v1/topics/{TOPIC}/messages", json={"messages": [{"body": b} for b in bodies]})
        assert sent.status_code == 200, sent.text
    deadline = time.monotonic() + 60
    while True:
        status = _status(http)
        if status["rows"] == 4 and status["dlq_rows"] == 1 and status["lag_bytes"] == 0:
            return status
        assert time.monotonic() < deadline, f"the table never committed 4 rows and 1 dead letter: {status}"
        time.sleep(0.2)


def _cells(page: Any) -> list[str]:
    row = page.locator("#tables-list tbody tr", has_text=TOPIC)
    return [str(c) for c in row.locator("td").all_inner_texts()]


def test_tables_view_shows_rows_dead_letters_lag_and_replays(page: Any, stack: Stack, tmp_path: Path) -> None:
    status = _typed_topic_with_one_dead_letter(stack.http)
    text = open_view(page, stack.broker.url + "/console", "tables")
    assert "Table topics (" in text
    cells = _cells(page)
    assert cells[:5] == [TOPIC, "typed", "append", "4", "1"], cells
    assert cells[5] == f"{status['committed_offset']:,}"  # committed offset, as the API says
    assert cells[6] == "0 B" and cells[7] == "0.0 s", cells  # nothing left to commit
    assert cells[8] == str(status["version"]) and cells[9] == "-", cells
    shot(page, tmp_path / "tables.png")

    page.click(f"button.replay[data-topic='{TOPIC}']")
    answer = page.locator(f"#replay-result [data-replay='{TOPIC}']")
    answer.wait_for()
    # the bad body is still not JSON: nothing moves, the one row stays in the DLQ table
    assert f"{TOPIC}: 0 row(s) replayed into the table, 1 remain in {TOPIC}__dlq" in answer.inner_text()
    assert _status(stack.http)["dlq_rows"] == 1
    shot(page, tmp_path / "tables-replayed.png")


def test_replay_after_a_schema_change_moves_the_dead_letter(page: Any, stack: Stack, tmp_path: Path) -> None:
    """A body without the required order_id is a dead letter; once order_id is optional, Replay DLQ moves it."""
    http, topic = stack.http, "con-refunds"
    created = http.post("/v1/topics", json={"name": topic, "queues": 1, "table": {
        "mode": "typed", "schema": "order_id STRING NOT NULL, amount DOUBLE", "target_lag_s": 1}})
    assert created.status_code in (200, 201), created.text
    bodies = ['{"order_id": "r1", "amount": 2.5}', '{"amount": 7}']
    assert http.post(f"/v1/topics/{topic}/messages", json={"messages": [{"body": b} for b in bodies]}).is_success
    deadline = time.monotonic() + 60
    while (s := http.get(f"/v1/topics/{topic}").json()["table_status"])["dlq_rows"] != 1 or s["rows"] != 1:
        assert time.monotonic() < deadline, f"the missing order_id never reached {topic}__dlq: {s}"
        time.sleep(0.2)
    relaxed = http.put(f"/v1/topics/{topic}", json={"table": {"schema": "order_id STRING, amount DOUBLE"}})
    assert relaxed.status_code == 200, relaxed.text
    open_view(page, stack.broker.url + "/console", "tables")
    page.click(f"button.replay[data-topic='{topic}']")
    answer = page.locator(f"#replay-result [data-replay='{topic}']")
    answer.wait_for()
    assert f"{topic}: 1 row(s) replayed into the table, 0 remain in {topic}__dlq" in answer.inner_text()
    page.click("#refresh")
    page.wait_for_selector("#view > div[data-view='tables'][data-loaded='true']")
    row = page.locator("#tables-list tbody tr", has_text=topic)
    assert [str(c) for c in row.locator("td").all_inner_texts()][3:5] == ["2", "0"]
    shot(page, tmp_path / "tables-replay-moved.png")


def test_replay_on_a_topic_without_table_shows_the_error(page: Any, stack: Stack) -> None:
    """The button's error path: the topic lost its table between render and click, the answer is shown."""
    _typed_topic_with_one_dead_letter(stack.http)
    open_view(page, stack.broker.url + "/console", "tables")
    off = stack.http.put(f"/v1/topics/{TOPIC}", json={"table": {"mode": "off"}})
    assert off.status_code == 200, off.text
    try:
        page.click(f"button.replay[data-topic='{TOPIC}']")
        error = page.locator("#replay-result .error")
        error.wait_for()
        assert f"404 table_not_found: topic '{TOPIC}' has no table" in error.inner_text()
    finally:
        on = stack.http.put(f"/v1/topics/{TOPIC}", json={"table": {"mode": "typed"}})
        assert on.status_code == 200, on.text


def test_topics_view_shows_each_topics_table_mode(page: Any, stack: Stack, tmp_path: Path) -> None:
    _typed_topic_with_one_dead_letter(stack.http)
    assert stack.http.post("/v1/topics", json={"name": "con-plain", "queues": 1}).status_code in (200, 201)
    open_view(page, stack.broker.url + "/console", "topics")
    summary = [str(t) for t in page.locator("section tbody tr").all_inner_texts()]
    assert any(r.startswith(f"{TOPIC}\t2\trw\t5\ttyped, append") for r in summary), summary
    assert any(r.startswith("con-plain\t1\trw\t0\toff") for r in summary), summary
    card = page.inner_text(f"details[data-topic='{TOPIC}']")
    assert "5 messages, table typed, append" in card
    assert "Table: 4 rows, 1 dead-letter rows, lag 0 B" in card
    assert "table off" in page.inner_text("details[data-topic='con-plain'] summary")
    shot(page, tmp_path / "topics-tables.png")


def test_overview_sums_the_table_topics(page: Any, stack: Stack, tmp_path: Path) -> None:
    _typed_topic_with_one_dead_letter(stack.http)
    tables = stack.http.get("/v1/broker").json()["tables"]
    assert TOPIC in tables
    rows, dead = sum(s["rows"] or 0 for s in tables.values()), sum(s["dlq_rows"] or 0 for s in tables.values())
    text = open_view(page, stack.broker.url + "/console", "overview")
    assert f"Table topics\t{len(tables)}" in text
    assert f"Rows / dead-letter rows\t{rows:,} / {dead:,}" in text and dead >= 1
    assert "Largest lag\t0 B, 0.0 s" in text and "Tables with an error\t0" in text
    page.click("text=Each table in the Tables view")
    page.wait_for_selector("#view > div[data-view='tables'][data-loaded='true']")
    assert TOPIC in page.inner_text("#tables-list")
    shot(page, tmp_path / "overview-tables.png")
