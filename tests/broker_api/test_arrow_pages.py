"""Arrow pull pages built per page from flat buffers equal the per-column path, row for row."""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker_api.http.pull_arrow import columns_to_arrow
from broker_api.http.wire import batch_to_arrow
from store import PullBatch, PullColumns
from store.config import StoreConfig
from store.message import GetStatus, Message
from store.message_store import MessageStore


def _arrow(page: PullBatch | PullColumns, fields: frozenset[str] | None = None) -> pa.Table:
    raw = columns_to_arrow(page, fields) if isinstance(page, PullColumns) else batch_to_arrow(page.batch, fields)
    return pa.ipc.open_stream(raw).read_all()


def _store(tmp_path: Path, seed: int, n: int, segment_bytes: int = 1 << 18) -> MessageStore:
    store = MessageStore(StoreConfig(root_dir=tmp_path, commitlog_segment_bytes=segment_bytes))
    store.start()
    rnd = random.Random(seed)
    for lo in range(0, n, 250):
        store.put_messages([Message(
            "mix", bytes(rnd.randrange(256) for _ in range(rnd.randrange(0, 200))) + str(i).encode(),
            queue_id=i % 3, keys=tuple(f"k{i}-{j}" for j in range(rnd.randrange(3))),
            tags=rnd.choice([None, "a", "bé"]),
            properties={f"p{j}": f"v{i}é{j}" for j in range(rnd.randrange(3))},
        ) for i in range(lo, min(n, lo + 250))])
    assert store.wait_visible(10)
    return store


@settings(max_examples=3, deadline=None)
@given(seed=st.integers(0, 1000), page=st.integers(5, 280), max_bytes=st.sampled_from([None, 3000, 1 << 20]))
def test_flat_pages_equal_column_pages_over_a_whole_queue(tmp_path_factory: object, seed: int, page: int,
                                                          max_bytes: int | None) -> None:
    tmp = tmp_path_factory.mktemp("flat")  # type: ignore[attr-defined]
    store = _store(tmp, seed, 600, segment_bytes=1 << 16)  # 200 per queue over several segments
    try:
        flat_pages = 0
        for qid in range(3):
            offset = 0
            while True:
                flat = store.get_message_columns("mix", qid, offset, page, None, max_bytes)
                count = len(flat) if isinstance(flat, PullColumns) else page  # a flat page may stop at a segment end
                cols = store.get_message_batch("mix", qid, offset, count, None, max_bytes)
                flat_pages += isinstance(flat, PullColumns)
                assert (flat.status, flat.next_offset, flat.min_offset, flat.max_offset) == (
                    cols.status, cols.next_offset, cols.min_offset, cols.max_offset)
                assert _arrow(flat).equals(_arrow(cols))
                some = frozenset({"body", "offset", "keys", "born_timestamp"})
                assert _arrow(flat, some).equals(_arrow(cols, some))
                assert _arrow(flat, some).column_names == ["offset", "keys", "body", "born_timestamp"]
                if flat.status != GetStatus.FOUND:
                    break
                offset = flat.next_offset
            assert offset == 200
        assert flat_pages > 3
    finally:
        store.shutdown()


def test_a_tag_filter_or_a_damaged_record_takes_the_checked_path(tmp_path: Path) -> None:
    store = _store(tmp_path, 7, 300)
    try:
        tagged = store.get_message_columns("mix", 0, 0, 100, frozenset({"a"}))
        assert isinstance(tagged, PullBatch) and set(tagged.batch.tags) == {"a"}
        first = store.get_message_batch("mix", 1, 0, 1).batch
        seg = store.commitlog.queue.find(int(first.phy_offsets[0]))
        assert seg is not None
        body_at = int(first.phy_offsets[0]) - seg.start_offset + 88  # first body byte
        with open(seg.path, "r+b") as f:
            f.seek(body_at)
            byte = f.read(1)
            f.seek(body_at)
            f.write(bytes([byte[0] ^ 0xFF]))
        damaged = store.get_message_columns("mix", 1, 0, 50)
        assert damaged.status == GetStatus.CORRUPT_MESSAGE and damaged.next_offset == 1
        assert store.get_message_columns("mix", 1, 1, 50).status == GetStatus.FOUND
    finally:
        store.shutdown()


def _equal_store(tmp_path: Path, puts: int = 6, per_queue: int = 40) -> MessageStore:
    """Bodies of one length, several queues per put (as an Arrow produce writes them): runs of equal records."""
    store = MessageStore(StoreConfig(root_dir=tmp_path, commitlog_segment_bytes=1 << 20))
    store.start()
    for p in range(puts):
        store.put_column_groups("eq", [(q, [b"%03d-%05d-" % (q, p * per_queue + i) * 8 for i in range(per_queue)],
                                        [f"k{p}-{i}" for i in range(per_queue)]) for q in range(3)])
    assert store.wait_visible(10)
    return store


def test_pages_of_equal_records_are_flat_and_equal_the_column_path(tmp_path: Path) -> None:
    store = _equal_store(tmp_path)
    try:
        for qid in range(3):
            flat = store.get_message_columns("eq", qid, 5, 200)
            cols = store.get_message_batch("eq", qid, 5, 200)
            assert isinstance(flat, PullColumns) and len(flat) == 200 and flat.next_offset == 205
            assert _arrow(flat).equals(_arrow(cols))
            bodies = _arrow(flat, frozenset({"body"})).column("body").to_pylist()
            assert bodies[0] == b"%03d-%05d-" % (qid, 5) * 8 and bodies[-1] == b"%03d-%05d-" % (qid, 204) * 8
    finally:
        store.shutdown()


@pytest.mark.parametrize("where", [88 + 17, 8, 88 + 80 + 1 + 1], ids=["body byte", "stored crc", "topic byte"])
def test_a_damaged_record_among_equal_ones_is_found_and_named(tmp_path: Path, where: int) -> None:
    store = _equal_store(tmp_path)
    try:
        victim = store.get_message_batch("eq", 1, 97, 1).batch
        seg = store.commitlog.queue.find(int(victim.phy_offsets[0]))
        assert seg is not None
        at = int(victim.phy_offsets[0]) - seg.start_offset + where
        with open(seg.path, "r+b") as f:
            f.seek(at)
            byte = f.read(1)
            f.seek(at)
            f.write(bytes([byte[0] ^ 0x01]))
        before = store.get_message_columns("eq", 1, 0, 200)
        assert before.status == GetStatus.FOUND and before.next_offset == 97  # the page stops before it
        assert _arrow(before, frozenset({"offset"})).column("offset").to_pylist() == list(range(97))
        damaged = store.get_message_columns("eq", 1, 97, 200)
        assert damaged.status == GetStatus.CORRUPT_MESSAGE and damaged.next_offset == 98
        assert damaged.damaged is not None and damaged.damaged.queue_offset == 97
        after = store.get_message_columns("eq", 1, 98, 200)
        assert isinstance(after, PullColumns) and after.next_offset == 240
        assert all(isinstance(store.get_message_columns("eq", q, 0, 240), PullColumns) for q in (0, 2))
    finally:
        store.shutdown()


def test_records_without_properties_give_empty_keys_and_null_tags(tmp_path: Path) -> None:
    """A bulk produce's records carry no keys, tags or properties: the flat page says so exactly
    as the column path does (the source's ``key`` column is then null)."""
    store = MessageStore(StoreConfig(root_dir=tmp_path, commitlog_segment_bytes=1 << 20))
    store.start()
    try:
        store.put_column_groups("bare", [(q, [b"v%04d" % i for i in range(300)], None) for q in range(2)])
        assert store.wait_visible(10)
        for qid in range(2):
            flat = store.get_message_columns("bare", qid, 10, 250)
            cols = store.get_message_batch("bare", qid, 10, 250)
            assert isinstance(flat, PullColumns) and len(flat) == 250 and not len(flat.properties)
            assert _arrow(flat).equals(_arrow(cols))
            page = _arrow(flat)
            assert page.column("keys").to_pylist() == [[]] * 250
            assert page.column("tags").null_count == 250
            assert page.column("properties").to_pylist() == [[]] * 250
            assert page.column("body").to_pylist()[0] == b"v0010"
    finally:
        store.shutdown()


def test_a_page_is_recent_only_within_the_newest_bytes_of_the_log(tmp_path: Path) -> None:
    """The broker builds recent pages on its event loop and older ones (maybe on disk) in a thread."""
    from store.pull import page_is_recent

    store = _equal_store(tmp_path)
    try:
        cq, log = store.queues.get("eq", 0), store.commitlog
        size = log.max_offset() - log.min_offset()
        assert page_is_recent(log, cq, 0, size)
        assert not page_is_recent(log, cq, 0, size // 2)
        assert page_is_recent(log, cq, 239, size // 2)  # the queue's last record was written last
        assert page_is_recent(log, cq, 240, 0)  # the end of the queue: nothing to read
        assert page_is_recent(log, None, 0, 0)  # an unknown queue: answered without reading
    finally:
        store.shutdown()


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_the_page_topic_check_agrees_with_a_byte_by_byte_comparison(data: st.DataObject) -> None:
    """Runs of evenly spaced records are compared through strided views; any layout answers as
    comparing every record's bytes one by one does."""
    import numpy as np

    from store.page_bytes import equal_at, spans

    value = np.frombuffer(data.draw(st.binary(min_size=1, max_size=6)), np.uint8)
    step = data.draw(st.integers(len(value), 40))
    runs = data.draw(st.lists(st.integers(1, 30), min_size=1, max_size=4))
    starts, at = [], data.draw(st.integers(0, 5))
    for length in runs:
        starts += [at + i * step for i in range(length)]
        at = starts[-1] + step + data.draw(st.integers(1, 9))  # the next run: another spacing
    u8 = np.zeros(starts[-1] + len(value), np.uint8)
    for s in starts:
        u8[s:s + len(value)] = value
    if data.draw(st.booleans()):  # one record's byte changed
        u8[data.draw(st.sampled_from(starts)) + data.draw(st.integers(0, len(value) - 1))] ^= 1
    idx = np.array(starts, np.int64)
    assert equal_at(u8, idx, value) == bool((spans(u8, idx, len(value)) == value).all())
