"""The epoch file, the consistent point and the offline CommitLog cut (store/ha/epoch_file.py, truncate.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from store import Message, MessageStore, StoreConfig
from store.ha.epoch_file import EpochFile, EpochMismatchError, truncate_point
from store.ha.truncate import truncate_commitlog


def test_epoch_file_survives_a_reopen_and_a_damaged_one_is_set_aside(tmp_path: Path) -> None:
    f = EpochFile(tmp_path / "epochs")
    f.append(1, 0)
    f.append(2, 500)
    f.append(2, 900)  # not newer: ignored
    assert EpochFile(tmp_path / "epochs").load() == [(1, 0), (2, 500)]
    f.cut(400)
    assert EpochFile(tmp_path / "epochs").load() == [(1, 0)]
    (tmp_path / "epochs").write_text("1\n123\n1 0\n")
    assert EpochFile(tmp_path / "epochs").load() == [] and (tmp_path / "epochs.corrupt").exists()


@pytest.mark.parametrize("local,master,point", [
    ([(1, 0)], [(1, 0)], None),                          # same epoch: nothing to cut
    ([(1, 0)], [(1, 0), (2, 300)], 300),                  # old master of epoch 1 returns: cut at 300
    ([(1, 0), (2, 100)], [(1, 0), (3, 80)], 80),          # both moved on: the earlier end wins
    ([(1, 0), (3, 80)], [(1, 0), (3, 80), (4, 90)], 90),
    ([], [(1, 0)], None),                                 # a new, empty replica
])
def test_truncate_point_is_the_end_of_the_last_shared_epoch(local: list[tuple[int, int]],
                                                            master: list[tuple[int, int]], point: int | None) -> None:
    assert truncate_point(local, master) == point


def test_no_shared_epoch_refuses_rather_than_wiping_the_log() -> None:
    with pytest.raises(EpochMismatchError):
        truncate_point([(5, 0)], [(1, 0)])


def test_a_cut_log_recovers_with_queues_ending_at_the_cut(tmp_path: Path) -> None:
    cfg = StoreConfig(root_dir=tmp_path / "s", commitlog_segment_bytes=1 << 16, consumequeue_segment_units=100,
                      index_slots=100, index_entries=400)
    store = MessageStore(cfg)
    store.start()
    first = store.put_messages([Message("t", f"m{i}".encode(), queue_id=0) for i in range(10)])
    cut = first[-1].phy_offset + first[-1].size
    store.put_messages([Message("t", f"late{i}".encode(), queue_id=0) for i in range(2000)])  # > one segment
    store.wait_visible(5)
    store.shutdown()
    assert truncate_commitlog(cfg.root, cfg.commitlog_segment_bytes, cut) > 0
    again = MessageStore(cfg)
    again.start()
    try:
        assert again.max_phy_offset() == cut
        assert again.max_offset("t", 0) == 10
        got = again.get_messages("t", 0, 0, 100)
        assert [m.body for m in got.messages] == [f"m{i}".encode() for i in range(10)]
    finally:
        again.shutdown()
