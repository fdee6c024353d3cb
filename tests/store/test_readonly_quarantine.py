"""The read-only reader (the Delta mirror child's) skips quarantined records instead of raising or serving them.

The owner's recovery quarantines a damaged record (unclean stop, damaged
checkpoint); a ReadOnlyCommitLog next to the running owner then reads the
whole log: every other record, none of the damaged one, no error.  A record
quarantined while the reader is open (the list file changes) is skipped too.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from store import Message, MessageStore, PutResult
from store.quarantine import QuarantinedRecord
from store.readonly import ReadOnlyCommitLog

_SEG = 64 << 10


def _flip(root: Path, phy: int, at: int) -> None:
    start = phy - phy % _SEG
    with open(root / "commitlog" / f"{start:020d}", "r+b") as f:
        f.seek(phy - start + at)
        byte = f.read(1)[0]
        f.seek(phy - start + at)
        f.write(bytes([byte ^ 0x5A]))


def _owner(open_store: Callable[..., MessageStore], root: Path, at: int | None) -> tuple[MessageStore, list[PutResult]]:
    s = open_store(root)
    results = s.put_messages([Message("t", b"m%04d;" % i * 8, queue_id=i % 2, keys=(f"k{i}",)) for i in range(400)])
    s.shutdown()
    if at is not None:
        _flip(root, results[200].phy_offset, at)
        (root / "checkpoint").write_bytes(b"{damaged")
        (root / "abort").touch()
    return open_store(root), results


def _read_all(reader: ReadOnlyCommitLog, limit: int) -> list[int]:
    phys: list[int] = []
    offset = 0
    for _ in range(10_000):
        if offset >= limit:
            break
        batch, offset = reader.read_batch(offset, limit, 16 << 10)
        if batch is not None:
            phys += batch.phy_offsets.tolist()
    return phys


@pytest.mark.parametrize("at", [7, 88 + 3], ids=["magic", "body"])
def test_reader_skips_a_quarantined_record(open_store: Callable[..., MessageStore], tmp_path: Path, at: int) -> None:
    owner, results = _owner(open_store, tmp_path / "s", at)
    assert [r.phy_offset for r in owner.quarantined()] == [results[200].phy_offset]
    reader = ReadOnlyCommitLog(tmp_path / "s" / "commitlog", _SEG, "127.0.0.1:10911")
    try:
        phys = _read_all(reader, owner.max_phy_offset())
    finally:
        reader.close()
    assert phys == [r.phy_offset for i, r in enumerate(results) if i != 200]


def test_reader_follows_a_quarantine_list_that_changes(open_store: Callable[..., MessageStore],
                                                       tmp_path: Path) -> None:
    owner, results = _owner(open_store, tmp_path / "s", None)
    reader = ReadOnlyCommitLog(tmp_path / "s" / "commitlog", _SEG, "127.0.0.1:10911")
    try:
        assert len(_read_all(reader, owner.max_phy_offset())) == 400
        bad = results[50]
        owner.commitlog.quarantine.add(QuarantinedRecord(bad.phy_offset, bad.size, "test", "t", 0, 25))
        owner.commitlog.quarantine.save()
        phys = _read_all(reader, owner.max_phy_offset())
    finally:
        reader.close()
    assert phys == [r.phy_offset for i, r in enumerate(results) if i != 50]
