"""The NameServer's console (cluster view), and a console behind [auth] with its token box."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.broker_api.conftest import FAST_ENV
from tests.conftest import BrokerProcess, _free_port

from .conftest import Stack, loaded, open_view, shot

ROOT = Path(__file__).resolve().parents[2]


def test_namesrv_console_lists_the_broker_with_its_role(page: Any, stack: Stack, tmp_path: Path) -> None:
    assert stack.http.post("/v1/topics", json={"name": "con-routes", "queues": 3}).status_code in (200, 201)
    address = f"http://127.0.0.1:{stack.broker.port}"
    text = open_view(page, stack.namesrv.url + "/console", "cluster")
    assert "console-cluster\tconsole-broker" in text  # the cluster table
    brokers = page.locator("tbody tr", has_text=address).all_inner_texts()
    assert len(brokers) == 1 and brokers[0].startswith(f"console-cluster\tconsole-broker\t0\tmaster\t{address}\t")
    assert page.get_attribute(f"a[href='{address}/console']", "href") == f"{address}/console"
    expect(page.locator("#subtitle")).to_have_text("NameServer · 1 cluster(s) · 1 live broker(s)")
    shot(page, tmp_path / "namesrv-cluster.png")

    page.click("nav a[data-view='routes']")
    loaded(page, "routes")
    # the broker re-registers a new topic at once (data version changed) or within its interval
    for _ in range(60):
        if "con-routes" in page.inner_text("#view"):
            break
        page.wait_for_timeout(500)
        page.click("#refresh")
        loaded(page, "routes")
    row = page.locator("tbody tr", has_text="con-routes").inner_text()
    assert row.startswith("con-routes\tconsole-broker\t3\t3\trw\tmaster " + address)
    shot(page, tmp_path / "namesrv-routes.png")


def _add_user(data: Path, name: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARKMQ_")}
    out = subprocess.run([sys.executable, "-m", "broker_api", "user", "add", name, "--super", "--data-dir", str(data)],
                         cwd=ROOT, capture_output=True, text=True, timeout=60, env=env, check=False)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, str]]:
    """A broker with [auth] on and one super user; yields it and the user's token."""
    base = tmp_path_factory.mktemp("console-auth")
    token = _add_user(base / "data", "ops")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARKMQ_")}
    env.update({**FAST_ENV, "SPARKMQ_AUTH__ENABLED": "true"})
    broker = BrokerProcess(base / "data", _free_port(), env, base / "broker.log")
    try:
        yield broker.start(), token
    finally:
        broker.stop()


def test_token_box_unlocks_a_secured_broker(page: Any, secured: tuple[BrokerProcess, str], tmp_path: Path) -> None:
    broker, token = secured
    text = open_view(page, broker.url + "/console", "topics")  # the page itself is open
    assert "401 unauthenticated" in text and "type a token user:secret in the token box" in text
    shot(page, tmp_path / "auth-refused.png")

    page.fill("#token", "ops:wrong-secret")
    page.click("#token-form button[type=submit]")
    assert "401 unauthenticated" in loaded(page, "topics")

    page.fill("#token", token)
    page.click("#token-form button[type=submit]")
    assert "Topics (0)" in loaded(page, "topics")
    assert page.evaluate("sessionStorage.getItem('sparkmq.console.token')") == token
    page.reload()  # the token stays for the tab's session
    assert "Topics (0)" in loaded(page, "topics")
    expect(page.locator("#token-state")).to_have_text("token set")

    page.click("#token-form button[type=button]")  # Clear
    assert "401 unauthenticated" in loaded(page, "topics")
