"""Recovery quarantines damaged records instead of cutting the log after them.

A real writer process is killed (SIGKILL) after its puts were acknowledged;
then the checkpoint gets a flipped byte (recovery must scan from the start)
and records at several places are damaged.  Only a torn tail is cut; every
other damaged record is named, answers CORRUPT_MESSAGE at its own queue
offset, and all the other messages are served intact at their offsets, the
same way on every later start.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from store import GetStatus, Message, MessageStore, StoreError
from tests.store.conftest import small_config

_SEG = 64 << 10
_WRITER = textwrap.dedent(
    """
    import sys, time
    from store import Message, MessageStore, StoreConfig
    root, n = sys.argv[1], int(sys.argv[2])
    s = MessageStore(StoreConfig(root_dir=root, commitlog_segment_bytes=64 << 10, consumequeue_segment_units=1000,
                                 index_slots=1024, index_entries=4096, flush_mode="sync", checkpoint_interval_ms=200))
    s.start()
    for lo in range(0, n, 500):
        batch = [Message("q", b"m%05d-" % i * 12, queue_id=i % 2, keys=("k%d" % i,), tags="a")
                 for i in range(lo, min(n, lo + 500))]
        for r in s.put_messages(batch):
            print(r.msg_id, r.queue_id, r.queue_offset, r.phy_offset, r.size)
    print("done", flush=True)
    time.sleep(120)
    """
)


@dataclass(frozen=True)
class _Acked:
    msg_id: str
    queue_id: int
    queue_offset: int
    phy: int
    size: int


def _body(i: int) -> bytes:
    return b"m%05d-" % i * 12


def _write_and_kill(root: Path, n: int) -> list[_Acked]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(root), str(n)], stdout=subprocess.PIPE, env=env,
                            text=True)
    acked: list[_Acked] = []
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            if line.strip() == "done":
                break
            mid, qid, qoff, phy, size = line.split()
            acked.append(_Acked(mid, int(qid), int(qoff), int(phy), int(size)))
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    assert len(acked) == n and (root / "abort").exists()
    return acked


def _flip(root: Path, phy: int, delta: int = 0, value: bytes | None = None) -> None:
    start = phy - phy % _SEG
    with open(root / "commitlog" / f"{start:020d}", "r+b") as f:
        f.seek(phy - start + delta)
        old = f.read(len(value) if value else 1)
        f.seek(phy - start + delta)
        f.write(value if value else bytes([old[0] ^ 0x5A]))


def _damage_checkpoint(root: Path) -> None:
    path = root / "checkpoint"
    data = bytearray(path.read_bytes())
    at = data.index(b"commitlog_flushed") + len(b'commitlog_flushed": ')
    data[at] = ord("9") if data[at] != ord("9") else ord("1")  # still JSON, a wrong number
    path.write_bytes(bytes(data))
    (root / "abort").touch()


def _torn_record(root: Path, end: int) -> None:
    """What a writer killed inside a copy leaves: a record's first bytes (size, magic, ...), zeroes after."""
    head = (200).to_bytes(4, "big") + (0xDAA320A7).to_bytes(4, "big") + bytes(20) + end.to_bytes(8, "big")
    assert end % _SEG + 200 < _SEG
    _flip(root, end, 0, head)


def _walk(store: MessageStore, qid: int, hi: int) -> tuple[dict[int, bytes], dict[int, int]]:
    """Every offset of a queue: served bodies, and damaged offsets with the CommitLog offset named."""
    served: dict[int, bytes] = {}
    damaged: dict[int, int] = {}
    offset = 0
    while offset < hi:
        page = store.get_messages("q", qid, offset, 64)
        if page.status is GetStatus.CORRUPT_MESSAGE:
            assert page.damaged is not None and page.damaged.queue_offset == offset
            damaged[offset] = page.damaged.phy_offset
        else:
            assert page.status is GetStatus.FOUND, (qid, offset, page.status)
            served.update({m.queue_offset: m.body for m in page.messages})
        assert page.next_offset > offset
        offset = page.next_offset
    return served, damaged


def _check(root: Path, acked: list[_Acked], bad: set[int]) -> list[tuple[int, int]]:
    """Open the store and check every acknowledged message; returns the quarantine as (offset, size)."""
    store = MessageStore(small_config(root))
    store.start()
    try:
        named = {r.phy_offset for r in store.quarantined()}
        assert named == {acked[i].phy for i in bad}
        for qid in (0, 1):
            mine = [(i, a) for i, a in enumerate(acked) if a.queue_id == qid]
            assert store.max_offset("q", qid) == len(mine)
            served, damaged = _walk(store, qid, len(mine))
            assert damaged == {a.queue_offset: a.phy for i, a in mine if i in bad}
            assert served == {a.queue_offset: _body(i) for i, a in mine if i not in bad}
        for i in sorted(bad):
            with pytest.raises(StoreError):
                store.get_message(acked[i].msg_id)
        assert store.get_message(acked[1].msg_id).body == _body(1)
        return [(r.phy_offset, r.size) for r in store.quarantined()]
    finally:
        store.shutdown()


@pytest.mark.parametrize("lose_queues", [False, True], ids=["queues-kept", "queues-lost"])
def test_damaged_records_are_quarantined_not_cut(tmp_path: Path, lose_queues: bool) -> None:
    root = tmp_path / "s"
    n = 10_000
    acked = _write_and_kill(root, n)
    seg_last = next(i for i in range(n - 1) if acked[i + 1].phy // _SEG != acked[i].phy // _SEG)
    bad = {0, 5000, seg_last, seg_last + 1, 7001, n - 1}
    for i in bad - {7001}:
        _flip(root, acked[i].phy, 88 + 5)  # a body byte
    _flip(root, acked[7001].phy, 0, bytes(12))  # size, magic and CRC zeroed: found again by resynchronising
    end = acked[-1].phy + acked[-1].size
    _torn_record(root, end)
    _damage_checkpoint(root)
    if lose_queues:
        shutil.rmtree(root / "consumequeue")
        shutil.rmtree(root / "index")
    first = _check(root, acked, bad)
    assert first == sorted((acked[i].phy, acked[i].size) for i in bad)
    assert _check(root, acked, bad) == first  # a clean restart: the same answer
    _damage_checkpoint(root)
    assert _check(root, acked, bad) == first  # a second unclean recovery: the same answer
    store = MessageStore(small_config(root))
    store.start()
    try:
        assert store.max_phy_offset() == end, "the torn record after the last message is cut"
        r = store.put_messages([Message("q", b"after", queue_id=1)])
        assert r[0].queue_offset == n // 2 and r[0].phy_offset == end
    finally:
        store.shutdown()


def test_a_torn_tail_after_a_damaged_checkpoint_is_still_cut(tmp_path: Path) -> None:
    root = tmp_path / "s"
    acked = _write_and_kill(root, 600)
    _flip(root, acked[-1].phy, 88 + 3)  # the last record, nothing after it: a torn write
    _damage_checkpoint(root)
    store = MessageStore(small_config(root))
    store.start()
    try:
        assert store.quarantined() == []
        assert store.max_phy_offset() == acked[-1].phy
        assert store.max_offset("q", 1) == 299
        assert store.put_messages([Message("q", b"x", queue_id=1)])[0].queue_offset == 299
    finally:
        store.shutdown()
