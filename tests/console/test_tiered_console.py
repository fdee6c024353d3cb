"""The console's overview shows tiered storage: local vs remote bytes, upload lag, cache hits."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from tests.broker_api.conftest import FAST_ENV

from .conftest import open_view, shot


def test_overview_shows_local_and_remote_bytes(page: Any, broker_factory: Callable[..., Any], tmp_path: Path) -> None:
    b = broker_factory(env={**FAST_ENV, "SPARKMQ_TIERED__URI": str(tmp_path / "remote"),
                            "SPARKMQ_TIERED__LOCAL_RETENTION_S": "0", "SPARKMQ_TIERED__INTERVAL_S": "0.2",
                            "SPARKMQ_STORE__COMMITLOG_SEGMENT_BYTES": str(64 << 10)})
    with httpx.Client(base_url=b.url, timeout=30) as http:
        msgs = [{"body": "x" * 1000} for _ in range(100)]
        assert http.post("/v1/topics/con-tiered/messages", json={"messages": msgs}).status_code == 200
        deadline = time.monotonic() + 30
        while http.get("/v1/broker").json()["tiered"]["remote_segments"] == 0 and time.monotonic() < deadline:
            time.sleep(0.1)
    text = open_view(page, b.url + "/console", "overview")
    assert "Tiered storage" in text and "Local / remote" in text and "Upload lag" in text and "Cache hits" in text
    assert str(tmp_path / "remote") in text
    shot(page, tmp_path / "tiered.png")
