"""The NameServer's console (cluster view), and a console behind [auth] with its token box."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from broker_api.auth import PolicyEntry, UserStore
from tests.broker_api.conftest import FAST_ENV
from tests.conftest import BrokerProcess, _free_port

from .conftest import Stack, loaded, open_view, shot


@pytest.fixture(scope="module")
def slave(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A slave of the stack's broker (id 1), which learns its master from the NameServer."""
    base = tmp_path_factory.mktemp("console-slave")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARKMQ_")}
    env.update({**FAST_ENV, "SPARKMQ_BROKER__NAME": "console-broker", "SPARKMQ_BROKER__CLUSTER": "console-cluster",
                "SPARKMQ_BROKER__BROKER_ID": "1", "SPARKMQ_BROKER__NAMESRV_ADDR": f"127.0.0.1:{stack.namesrv.port}",
                "SPARKMQ_HA__RECONNECT_MAX_S": "0.5", "SPARKMQ_HA__METADATA_SYNC_INTERVAL_S": "1"})
    broker = BrokerProcess(base / "data", _free_port(), env, base / "broker.log")
    try:
        yield broker.start()
    finally:
        broker.stop()


def _until(page: Any, view: str, wanted: str, tries: int = 60) -> str:
    """Refresh ``view`` until its text holds ``wanted`` (the servers catch up in the background)."""
    text = loaded(page, view)
    for _ in range(tries):
        if wanted in text:
            return text
        page.wait_for_timeout(250)
        page.click("#refresh")
        text = loaded(page, view)
    raise AssertionError(f"{wanted!r} never appeared in the {view} view:\n{text}")


def test_namesrv_console_lists_master_and_slave(page: Any, stack: Stack, slave: BrokerProcess,
                                                 tmp_path: Path) -> None:
    assert stack.http.post("/v1/topics", json={"name": "con-routes", "queues": 3}).status_code in (200, 201)
    master, replica = f"http://127.0.0.1:{stack.broker.port}", f"http://127.0.0.1:{slave.port}"
    open_view(page, stack.namesrv.url + "/console", "cluster")
    text = _until(page, "cluster", replica)
    assert "console-cluster\tconsole-broker" in text  # the cluster table
    rows = page.locator("#view tbody tr", has_text="console-broker").all_inner_texts()
    assert any(r.startswith(f"console-cluster\tconsole-broker\t0\tmaster\t{master}\t") for r in rows), rows
    assert any(r.startswith(f"console-cluster\tconsole-broker\t1\tslave\t{replica}\t") for r in rows), rows
    assert page.get_attribute(f"a[href='{replica}/console']", "href") == f"{replica}/console"
    expect(page.locator("#subtitle")).to_have_text("NameServer · 1 cluster(s) · 2 live broker(s)")
    shot(page, tmp_path / "namesrv-cluster.png")

    page.click("nav a[data-view='routes']")
    _until(page, "routes", "con-routes")  # a new topic is registered at once or within the interval
    row = page.locator("tbody tr", has_text="con-routes").inner_text()
    assert row.startswith(f"con-routes\tconsole-broker\t3\t3\trw\tmaster {master}, slave 1 {replica}"), row
    shot(page, tmp_path / "namesrv-routes.png")


def test_broker_consoles_show_ha_state_and_lag(page: Any, stack: Stack, slave: BrokerProcess,
                                               tmp_path: Path) -> None:
    sent = stack.http.post("/v1/topics/con-ha/messages", json={"messages": [{"body": "replicated"}]})
    assert sent.status_code == 200, sent.text
    top = stack.http.get("/v1/broker").json()["store"]["commitlog_max_offset"]
    open_view(page, stack.broker.url + "/console", "overview")
    _until(page, "overview", f"\t{top:,}\t0 B\t")  # the slave's ack offset reached the master's end: no lag
    assert "Connected slaves\t1" in page.inner_text("#view")
    shot(page, tmp_path / "master-ha.png")

    open_view(page, slave.url + "/console", "overview")
    text = _until(page, "overview", "Connected to master\tyes")
    assert "Role\tslave" in text and f"Master\t{stack.broker.url}" in text
    expect(page.locator("#subtitle")).to_have_text("console-broker · slave · console-cluster")
    shot(page, tmp_path / "slave-ha.png")


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, dict[str, str]]]:
    """A broker with [auth] on, a super user "ops" and a "viewer" who may read topic con-open only."""
    base = tmp_path_factory.mktemp("console-auth")
    users = UserStore(base / "data" / "auth")  # what `sparkmq user add` / `sparkmq acl grant` write
    tokens = {"ops": "ops:" + users.add_user("ops", super_user=True), "viewer": "viewer:" + users.add_user("viewer")}
    users.grant("viewer", PolicyEntry("Topic:con-open", ("Sub",)))
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARKMQ_")}
    env.update({**FAST_ENV, "SPARKMQ_AUTH__ENABLED": "true"})
    broker = BrokerProcess(base / "data", _free_port(), env, base / "broker.log")
    try:
        yield broker.start(), tokens
    finally:
        broker.stop()


def _use_token(page: Any, token: str) -> str:
    page.fill("#token", token)
    page.click("#token-form button[type=submit]")
    return loaded(page, "topics")


def test_token_box_unlocks_a_secured_broker(page: Any, secured: tuple[BrokerProcess, dict[str, str]],
                                            tmp_path: Path) -> None:
    broker, tokens = secured
    text = open_view(page, broker.url + "/console", "topics")  # the page itself is open
    assert "401 unauthenticated" in text and "type a token user:secret in the token box" in text
    shot(page, tmp_path / "auth-refused.png")
    assert "401 unauthenticated" in _use_token(page, "ops:wrong-secret")

    text = _use_token(page, tokens["ops"])
    assert text.startswith("Topics (") and "unauthenticated" not in text
    assert page.evaluate("sessionStorage.getItem('sparkmq.console.token')") == tokens["ops"]
    page.reload()  # the token stays for the tab's session
    assert loaded(page, "topics").startswith("Topics (")
    expect(page.locator("#token-state")).to_have_text("token set")

    page.click("#token-form button[type=button]")  # Clear
    assert "401 unauthenticated" in loaded(page, "topics")


def test_a_user_sees_what_the_acl_allows(page: Any, secured: tuple[BrokerProcess, dict[str, str]],
                                         tmp_path: Path) -> None:
    broker, tokens = secured
    ops = {"Authorization": f"Bearer {tokens['ops']}"}
    for name in ("con-open", "con-secret"):
        made = httpx.post(f"{broker.url}/v1/topics", json={"name": name, "queues": 1}, headers=ops, timeout=30)
        assert made.status_code in (200, 201), made.text
    open_view(page, broker.url + "/console", "topics")
    _use_token(page, tokens["viewer"])
    assert page.inner_text("details[data-topic='con-open'] tbody tr") == "0\t0\t0\t0"
    denied = page.inner_text("details[data-topic='con-secret'] .error")
    assert denied.startswith("403 permission_denied") and "Topic:con-secret" in denied, denied
    shot(page, tmp_path / "acl.png")
