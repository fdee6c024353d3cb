"""Controller mode: consumers read only below the confirm offset (the in-sync set's lowest ack).

An ASYNC master whose in-sync slave is paused keeps taking writes; none of them
may reach a consumer (pull, POP, queue offsets) before the slave has them, so a
consumer never sees, nor commits an offset past, what an election truncates.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from typing import Any

import httpx

from tests.namesrv.support import NamesrvProcess

from .ha_support import wait_for
from .test_controller_failover import MASTER_TIMEOUT_S, bodies_on, controller, master_of, send, start_group

__all__ = ["controller"]  # the fixture, imported for pytest


def pulled(url: str) -> tuple[set[str], dict[str, int]]:
    """Every body an HTTP consumer gets from ``url`` and the next offset of each queue."""
    seen: set[str] = set()
    nxt: dict[str, int] = {}
    for q in httpx.get(f"{url}/v1/topics/t/queues", timeout=10).json():
        offset = q["min_offset"]
        for _ in range(100):
            page = httpx.get(f"{url}/v1/topics/t/queues/{q['queue_id']}/messages",
                             params={"offset": offset, "max_messages": 1000}, timeout=30).json()
            seen |= {m["body"] for m in page["messages"]}
            if page["next_offset"] == offset:
                break
            offset = page["next_offset"]
        nxt[str(q["queue_id"])] = offset
    return seen, nxt


def popped(url: str) -> set[str]:
    r = httpx.post(f"{url}/v1/groups/popper/pop", json={"topic": "t", "max_messages": 1000}, timeout=10)
    assert r.status_code == 200, r.text
    return {m["body"] for m in r.json()["messages"]}


def test_a_consumer_never_sees_writes_the_in_sync_slave_lacks_and_no_offset_outlives_the_cut(
        broker_factory: Callable[..., Any], controller: NamesrvProcess) -> None:
    master, slave = start_group(broker_factory, controller, "async_master",
                                SPARKMQ_HA__MAX_TIME_SLAVE_NOT_CATCHUP_S="30")
    early = {f"early{i}" for i in range(40)}
    assert send(master.url, sorted(early)) == "SEND_OK"
    wait_for(lambda: pulled(master.url)[0] == early, 10, "the early messages to be visible on the master")
    assert slave.proc is not None
    os.kill(slave.proc.pid, signal.SIGSTOP)  # in the in-sync set (30 s of grace) but reading nothing
    try:
        late = {f"late{k}-{i}-{'x' * 4000}" for k in range(8) for i in range(500)}
        for k in range(8):  # 16 MB: more than the socket buffers hold
            assert send(master.url, sorted(b for b in late if b.startswith(f"late{k}-"))) == "SEND_OK"
        seen, offsets = pulled(master.url)
        leaked = len(seen - early)
        assert not leaked, f"{leaked} unconfirmed messages reached an HTTP consumer"
        assert not popped(master.url) & late, "unconfirmed messages reached a POP consumer"
        r = httpx.put(f"{master.url}/v1/groups/g/offsets", json={"topic": "t", "offsets": offsets}, timeout=10)
        assert r.status_code == 200, r.text
        master.kill()
    finally:
        os.kill(slave.proc.pid, signal.SIGCONT)
    wait_for(lambda: master_of(controller) == slave.url, MASTER_TIMEOUT_S + 10, "the slave's election")
    assert wait_for(lambda: send(slave.url, ["new-epoch"]), 10, "a send to the new master") in (
        "SEND_OK", "SLAVE_NOT_AVAILABLE")
    master.start()
    wait_for(lambda: bodies_on(master.url) == bodies_on(slave.url), 30, "the old master to cut and match")
    kept = bodies_on(slave.url)
    assert late - kept, "the old master had no tail of its own: the test proved nothing"
    assert seen <= kept  # every message a consumer saw survived the cut
    queues = {str(q["queue_id"]): q["max_offset"]
              for q in httpx.get(f"{slave.url}/v1/topics/t/queues", timeout=10).json()}
    assert all(offsets[q] <= queues[q] for q in offsets), (offsets, queues)
    seen_after, _ = pulled(slave.url)
    assert early | {"new-epoch"} <= seen_after
