"""HA goes on past a quarantined record: the slave copies the damaged span and quarantines it too.

The master's recovery quarantines a damaged record (unclean stop, damaged
checkpoint, one garbled body in the middle of the log); the master keeps
taking writes.  A slave replicating from it must not stall at the damaged
bytes: it ends with the master's bytes at the master's offsets, the same
quarantine list, CORRUPT_MESSAGE at the damaged queue offset and every other
message served, and it keeps following new writes.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from store import GetStatus, Message, MessageStore, PutResult
from store.ha import protocol

from .test_ha import Pair, commitlog_files, pair, produce, wait_until  # noqa: F401 (pair: a fixture)

_SEG = 64 << 10


def _damaged_master_dir(open_store: Callable[..., MessageStore], root: Path) -> PutResult:
    """Write 300 messages, stop, garble one body in the middle and make the next start scan from the start."""
    s = open_store(root)
    results = s.put_messages([Message("ha", b"body-%04d;" % i * 5, queue_id=i % 2, keys=(f"k{i}",), tags="t")
                              for i in range(300)])
    s.shutdown()
    bad = results[150]
    start = bad.phy_offset - bad.phy_offset % _SEG
    with open(root / "commitlog" / f"{start:020d}", "r+b") as f:
        f.seek(bad.phy_offset - start + 88 + 3)
        byte = f.read(1)[0]
        f.seek(bad.phy_offset - start + 88 + 3)
        f.write(bytes([byte ^ 0x5A]))
    (root / "checkpoint").write_bytes(b"{not a checkpoint")
    (root / "abort").touch()
    return bad


def _walk(store: MessageStore, qid: int) -> tuple[dict[int, bytes], dict[int, int]]:
    served: dict[int, bytes] = {}
    damaged: dict[int, int] = {}
    offset, hi = 0, store.max_offset("ha", qid)
    while offset < hi:
        page = store.get_messages("ha", qid, offset, 64)
        if page.status is GetStatus.CORRUPT_MESSAGE:
            assert page.damaged is not None
            damaged[offset] = page.damaged.phy_offset
        else:
            assert page.status is GetStatus.FOUND, (qid, offset, page.status)
            served.update({m.queue_offset: m.body for m in page.messages})
        offset = page.next_offset
    return served, damaged


def test_slave_replicates_past_a_quarantined_record(pair: Pair, open_store: Callable[..., MessageStore]) -> None:
    bad = _damaged_master_dir(open_store, pair.tmp_path / "master")
    master, ha = pair.master()
    (rec,) = master.quarantined()
    assert (rec.phy_offset, rec.queue_id, rec.queue_offset) == (bad.phy_offset, bad.queue_id, bad.queue_offset)
    produce(master, 30)  # writes after the damage, across segments
    slave, client = pair.slave(ha)
    assert wait_until(lambda: slave.max_phy_offset() == master.max_phy_offset()), client.status()
    assert client.status().error is None and client.status().connected
    assert commitlog_files(slave) == commitlog_files(master)
    assert slave.quarantined() == master.quarantined()
    assert slave.wait_visible(10) and master.wait_visible(10)
    for qid in (0, 1):
        assert _walk(slave, qid) == _walk(master, qid)
    served, damaged = _walk(slave, bad.queue_id)
    assert damaged == {bad.queue_offset: bad.phy_offset}
    assert set(served) == set(range(master.max_offset("ha", bad.queue_id))) - {bad.queue_offset}
    produce(master, 5, seed=9)  # and it keeps following
    assert wait_until(lambda: slave.max_phy_offset() == master.max_phy_offset())
    assert commitlog_files(slave) == commitlog_files(master)


def test_a_slave_restarted_after_the_span_keeps_its_quarantine(pair: Pair,
                                                                open_store: Callable[..., MessageStore]) -> None:
    bad = _damaged_master_dir(open_store, pair.tmp_path / "master")
    master, ha = pair.master()
    slave, client = pair.slave(ha)
    assert wait_until(lambda: slave.max_phy_offset() == master.max_phy_offset())
    client.stop()
    slave.shutdown()
    again = open_store(pair.tmp_path / "slave", store_host="127.0.0.2:10911")
    assert [r.phy_offset for r in again.quarantined()] == [bad.phy_offset]
    assert again.get_messages("ha", bad.queue_id, bad.queue_offset, 4).status is GetStatus.CORRUPT_MESSAGE


def test_quarantined_frames_round_trip() -> None:
    meta = {"phy_offset": 7, "size": 3, "reason": "x", "topic": "t", "queue_id": 0, "queue_offset": 1}
    wire = protocol.encode_quarantined(7, meta, b"abc") + protocol.encode_frame(10, b"defg")
    frames, used = protocol.parse_frames(wire, 1 << 10)
    assert used == len(wire) and frames[1] == (10, b"defg")
    offset, span = frames[0]
    assert offset == 7 and isinstance(span, protocol.QuarantinedSpan) and (span.meta, span.data) == (meta, b"abc")
