"""A page of records in a few sizes (a Kafka producer's batches: each put's first record carries a
stamp property) is checked one gather per size: a flipped byte in a record of either size is
never served, the page stops before it and a pull at it answers CORRUPT_MESSAGE."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from store import GetStatus, MessageStore
from store.columns import GroupRows
from store.pull import PullColumns

_PUTS, _PER = 12, 40


def _fill(s: MessageStore) -> list[int]:
    """The physical offset of every record, by queue offset."""
    phys: list[int] = []
    for i in range(_PUTS):
        bodies = [b"%06d" % (i * _PER + j) + b"." * 94 for j in range(_PER)]
        done = s.put_column_groups("sizes", [(0, bodies, None)], rows=[GroupRows(None, {"STAMP": f"put-{i}"})])
        phys += done[0].phy_offsets.tolist()
    s.wait_visible(10)
    return phys


@pytest.mark.parametrize("victim", [5 * _PER + 17, 7 * _PER], ids=["plain", "stamped"])
def test_a_damaged_record_of_either_size_is_never_served(open_store: Callable[..., MessageStore], tmp_path: Path,
                                                         victim: int) -> None:
    root = tmp_path / "s"
    s = open_store(root, commitlog_segment_bytes=1 << 20)
    phys = _fill(s)
    page = s.get_message_columns("sizes", 0, 0, 10_000)
    assert isinstance(page, PullColumns) and len(page) == _PUTS * _PER  # read whole, checked by size groups
    s.shutdown()
    seg = min((root / "commitlog").iterdir())
    with open(seg, "r+b") as f:
        f.seek(phys[victim] + 88 + 3)  # a body byte
        byte = f.read(1)
        f.seek(phys[victim] + 88 + 3)
        f.write(bytes([byte[0] ^ 0x01]))
    s = open_store(root, commitlog_segment_bytes=1 << 20)
    page = s.get_message_columns("sizes", 0, 0, 10_000)
    assert page.status is GetStatus.FOUND and page.next_offset == victim  # stops before it
    assert s.get_message_columns("sizes", 0, victim, 10).status is GetStatus.CORRUPT_MESSAGE
    after = s.get_message_columns("sizes", 0, victim + 1, 10_000)
    assert after.status is GetStatus.FOUND and after.next_offset == _PUTS * _PER
