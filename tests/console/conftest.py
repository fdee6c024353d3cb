"""Console fixtures: Debian's Chromium (installed here if missing), one browser, one broker and NameServer.

The browser is Playwright for Python driving the system ``chromium`` by its
path (``playwright install`` is never run).  On a fresh CI machine, which runs
as root with apt, the session fixture installs the ``chromium`` package first.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.broker_api.conftest import FAST_ENV
from tests.conftest import BrokerProcess, _free_port
from tests.namesrv.support import NamesrvProcess

_APT_TIMEOUT_S = 600


def _apt(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    return subprocess.run(["apt-get", *args], capture_output=True, text=True, timeout=_APT_TIMEOUT_S, env=env,
                          check=False)


def _install_chromium() -> str:
    """``apt-get install chromium``; fails the session with apt's own words when that is not possible."""
    if shutil.which("apt-get") is None:
        pytest.fail("chromium is not installed and apt-get is missing: install Chromium and put `chromium` on PATH")
    for args in (("update",), ("install", "-y", "--no-install-recommends", "chromium")):
        try:
            done = _apt(*args)
        except subprocess.TimeoutExpired:
            pytest.fail(f"apt-get {' '.join(args)} took over {_APT_TIMEOUT_S}s; install chromium by hand")
        if done.returncode != 0:
            pytest.fail(f"apt-get {' '.join(args)} failed ({done.returncode}); the console tests need Debian's "
                        f"chromium (run as root, or install it by hand):\n{done.stdout[-1500:]}\n{done.stderr[-1500:]}")
    path = shutil.which("chromium")
    if path is None:
        pytest.fail("apt-get installed chromium but `chromium` is not on PATH")
    return path


@pytest.fixture(scope="session")
def chromium_path() -> str:
    return shutil.which("chromium") or _install_chromium()


@pytest.fixture(scope="package")
def browser(chromium_path: str) -> Iterator[Any]:
    """One headless Chromium for the console tests. Package scope, not session: Playwright's sync API
    keeps an event loop running in the main thread while it is open, and asyncio.run() in any later
    test (tests/store, tests/streaming) would refuse to start."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=chromium_path, headless=True, args=["--no-sandbox"])
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh page (own context: empty sessionStorage); script errors in it fail the test."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    new_page = context.new_page()
    new_page.set_default_timeout(15_000)
    errors: list[str] = []
    new_page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        yield new_page
    finally:
        context.close()
    assert not errors, f"the console raised script errors: {errors}"


@dataclass
class Stack:
    broker: BrokerProcess
    namesrv: NamesrvProcess
    http: httpx.Client


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """A NameServer and a broker registered with it (Delta mirror on), shared by the console tests."""
    base = tmp_path_factory.mktemp("console")
    namesrv = NamesrvProcess(_free_port(), base / "namesrv.log").start()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARKMQ_")}
    env.update(FAST_ENV)
    env.update({"SPARKMQ_MIRROR__ENABLED": "true", "SPARKMQ_MIRROR__BATCH_INTERVAL_S": "0.1",
                "SPARKMQ_BROKER__NAME": "console-broker", "SPARKMQ_BROKER__CLUSTER": "console-cluster",
                "SPARKMQ_BROKER__NAMESRV_ADDR": f"127.0.0.1:{namesrv.port}"})
    broker = BrokerProcess(base / "data", _free_port(), env, base / "broker.log")
    try:
        broker.start()
        with httpx.Client(base_url=broker.url, timeout=30) as http:
            yield Stack(broker, namesrv, http)
    finally:
        broker.stop()
        namesrv.stop()


def shot(page: Any, path: Path) -> Path:
    """A full-page screenshot; asserts it is a non-empty PNG."""
    page.screenshot(path=str(path), full_page=True)
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 2000, f"{path} is not a real screenshot"
    return path


def open_view(page: Any, url: str, view: str) -> str:
    """Open ``url`` (a console page, ``#view`` added) and return the view's visible text once loaded."""
    page.goto(f"{url}#{view}")
    return loaded(page, view)


def loaded(page: Any, view: str) -> str:
    """The visible text of ``view`` once it has rendered (or shown its error)."""
    page.wait_for_selector(f"#view > div[data-view='{view}'][data-loaded='true']")
    return str(page.inner_text("#view"))
