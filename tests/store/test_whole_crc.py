"""A record is checked whole: one flipped byte in any field is caught by every read path.

Each case writes messages (keys, a tag, a user property), shuts the store
down cleanly, flips one byte of one field of one record in the segment file,
reopens, and asks for that record every way the store serves it: pulls (three
page builders), by id, by key, by ids in bulk, ``store verify``, and an HA
slave receiving the bytes.  None may serve it as good.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from store import CorruptRecordError, GetStatus, Message, MessageStore, PutResult, StoreError
from store.codec import HEADER
from store.verify import verify_commitlog

from .conftest import small_config

_SEG = 64 << 10
_BODY = b"payload-" * 6
_N = 80  # enough equal records for the batched (run) CRC checks

# (field, offset of the byte flipped from the record start; negative: from its end)
_FIELDS = [
    ("total size", 3), ("magic", 7), ("body crc", 11), ("queue id", 15), ("flag", 19), ("queue offset", 27),
    ("physical offset", 35), ("sys flag (WCRC bit)", 37), ("sys flag", 39), ("born timestamp", 47),
    ("born host", 55), ("store timestamp", 63), ("store host", 71), ("reconsume times", 75),
    ("prepared offset", 83), ("body length", 87), ("body", 88 + 3), ("topic length", 88 + len(_BODY)),
    ("topic", 88 + len(_BODY) + 2), ("properties length", 88 + len(_BODY) + 1 + 5 + 1),
    ("tag", 88 + len(_BODY) + 1 + 5 + 2 + 6), ("key", -28), ("user property", -17), ("WCRC mark", -12),
    ("WCRC digit", -5), ("WCRC closing byte", -1),
]


def _fill(store: MessageStore) -> list[PutResult]:
    return store.put_messages([Message("topic", _BODY, keys=(f"key{i:02d}",), tags="TagA", properties={"p": "v"})
                               for i in range(_N)])


def _flip(root: Path, phy: int, at: int, mask: int = 0x01) -> None:
    start = phy - phy % _SEG
    with open(root / "commitlog" / f"{start:020d}", "r+b") as f:
        f.seek(phy - start + at)
        old = f.read(1)[0]
        f.seek(phy - start + at)
        f.write(bytes([old ^ mask]))


def _assert_never_served(s: MessageStore, r: PutResult, what: str) -> None:
    for read in (s.get_messages, s.get_message_batch, s.get_message_columns):
        page = read("topic", 0, r.queue_offset, 8)
        assert page.status is GetStatus.CORRUPT_MESSAGE, (what, read.__name__, page.status)
        assert page.damaged is not None and page.damaged.phy_offset == r.phy_offset
        before = read("topic", 0, 0, _N)
        assert before.next_offset == r.queue_offset, (what, read.__name__)
    with pytest.raises(CorruptRecordError):
        s.get_message(r.msg_id)
    with pytest.raises(CorruptRecordError):
        s.query_by_key("topic", f"key{r.queue_offset:02d}", 0, 2**62)
    with pytest.raises(CorruptRecordError):
        s.read_records([r.msg_id])


@pytest.mark.parametrize("what,at", _FIELDS, ids=[f for f, _ in _FIELDS])
def test_a_flipped_byte_in_any_field_is_never_served(open_store: Callable[..., MessageStore], tmp_path: Path,
                                                     what: str, at: int) -> None:
    root = tmp_path / "m"
    s = open_store(root)
    put = _fill(s)
    s.shutdown()
    victim = put[_N // 2]
    _flip(root, victim.phy_offset, at if at >= 0 else victim.size + at)
    s = open_store(root)
    _assert_never_served(s, victim, what)
    good = put[_N // 2 + 1]
    assert s.get_message(good.msg_id).properties == {"p": "v"} and s.get_message(good.msg_id).sys_flag == 0
    report = verify_commitlog(root / "commitlog", clean_shutdown=True)
    assert [d.phy_offset for d in report.damaged] == [victim.phy_offset], what
    slave = open_store(tmp_path / "slave")
    data = s.read_commitlog(0, 1 << 20)
    with pytest.raises(CorruptRecordError):
        slave.append_replicated(0, data)
    assert slave.max_phy_offset() <= victim.phy_offset, "nothing from the damaged record on is replicated"


def test_records_written_before_the_whole_crc_stay_readable(open_store: Callable[..., MessageStore],
                                                            tmp_path: Path) -> None:
    """A CommitLog of RocketMQ-layout records without the WCRC pair: served, and checked body only."""
    root = tmp_path / "old"
    (root / "commitlog").mkdir(parents=True)
    records, phy = [], 0
    for i in range(10):
        body, topic, props = b"old-%d" % i, b"legacy", b"KEYS\x01k%d\x02" % i
        tail = bytes([len(topic)]) + topic + len(props).to_bytes(2, "big") + props
        size = 88 + len(body) + len(tail)
        import zlib
        head = HEADER.pack(size, 0xDAA320A7, zlib.crc32(body), 0, 0, i, phy, 0, 1, 0x7F00000100000001, 2,
                           0x7F00000100000001, 0, 0, len(body))
        records.append(head + body + tail)
        phy += size
    seg = b"".join(records)
    (root / "commitlog" / f"{0:020d}").write_bytes(seg + bytes(_SEG - len(seg)))
    s = open_store(root)
    page = s.get_messages("legacy", 0, 0, 32)
    assert [m.body for m in page.messages] == [b"old-%d" % i for i in range(10)]
    assert s.query_by_key("legacy", "k3", 0, 2**62)[0].body == b"old-3"
    s.shutdown()
    _flip(root, len(records[0]) * 0 + sum(map(len, records[:4])), 88 + 1)  # a body byte of record 4
    s = open_store(root)
    assert s.get_messages("legacy", 0, 4, 1).status is GetStatus.CORRUPT_MESSAGE
    with pytest.raises(StoreError):
        s.get_message(s.get_messages("legacy", 0, 3, 1).messages[0].msg_id[:16] + f"{sum(map(len, records[:4])):016X}")
    assert s.get_messages("legacy", 0, 5, 32).next_offset == 10
