"""A connected slave asks its master's topic list every half second: over one kept-alive connection.

It used to open a new HTTP client (a new connection, a new TLS context with the CA bundle loaded) for
every poll: ~55 ms of CPU twice a second on an idle slave. Each closed connection leaves a TIME_WAIT
entry behind (60 s), so the connections a slave opened to its master's HTTP port in a window can be
counted from /proc/net/tcp while nothing else talks to that port.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.namesrv.support import free_port

from .ha_support import master_env, slave_env, wait_for


def _client_ports_to(port: int) -> set[int]:
    """Local ports of the loopback TCP connections (any state, TIME_WAIT included) to ``port``."""
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        path = Path(table)
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            local, remote = line.split()[1:3]
            if int(remote.rsplit(":", 1)[1], 16) == port:
                ports.add(int(local.rsplit(":", 1)[1], 16))
    return ports


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs Linux's /proc/net/tcp")
def test_a_slave_polls_its_master_over_one_kept_alive_connection(fast_broker: Callable[..., Any]) -> None:
    ha_port = free_port()
    master = fast_broker(master_env("async_master", ha_port))
    slave = fast_broker(slave_env(master, ha_port))
    wait_for(lambda: httpx.get(master.url + "/v1/broker", timeout=5).json()["ha"].get("connected_slaves") == 1,
             20, "the slave to connect")
    time.sleep(1.0)  # the first full sync on connect is done
    before = _client_ports_to(master.port)
    time.sleep(3.0)  # six polls of the topic list; nothing else talks to the master's HTTP port meanwhile
    opened = _client_ports_to(master.port) - before
    assert len(opened) <= 1, f"the slave opened {len(opened)} connections to its master in 3 s (polls: 6)"
    assert httpx.get(slave.url + "/v1/broker", timeout=5).json()["ha"]["metadata_sync"]["last_error"] is None
