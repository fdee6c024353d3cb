"""Crash safety: killed writers, torn and garbled tails, lost ConsumeQueues."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import zlib
from pathlib import Path

from store import GetStatus, Message, MessageStore
from tests.store.conftest import small_config

_WRITER = textwrap.dedent(
    """
    import sys, zlib
    from store import Message, MessageStore, StoreConfig
    root = sys.argv[1]
    s = MessageStore(StoreConfig(root_dir=root, commitlog_segment_bytes=64 << 10, consumequeue_segment_units=1000,
                                 index_slots=1024, index_entries=4096, flush_mode="sync"))
    s.start()
    i = 0
    while True:
        batch = [Message(topic="crash", body=(b"%d:" % (i + j)) * (1 + (i + j) % 37), queue_id=(i + j) % 3,
                         keys=("k%d" % (i + j),)) for j in range(1 + i % 5)]
        for r, m in zip(s.put_messages(batch), batch):
            print(r.msg_id, r.queue_id, r.queue_offset, zlib.crc32(m.body), flush=False)
        sys.stdout.flush()
        i += len(batch)
    """
)


def _read_queue(store: MessageStore, topic: str, qid: int) -> list:
    out, offset = [], store.min_offset(topic, qid)
    while True:
        r = store.get_messages(topic, qid, offset, 200)
        if r.status is not GetStatus.FOUND:
            return out
        out += r.messages
        offset = r.next_offset


def test_sigkill_during_sync_writes_loses_no_acknowledged_message(tmp_path: Path) -> None:
    root = tmp_path / "crash"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(root)], stdout=subprocess.PIPE, env=env, text=True)
    acked: list[tuple[str, int, int, int]] = []
    deadline = time.monotonic() + 30
    assert proc.stdout is not None
    while len(acked) < 1500 and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        msg_id, qid, qoff, crc = line.split()
        acked.append((msg_id, int(qid), int(qoff), int(crc)))
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert len(acked) >= 200, "the writer acknowledged too little before the kill"
    assert (root / "abort").exists()

    store = MessageStore(small_config(root))
    store.start()
    try:
        assert store.recovery["abnormal"] is True
        for msg_id, _qid, _qoff, crc in acked:
            assert zlib.crc32(store.get_message(msg_id).body) == crc
        for qid in range(3):
            msgs = _read_queue(store, "crash", qid)
            assert [m.queue_offset for m in msgs] == list(range(len(msgs))), "queue offsets are not contiguous"
            acked_here = {(q, c) for _, q2, q, c in acked if q2 == qid}
            assert acked_here <= {(m.queue_offset, zlib.crc32(m.body)) for m in msgs}
        before = store.max_offset("crash", 0)
        r = store.put_messages([Message(topic="crash", body=b"after", queue_id=0)])
        assert r[0].queue_offset == before, "queue offsets continue where the recovered queue ends"
    finally:
        store.shutdown()


def _fill(root: Path, n: int = 200) -> list[bytes]:
    store = MessageStore(small_config(root))
    store.start()
    bodies = [b"body-%05d-" % i * 8 for i in range(n)]
    store.put_messages([Message(topic="tail", body=b) for b in bodies])
    store.shutdown()
    return bodies


def _pretend_crash(root: Path) -> None:
    """Roll the checkpoint back to the start and leave the abort marker, as after a crash."""
    cp = json.loads((root / "checkpoint").read_text())
    cp.update(commitlog_flushed=0, logics_flushed=0)
    (root / "checkpoint").write_text(json.dumps(cp))
    (root / "abort").touch()


def _last_segment(root: Path) -> Path:
    return sorted((root / "commitlog").iterdir())[-1]


def test_garbled_tail_is_cut_and_never_served(tmp_path: Path) -> None:
    root = tmp_path / "garbled"
    bodies = _fill(root)
    seg = _last_segment(root)
    data = bytearray(seg.read_bytes())
    rec = len(bodies[-1]) + 88 + 1 + 4 + 2 + 14  # ... topic, properties: the WCRC pair
    start = data.find(bodies[-1]) - 88
    assert int.from_bytes(data[start : start + 4], "big") == rec
    data[start + 100] ^= 0x55  # inside the last record's body
    seg.write_bytes(bytes(data))
    _pretend_crash(root)
    store = MessageStore(small_config(root))
    store.start()
    try:
        got = [m.body for m in _read_queue(store, "tail", 0)]
        assert got == bodies[:-1]
        r = store.put_messages([Message(topic="tail", body=b"fresh")])
        assert r[0].queue_offset == len(bodies) - 1
        deadline = time.monotonic() + 10
        while store.max_offset("tail", 0) < len(bodies) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert [m.body for m in _read_queue(store, "tail", 0)][-1] == b"fresh"
    finally:
        store.shutdown()


def test_truncated_tail_is_cut(tmp_path: Path) -> None:
    root = tmp_path / "torn"
    bodies = _fill(root)
    seg = _last_segment(root)
    data = seg.read_bytes()
    end = data.find(bodies[-1]) + 20
    seg.write_bytes(data[:end])  # the file ends inside the last record
    _pretend_crash(root)
    store = MessageStore(small_config(root))
    store.start()
    try:
        assert [m.body for m in _read_queue(store, "tail", 0)] == bodies[:-1]
    finally:
        store.shutdown()


def test_deleted_consumequeue_directory_is_rebuilt(tmp_path: Path) -> None:
    import shutil

    root = tmp_path / "cq"
    store = MessageStore(small_config(root))
    store.start()
    store.put_messages([Message(topic=f"t{i % 3}", body=b"%d" % i, queue_id=i % 2, keys=("k",)) for i in range(600)])
    store.shutdown()
    shutil.rmtree(root / "consumequeue")
    shutil.rmtree(root / "index")
    store = MessageStore(small_config(root))
    store.start()
    try:
        assert store.topics() == {"t0": [0, 1], "t1": [0, 1], "t2": [0, 1]}
        assert sum(len(_read_queue(store, f"t{t}", q)) for t in range(3) for q in range(2)) == 600
        assert store.max_offset("t0", 0) == 100
        assert len(store.query_by_key("t1", "k", 0, 2**62, max_count=1000)) == 200
    finally:
        store.shutdown()


def test_records_longer_than_the_first_recovery_read_survive_a_crash(tmp_path: Path) -> None:
    """Recovery reads 1 MiB first (a clean log ends just after its safe point); records of 1.5 and
    3 MiB right at the safe point are read whole, not cut as if torn."""
    root = tmp_path / "big"
    config = small_config(root, commitlog_segment_bytes=16 << 20, flush_mode="async")
    store = MessageStore(config)
    store.start()
    bodies = [bytes([65 + i]) * size for i, size in enumerate((3 << 20, 1536 << 10, 100, 3 << 20))]
    for body in bodies:
        store.put_messages([Message(topic="big", body=body)])
    store.shutdown()
    _pretend_crash(root)
    store = MessageStore(config)
    store.start()
    try:
        assert [m.body for m in _read_queue(store, "big", 0)] == bodies
        assert store.recovery["valid_end"] == store.commitlog.max_offset()
    finally:
        store.shutdown()
