"""SIGKILL a process that writes and tiers (segments, ConsumeQueue ranges, index files) at random points of
its upload rounds, again and again: every acknowledged message is still there afterwards, by queue offset,
id and key, and the local disk holds only the recent part of the log."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from store import GetStatus, Message, MessageStore
from store.tiered import TieredConfig, TieredStorage
from tests.store.conftest import small_config

_TOPIC = "kills"
_SMALL = {"consumequeue_segment_units": 40, "index_entries": 64}
_TIER = {"local_retention_s": 0.0, "interval_s": 3600.0, "block_bytes": 16 << 10, "retention_s": 0.0}


def _open(root: Path, remote: Path) -> tuple[MessageStore, TieredStorage]:
    store = MessageStore(small_config(root, **_SMALL))
    tier = TieredStorage(store, TieredConfig(uri=str(remote), **_TIER))  # type: ignore[arg-type]
    store.start()
    return store, tier


def _child(root: Path, remote: Path, first: int) -> None:
    """Write batches of 20 messages (acknowledged on stdout once stored and synced), tiering after each."""
    store, tier = _open(root, remote)
    n = first
    while True:
        store.put_messages([Message(_TOPIC, f"m{i}-".encode() + b"x" * 900, queue_id=i % 2, keys=(f"k{i}",))
                            for i in range(n, n + 20)])
        n += 20
        print(n, flush=True)
        tier.run_once()


def test_kills_during_uploads_lose_no_acknowledged_message(tmp_path: Path) -> None:
    root, remote, acked = tmp_path / "store", tmp_path / "remote", 0
    rng = random.Random(35)
    for _ in range(6):
        child = subprocess.Popen([sys.executable, "-m", "tests.store.test_tiered_kills", str(root), str(remote),
                                  str(acked)], stdout=subprocess.PIPE, text=True, cwd=Path(__file__).parents[2],
                                 env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])})
        assert child.stdout is not None
        for _ in range(rng.randint(3, 6)):
            line = child.stdout.readline()
            assert line, "the writer died on its own"
            acked = int(line)
        time.sleep(rng.random() * 0.05)
        os.kill(child.pid, signal.SIGKILL)  # somewhere in an upload round, or in the next put
        child.wait(30)
        acked = max([acked, *(int(x) for x in child.stdout.read().split())])
    store, tier = _open(root, remote)
    try:
        tier.run_once()
        assert len(store.commitlog.queue.files) == 1 and len(tier.manifest.segments()) >= 5
        cq = store.queues.get(_TOPIC, 0)
        assert cq is not None and cq.files.min_offset() > 0  # old ConsumeQueue files are remote only
        bodies: dict[int, bytes] = {}
        for qid in (0, 1):
            offset = store.min_offset(_TOPIC, qid)
            assert offset == 0
            while (r := store.get_messages(_TOPIC, qid, offset, 32)).status is GetStatus.FOUND:
                bodies.update((int(m.body.split(b"-")[0][1:]), m.body) for m in r.messages)
                offset = r.next_offset
        assert set(range(acked)) <= set(bodies)  # every acknowledged message, and each body intact
        assert all(bodies[i] == f"m{i}-".encode() + b"x" * 900 for i in range(acked))
        for i in rng.sample(range(acked), 10):
            assert [m.body for m in store.query_by_key(_TOPIC, f"k{i}", 0, 1 << 62)][:1] == [bodies[i]]
    finally:
        tier.stop()
        store.shutdown()


if __name__ == "__main__":
    _child(Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]))
