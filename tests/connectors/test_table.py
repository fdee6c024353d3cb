"""The Delta table keeps every row exactly once, whoever retries or races."""

from __future__ import annotations

import threading
from pathlib import Path

import pyarrow.compute as pc
from deltalake import DeltaTable

from connectors.rows import batch_to_table
from connectors.table import MirrorTable

from .batches import make_batch


def _offsets(uri: str) -> list[int]:
    return sorted(DeltaTable(uri).to_pyarrow_table(columns=["commitlog_offset"])["commitlog_offset"].to_pylist())


def test_a_replayed_append_is_skipped_and_the_resume_point_survives_reopening(tmp_path: Path) -> None:
    uri = str(tmp_path / "messages")
    table = MirrorTable(uri, "broker-a")
    assert table.committed_offset() is None
    batch = make_batch(0, 10)
    rows = batch_to_table(batch, from_offset=0, bodies=True)
    assert table.append(rows, batch.end_offset) == 10
    assert table.append(rows, batch.end_offset) == 0  # a replay after a crash
    reopened = MirrorTable(uri, "broker-a")
    assert reopened.committed_offset() == batch.end_offset
    assert MirrorTable(uri, "broker-b").committed_offset() is None
    assert _offsets(uri) == list(range(0, 1000, 100))


def test_an_overlapping_append_writes_only_the_new_rows(tmp_path: Path) -> None:
    uri = str(tmp_path / "messages")
    table = MirrorTable(uri, "a")
    first = make_batch(0, 5)
    table.append(batch_to_table(first, from_offset=0, bodies=True), first.end_offset)
    wider = make_batch(0, 8)
    assert table.append(batch_to_table(wider, from_offset=0, bodies=True), wider.end_offset) == 3
    assert _offsets(uri) == list(range(0, 800, 100))


def test_two_writers_racing_with_the_same_app_id_leave_no_duplicates(tmp_path: Path) -> None:
    uri = str(tmp_path / "messages")
    MirrorTable(uri, "a")
    chunks = [make_batch(i * 1000, 10) for i in range(12)]

    def writer() -> None:
        table = MirrorTable(uri, "a")
        for chunk in chunks:
            table.append(batch_to_table(chunk, from_offset=0, bodies=True), chunk.end_offset)

    threads = [threading.Thread(target=writer) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    expected = sorted(int(o) for c in chunks for o in c.phy_offsets)
    assert _offsets(uri) == expected
    assert MirrorTable(uri, "a").committed_offset() == chunks[-1].end_offset


def test_compaction_checkpoint_and_vacuum_keep_the_rows(tmp_path: Path) -> None:
    uri = str(tmp_path / "messages")
    table = MirrorTable(uri, "a")
    for i in range(6):
        b = make_batch(i * 1000, 7)
        table.append(batch_to_table(b, from_offset=0, bodies=True), b.end_offset)
    before = DeltaTable(uri).to_pyarrow_table().sort_by("commitlog_offset")
    files_before = len(DeltaTable(uri).file_uris())
    table.compact()
    table.checkpoint()
    table.vacuum(0)
    after = DeltaTable(uri)
    assert len(after.file_uris()) < files_before
    assert after.to_pyarrow_table().sort_by("commitlog_offset").equals(before)
    assert after.transaction_version("a") == 5 * 1000 + 700
    assert any(p.name.endswith(".checkpoint.parquet") for p in (tmp_path / "messages" / "_delta_log").iterdir())
    assert pc.count_distinct(after.to_pyarrow_table()["commitlog_offset"]).as_py() == 42
