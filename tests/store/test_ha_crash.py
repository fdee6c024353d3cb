"""A slave process SIGKILLed mid-replication restarts from its recovered end and catches up."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

from store import HAConfig
from store.ha import HAClient
from tests.store.test_ha import SLAVE_HOST, Pair, assert_replica, pair, produce  # noqa: F401

_SLAVE = textwrap.dedent(
    """
    import sys, time
    from store import HAConfig, MessageStore, StoreConfig
    from store.ha import HAClient
    root, master = sys.argv[1], sys.argv[2]
    s = MessageStore(StoreConfig(root_dir=root, commitlog_segment_bytes=64 << 10, consumequeue_segment_units=1000,
                                 index_slots=1024, index_entries=4096, flush_mode="sync", store_host="%s"))
    s.start()
    HAClient(s, HAConfig(master_address=master)).start()
    for _ in range(3000):
        print(s.max_phy_offset(), flush=True)
        time.sleep(0.01)
    """
    % SLAVE_HOST
)


def test_sigkilled_slave_restarts_and_catches_up_byte_identically(pair: Pair) -> None:
    master, ha = pair.master()
    produce(master, 600)
    root = pair.tmp_path / "slave"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen([sys.executable, "-c", _SLAVE, str(root), f"127.0.0.1:{ha.port}"],
                            stdout=subprocess.PIPE, env=env, text=True)
    stop = threading.Event()

    def keep_producing() -> None:
        for seed in range(1, 200):
            if stop.is_set():
                return
            produce(master, 5, seed=seed)

    writer = threading.Thread(target=keep_producing)
    writer.start()
    try:
        assert proc.stdout is not None
        copied = 0
        deadline = time.monotonic() + 30
        while copied < master.max_phy_offset() // 3 and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            copied = int(line)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        stop.set()
        writer.join(timeout=60)
    assert 0 < copied < master.max_phy_offset(), "killed mid-replication"
    assert (root / "abort").exists()

    slave = pair.open_store(root, store_host=SLAVE_HOST)
    assert slave.recovery["abnormal"] is True
    assert slave.max_phy_offset() >= copied, "what the slave had written survives the kill"
    client = HAClient(slave, HAConfig(master_address=f"127.0.0.1:{ha.port}"))
    client.start()
    pair.services.append(client)
    assert_replica(master, slave)
    assert client.error is None
