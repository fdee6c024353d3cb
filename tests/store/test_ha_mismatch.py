"""A slave whose log does not continue into the master's refuses, says why, and keeps its data."""

from __future__ import annotations

import hashlib
import time

from store import Message, MessageStore
from tests.store.test_ha import Pair, commitlog_files, pair, produce, wait_until  # noqa: F401


def fingerprint(store: MessageStore) -> dict[str, str]:
    return {name: hashlib.sha256(data).hexdigest() for name, data in commitlog_files(store).items()}


def test_slave_holding_more_than_the_master_refuses_and_keeps_its_data(pair: Pair) -> None:
    master, ha = pair.master()
    produce(master, 10)
    slave = pair.open_store(pair.tmp_path / "slave")
    produce(slave, 60, seed=5)
    before, top = fingerprint(slave), slave.max_phy_offset()
    assert top > master.max_phy_offset()
    slave.shutdown()
    slave, client = pair.slave(ha)
    assert wait_until(lambda: client.error is not None, 10)
    assert "holds data the master does not have" in (client.error or "")
    assert not client.status().connected and client.status().error == client.error
    assert slave.max_phy_offset() == top and fingerprint(slave) == before
    assert wait_until(lambda: ha.connected_slaves == 0, 5)


def test_slave_with_a_different_history_refuses_and_keeps_its_data(pair: Pair) -> None:
    master, ha = pair.master()
    produce(master, 80)
    slave = pair.open_store(pair.tmp_path / "slave")
    slave.put_messages([Message(topic="own", body=b"o" * 333) for _ in range(7)])
    before = fingerprint(slave)
    slave.shutdown()
    slave, client = pair.slave(ha)
    assert wait_until(lambda: client.error is not None, 10)
    assert "differs" in (client.error or "")
    assert fingerprint(slave) == before and slave.topics() == {"own": [0]}


def test_slave_behind_the_masters_retention_refuses(pair: Pair) -> None:
    master, ha = pair.master()
    produce(master, 50)
    slave, client = pair.slave(ha)
    assert wait_until(lambda: slave.max_phy_offset() == master.max_phy_offset())
    client.stop()
    copied, before = slave.max_phy_offset(), fingerprint(slave)
    produce(master, 400, seed=3)
    assert master.run_retention(force=True) > 0 and master.min_phy_offset() > copied
    client.start()
    assert wait_until(lambda: client.error is not None, 10)
    assert "no longer holds" in (client.error or "") and str(copied) in (client.error or "")
    assert fingerprint(slave) == before


def test_new_master_address_clears_the_error_and_replicates(pair: Pair) -> None:
    master, ha = pair.master()
    produce(master, 30)
    slave, client = pair.slave("127.0.0.1:1")  # nobody listens there
    assert wait_until(lambda: client.status().master_address == "127.0.0.1:1")
    time.sleep(0.5)
    assert not client.status().connected and slave.max_phy_offset() == 0
    client.update_master_address(f"127.0.0.1:{ha.port}")
    assert wait_until(lambda: slave.max_phy_offset() == master.max_phy_offset())
    assert client.status().master_address == f"127.0.0.1:{ha.port}" and client.error is None
