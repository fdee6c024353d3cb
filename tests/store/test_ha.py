"""HA replication, master and slave in one process over real sockets on 127.0.0.1."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from store import GetStatus, HAConfig, Message, MessageStore, StoredMessage
from store.ha import HAClient, HAService

SLAVE_HOST = "127.0.0.2:10911"  # the slave's own store host differs; ids must still be the master's


def wait_until(pred: Callable[[], bool], timeout_s: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.02)
    return pred()


def produce(store: MessageStore, batches: int, seed: int = 0, topic: str = "ha") -> None:
    for i in range(batches):
        k = seed * 100_000 + i
        store.put_messages([Message(topic=topic, body=(b"%d-%d;" % (k, j)) * (1 + (k + j) % 41), queue_id=(k + j) % 4,
                                    keys=(f"k{k}-{j}",), tags=f"t{j % 3}") for j in range(1 + k % 7)])


def commitlog_files(store: MessageStore) -> dict[str, bytes]:
    return {f.path.name: f.path.read_bytes() for f in store.commitlog.queue.files}


def read_queue(store: MessageStore, topic: str, qid: int) -> list[StoredMessage]:
    out: list[StoredMessage] = []
    offset = store.min_offset(topic, qid)
    for _ in range(10_000):
        r = store.get_messages(topic, qid, offset, 256)
        if r.status is not GetStatus.FOUND:
            break
        out += r.messages
        offset = r.next_offset
    return out


def summary(msgs: list[StoredMessage]) -> list[tuple[object, ...]]:
    return [(m.msg_id, m.queue_offset, m.phy_offset, m.topic, m.body, m.keys, m.tags) for m in msgs]


def assert_replica(master: MessageStore, slave: MessageStore, topic: str = "ha") -> None:
    """Same bytes at the same offsets, same queues, same ids and messages."""
    assert wait_until(lambda: slave.max_phy_offset() == master.max_phy_offset())
    assert commitlog_files(slave) == commitlog_files(master)
    assert slave.wait_visible(10) and master.wait_visible(10)
    assert slave.topics() == master.topics()
    for qid in master.topics().get(topic, []):
        assert (slave.min_offset(topic, qid), slave.max_offset(topic, qid)) == \
            (master.min_offset(topic, qid), master.max_offset(topic, qid))
        assert summary(read_queue(slave, topic, qid)) == summary(read_queue(master, topic, qid))
    assert slave.commitlog.topic_queue_table == master.commitlog.topic_queue_table


class Pair:
    """A master with its HA port and a slave store with its client, stopped at teardown."""

    def __init__(self, open_store: Callable[..., MessageStore], tmp_path: Path) -> None:
        self.open_store, self.tmp_path = open_store, tmp_path
        self.services: list[HAService | HAClient] = []

    def master(self, ha: HAConfig | None = None, **store: object) -> tuple[MessageStore, HAService]:
        m = self.open_store(self.tmp_path / "master", **store)
        svc = HAService(m, ha or HAConfig(listen_host="127.0.0.1", listen_port=0))
        svc.start()
        self.services.append(svc)
        return m, svc

    def slave(self, master: HAService | str, name: str = "slave", ha: Mapping[str, Any] | None = None,
              **store: object) -> tuple[MessageStore, HAClient]:
        s = self.open_store(self.tmp_path / name, **{"store_host": SLAVE_HOST, **store})
        address = master if isinstance(master, str) else f"127.0.0.1:{master.port}"
        client = HAClient(s, HAConfig(master_address=address, **ha or {}))
        client.start()
        self.services.append(client)
        return s, client

    def stop(self) -> None:
        for svc in reversed(self.services):
            svc.stop()


@pytest.fixture
def pair(open_store: Callable[..., MessageStore], tmp_path: Path) -> Iterator[Pair]:
    p = Pair(open_store, tmp_path)
    yield p
    p.stop()


def test_slave_catches_up_with_concurrent_producers(pair: Pair) -> None:
    master, ha = pair.master()
    produce(master, 40)
    slave, client = pair.slave(ha)
    writers = [threading.Thread(target=produce, args=(master, 150, seed)) for seed in (1, 2, 3)]
    for t in writers:
        t.start()
    for t in writers:
        t.join(timeout=60)
    assert len(master.commitlog.queue.files) >= 4, "the test should roll several segments"
    assert_replica(master, slave)
    some = read_queue(master, "ha", 2)[17]
    assert slave.get_message(some.msg_id).body == some.body
    assert wait_until(lambda: ha.status().slaves[0].ack_offset == master.max_phy_offset())
    status = ha.status()
    assert status.connected_slaves == 1 and status.slaves[0].lag_bytes == 0 and status.slaves[0].lag_seconds == 0
    assert client.status().connected and client.status().error is None


def test_sync_wait_true_once_the_slave_acked_false_on_timeout_without_slave(pair: Pair) -> None:
    master, ha = pair.master()
    end = master.put_messages([Message(topic="ha", body=b"lonely")])[0]
    t0 = time.monotonic()
    assert not ha.wait_for_slave(end.phy_offset + end.size, timeout_s=0.3)
    assert 0.25 <= time.monotonic() - t0 < 2
    assert not ha.slave_available()

    pair.slave(ha)
    assert wait_until(lambda: ha.connected_slaves == 1)
    results: list[bool] = []

    def sync_put(i: int) -> None:
        res = master.put_messages([Message(topic="ha", body=b"sync %d" % i, queue_id=i % 2)] * 3)
        results.append(ha.wait_for_slave(res[-1].phy_offset + res[-1].size, timeout_s=10))

    putters = [threading.Thread(target=sync_put, args=(i,)) for i in range(8)]
    for t in putters:
        t.start()
    for t in putters:
        t.join(timeout=30)
    assert results == [True] * 8
    assert ha.slave_available() and ha.transfer.push_to_slave_offset == master.max_phy_offset()


def test_slave_available_false_when_the_slave_is_too_far_behind(pair: Pair) -> None:
    master, ha = pair.master()
    produce(master, 30)
    pair.slave(ha)
    assert wait_until(lambda: ha.transfer.push_to_slave_offset == master.max_phy_offset())
    assert ha.slave_available(max_fallbehind_bytes=0)
    pair.stop()  # slave and port gone: nothing acks what follows
    master.put_messages([Message(topic="ha", body=b"x" * 500)])
    assert not ha.slave_available()


def test_empty_slave_copies_a_master_with_several_segments(pair: Pair) -> None:
    master, ha = pair.master()
    produce(master, 400)
    assert len(master.commitlog.queue.files) >= 5
    slave, _ = pair.slave(ha)
    assert_replica(master, slave)
    assert sorted(commitlog_files(slave)) == sorted(commitlog_files(master))


def test_empty_slave_starts_at_the_oldest_retained_segment(pair: Pair) -> None:
    master, ha = pair.master()
    produce(master, 300)
    assert master.run_retention(force=True) >= 3
    produce(master, 200, seed=7)
    first = master.min_phy_offset()
    assert first > 0 and len(master.commitlog.queue.files) >= 3
    slave, _ = pair.slave(ha)
    assert_replica(master, slave)
    assert slave.min_phy_offset() == first
    assert all(slave.min_offset("ha", q) > 0 for q in range(4)), "queues start midway, as on the master"


def test_promoted_slave_continues_the_masters_queue_offsets(pair: Pair) -> None:
    master, ha = pair.master()
    produce(master, 120)
    slave, _ = pair.slave(ha)
    assert_replica(master, slave)
    pair.stop()
    expected = master.max_offset("ha", 1)
    assert slave.put_messages([Message(topic="ha", body=b"promoted", queue_id=1)])[0].queue_offset == expected
    root = slave.config.root
    slave.shutdown()
    reopened = pair.open_store(root, store_host=SLAVE_HOST)
    assert reopened.put_messages([Message(topic="ha", body=b"again", queue_id=1)])[0].queue_offset == expected + 1
    assert reopened.put_messages([Message(topic="ha", body=b"new", queue_id=3)])[0].queue_offset == \
        master.max_offset("ha", 3)


def test_slave_with_another_segment_size_refuses(pair: Pair) -> None:
    master, ha = pair.master()
    produce(master, 200)
    slave, client = pair.slave(ha, commitlog_segment_bytes=48 << 10)
    assert wait_until(lambda: client.error is not None)
    assert "commitlog_segment_bytes" in (client.error or "")
    assert not client.status().connected
    assert slave.max_phy_offset() <= master.commitlog.queue.files[0].end_offset
