"""Helpers for the HA tests: a master and its slave as real broker processes on 127.0.0.1."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from tests.namesrv.support import free_port

from .conftest import FAST_ENV

Row = tuple[str, str]  # (msg_id, body)
HA_SECRET = "ha-test-secret"  # master and slave share it: the HA link runs the handshake in every HA test


@dataclass
class Pair:
    master: Any
    slave: Any
    ha_port: int


def master_env(role: str = "async_master", ha_port: int | None = None, **extra: str) -> dict[str, str]:
    return {**FAST_ENV, "SPARKMQ_HA__ROLE": role, "SPARKMQ_HA__LISTEN_PORT": str(ha_port or free_port()),
            "SPARKMQ_HA__SLAVE_TIMEOUT_MS": "3000", "SPARKMQ_HA__SECRET": HA_SECRET, **extra}


def slave_env(master: Any | None, ha_port: int | None, **extra: str) -> dict[str, str]:
    env = {**FAST_ENV, "SPARKMQ_BROKER__BROKER_ID": "1", "SPARKMQ_HA__METADATA_SYNC_INTERVAL_S": "1",
           "SPARKMQ_HA__RECONNECT_MAX_S": "0.5", "SPARKMQ_BROKER__LOG_LEVEL": "info",
           "SPARKMQ_HA__SECRET": HA_SECRET, **extra}
    if ha_port is not None:
        env["SPARKMQ_HA__MASTER_ADDR"] = f"127.0.0.1:{ha_port}"
    if master is not None:
        env["SPARKMQ_HA__MASTER_URL"] = master.url
    return env


def start_pair(broker_factory: Callable[..., Any], role: str = "async_master", **slave_extra: str) -> Pair:
    ha_port = free_port()
    master = broker_factory(env=master_env(role, ha_port))
    slave = broker_factory(env=slave_env(master, ha_port, **slave_extra))
    wait_for(lambda: ha(master).get("connected_slaves") == 1, 20, "the slave to connect")
    return Pair(master, slave, ha_port)


def ha(broker: Any) -> dict[str, Any]:
    return dict(httpx.get(broker.url + "/v1/broker", timeout=10).json()["ha"])


def wait_for(check: Callable[[], Any], timeout_s: float, what: str, step_s: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            value = check()
        except httpx.HTTPError:
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(step_s)


def caught_up(master: Any, slave: Any, timeout_s: float = 30) -> int:
    """Wait until the slave holds the master's whole CommitLog; returns that offset."""
    top = ha(master)["max_offset"]
    wait_for(lambda: ha(slave)["max_offset"] == top, timeout_s, f"the slave to reach offset {top}")
    return int(top)


def produce(url: str, topic: str, bodies: list[str], **params: Any) -> dict[str, Any]:
    msgs = [{"body": b, "queue_id": i % 4} for i, b in enumerate(bodies)]
    r = httpx.post(f"{url}/v1/topics/{topic}/messages", json={"messages": msgs}, params=params, timeout=30)
    assert r.status_code == 200, r.text
    return dict(r.json())


def dump(url: str, topic: str) -> dict[tuple[int, int], Row]:
    """Every message of ``topic`` on one broker: (queue, offset) -> (msg_id, body)."""
    out: dict[tuple[int, int], Row] = {}
    queues = httpx.get(f"{url}/v1/topics/{topic}/queues", timeout=10)
    if queues.status_code == 404:
        return out
    for q in queues.json():
        offset = q["min_offset"]
        for _ in range(1000):  # bounded: 1000 pages
            if offset >= q["max_offset"]:
                break
            page = httpx.get(f"{url}/v1/topics/{topic}/queues/{q['queue_id']}/messages",
                             params={"offset": offset, "max_messages": 1000}, timeout=30).json()
            for m in page["messages"]:
                out[(m["queue_id"], m["offset"])] = (m["msg_id"], m.get("body") or m.get("body_base64"))
            offset = page["next_offset"]
    return out
