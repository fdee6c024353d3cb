"""What a newcomer tripped over in the consoles (issue 33): every request a page makes is answered,
the groups view says "enabled" as the CLI does, and a narrow window does not clip the topics table."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from .conftest import Stack, open_view, shot
from .test_broker_console import make_topic, send


def _failed_requests(page: Any) -> list[str]:
    failed: list[str] = []
    page.on("response", lambda r: failed.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    page.on("requestfailed", lambda r: failed.append(f"failed {r.url}"))
    return failed


def test_no_page_asks_for_a_missing_favicon(page: Any, stack: Stack) -> None:
    failed = _failed_requests(page)
    for url, view in ((stack.broker.url + "/console", "overview"), (stack.namesrv.url + "/console", "cluster")):
        open_view(page, url, view)
        icons = page.locator("link[rel=icon]")
        assert icons.count() == 1, f"{url} names no icon, so a browser asks for /favicon.ico and gets 404"
        icon = str(icons.get_attribute("href"))
        assert icon.startswith("data:image/svg+xml,<svg") or page.request.get(
            url.rsplit("/console", 1)[0] + icon).status == 200, icon
    assert failed == []


def test_a_stopped_group_is_not_called_consuming(page: Any, stack: Stack) -> None:
    make_topic(stack.http, "con-stopped", 1)
    send(stack.http, "con-stopped", [{"body": "x", "queue_id": 0}])
    assert stack.http.put("/v1/groups/con-stop/offsets",
                          json={"topic": "con-stopped", "offsets": {"0": 0}}).status_code == 200
    off = stack.http.put("/v1/groups/con-stop", json={"consume_enabled": False})
    assert off.status_code == 200, off.text
    open_view(page, stack.broker.url + "/console", "groups")
    header = page.inner_text("section table thead")
    assert "Consuming" not in header and "Enabled" in header  # the CLI's `sparkmq groups` column
    row = next(r for r in page.locator("section table tbody tr").all_inner_texts() if r.startswith("con-stop\t"))
    assert row.endswith("\tno"), row
    summary = page.inner_text("details[data-group='con-stop'] summary")
    assert "consuming" not in summary and "disabled" in summary, summary


_LAST_COLUMN = """() => {
    const table = document.querySelector('section table');
    const th = [...table.querySelectorAll('thead th')].pop();
    const cell = [...table.querySelectorAll('tbody tr')].pop().lastElementChild;
    const box = table.closest('section').getBoundingClientRect();
    return {header: th.innerText, right: Math.max(th.getBoundingClientRect().right, cell.getBoundingClientRect().right),
            inside: box.right, window: window.innerWidth, page: document.documentElement.scrollWidth};
}"""


def test_a_narrow_window_shows_the_topics_tables_last_column(page: Any, stack: Stack, tmp_path: Path) -> None:
    """At 420 px the topics tables of both consoles end inside their section, and the page does not scroll."""
    name = "con_a_rather_long_topic_name_with_no_hyphen_to_break_at"
    make_topic(stack.http, name, 1)
    send(stack.http, name, [{"body": "x"}])
    deadline = time.monotonic() + 30  # the broker registers a new topic with the NameServer at once
    while stack.namesrv.get(f"/v1/routes/{name}").status_code != 200:
        assert time.monotonic() < deadline, "the NameServer never learned the topic's route"
        time.sleep(0.2)
    page.set_viewport_size({"width": 420, "height": 800})
    for url, view, header in ((stack.broker.url + "/console", "topics", "Table"),
                              (stack.namesrv.url + "/console", "routes", "Addresses")):
        assert name in open_view(page, url, view)
        seen = page.evaluate(_LAST_COLUMN)
        assert seen["header"] == header, seen
        assert seen["right"] <= seen["inside"] + 0.5 and seen["page"] <= seen["window"], (view, seen)
        shot(page, tmp_path / f"{view}-420.png")
