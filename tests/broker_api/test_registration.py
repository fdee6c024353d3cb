"""A broker with [broker] namesrv_addr registers its topics with a real NameServer."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx

from tests.namesrv.support import NamesrvProcess, free_port


def _route(namesrv: NamesrvProcess, topic: str, timeout_s: float = 15.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        resp = namesrv.get(f"/v1/routes/{topic}")
        if resp.status_code == 200:
            return resp.json()
        time.sleep(0.05)
    raise AssertionError(f"no route for {topic} after {timeout_s}s")


def test_broker_registers_topics_and_unregisters_on_stop(fast_broker: Any, tmp_path: Path) -> None:
    namesrv = NamesrvProcess(free_port(), tmp_path / "namesrv.log").start()
    try:
        b = fast_broker({"SPARKMQ_BROKER__NAMESRV_ADDR": namesrv.url.removeprefix("http://")})
        with httpx.Client(base_url=b.url) as c:
            assert c.post("/v1/topics", json={"name": "routed", "queues": 3}).status_code == 201
            route = _route(namesrv, "routed")
            assert route["brokers"][0]["addresses"]["0"] == b.url
            assert route["queues"][0]["write_queues"] == 3
            assert c.get("/v1/broker").json()["namesrv"][0]["up"] is True
            topics = namesrv.get("/v1/topics").json()["topics"]
            assert "RMQ_SYS_TRANS_HALF_TOPIC" not in topics
        assert b.stop() == 0
        assert namesrv.get("/v1/routes/routed").status_code == 404
    finally:
        assert namesrv.stop() == 0
