"""MessageStore end to end on disk: append, read back, roll, lookups, retention, threads."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from store import GetStatus, Message, MessageStore, StoreLockedError
from store import codec
from store.codec import BLANK_MAGIC, MESSAGE_MAGIC
from tests.store.conftest import small_config


def _wait_dispatched(store: MessageStore, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while store.stats()["dispatch_behind_bytes"] and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not store.stats()["dispatch_behind_bytes"], "reput did not catch up"


def _read_all(store: MessageStore, topic: str, qid: int) -> list[bytes]:
    out, offset = [], store.min_offset(topic, qid)
    while True:
        r = store.get_messages(topic, qid, offset, 100)
        if r.status is not GetStatus.FOUND:
            return out
        out += [m.body for m in r.messages]
        offset = r.next_offset


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(st.lists(st.tuples(st.integers(0, 3), st.binary(max_size=2000)), min_size=1, max_size=40),
                        min_size=1, max_size=6))
def test_random_batches_read_back_by_offset(open_store: Callable[..., MessageStore], tmp_path_factory, batches) -> None:
    store = open_store(tmp_path_factory.mktemp("s"), flush_mode="async")
    expected: dict[int, list[bytes]] = {q: [] for q in range(4)}
    for batch in batches:
        results = store.put_messages([Message(topic="prop", body=b, queue_id=q) for q, b in batch])
        for (q, b), r in zip(batch, results):
            assert r.queue_offset == len(expected[q])
            expected[q].append(b)
            assert store.get_message(r.msg_id).body == b
    _wait_dispatched(store)
    for q in range(4):
        assert _read_all(store, "prop", q) == expected[q]
        assert store.max_offset("prop", q) == len(expected[q])


def test_segments_roll_and_records_never_span(open_store: Callable[..., MessageStore], tmp_path) -> None:
    store = open_store()
    bodies = [bytes([i % 251]) * (700 + i) for i in range(300)]
    results = store.put_messages([Message(topic="roll", body=b) for b in bodies])
    seg = store.config.commitlog_segment_bytes
    assert store.stats()["segments"] > 3
    for r in results:
        assert r.phy_offset // seg == (r.phy_offset + r.size - 1) // seg, "a record spans two segments"
    files = sorted((tmp_path / "store" / "commitlog").iterdir())
    assert all(len(f.name) == 20 and int(f.name) % seg == 0 for f in files)
    first = files[0].read_bytes()
    pos = 0
    while int.from_bytes(first[pos + 4 : pos + 8], "big") == MESSAGE_MAGIC:
        pos += int.from_bytes(first[pos : pos + 4], "big")
    assert int.from_bytes(first[pos + 4 : pos + 8], "big") == BLANK_MAGIC
    _wait_dispatched(store)
    assert _read_all(store, "roll", 0) == bodies


def test_pull_statuses_and_tag_filter(open_store: Callable[..., MessageStore]) -> None:
    store = open_store()
    store.put_messages([Message(topic="t", body=b"%d" % i, tags="A" if i % 2 else "B") for i in range(10)])
    _wait_dispatched(store)
    r = store.get_messages("t", 0, 0, 100, tags=frozenset({"A"}))
    assert [m.body for m in r.messages] == [b"1", b"3", b"5", b"7", b"9"] and r.next_offset == 10
    assert store.get_messages("t", 0, 10, 5).status is GetStatus.NO_NEW_MESSAGE
    over = store.get_messages("t", 0, 50, 5)
    assert over.status is GetStatus.OFFSET_OVERFLOW and over.next_offset == 10
    assert store.get_messages("t", 7, 0, 5).status is GetStatus.NO_QUEUE
    assert store.get_messages("t", 0, 0, 3).next_offset == 3


def test_lookup_by_key_and_time(open_store: Callable[..., MessageStore]) -> None:
    store = open_store()
    t0 = int(time.time() * 1000)
    store.put_messages([Message(topic="orders", body=b"o%d" % i, keys=(f"order-{i % 5}",)) for i in range(50)])
    store.put_messages([Message(topic="other", body=b"x", keys=("order-1",))])
    _wait_dispatched(store)
    hits = store.query_by_key("orders", "order-1", t0 - 1000, t0 + 60_000, max_count=64)
    assert sorted(m.body for m in hits) == sorted(b"o%d" % i for i in range(1, 50, 5))
    assert len(store.query_by_key("orders", "order-1", t0 - 1000, t0 + 60_000, max_count=3)) == 3
    assert store.query_by_key("orders", "order-1", 0, t0 - 5000) == []
    off = store.offset_for_timestamp("orders", 0, t0 + 60_000)
    assert off == store.max_offset("orders", 0)
    assert store.offset_for_timestamp("orders", 0, 0) == 0


def test_second_open_is_refused(open_store: Callable[..., MessageStore], tmp_path) -> None:
    open_store(tmp_path / "locked")
    with pytest.raises(StoreLockedError, match="in use by another process"):
        MessageStore(small_config(tmp_path / "locked")).start()


def test_retention_deletes_old_segments_and_moves_min_offset(open_store: Callable[..., MessageStore]) -> None:
    store = open_store(flush_mode="async")
    store.put_messages([Message(topic="r", body=b"z" * 1000) for _ in range(300)])
    _wait_dispatched(store)
    before = store.stats()["segments"]
    deleted = store.run_retention(force=True)
    assert deleted == before - 1 and store.stats()["segments"] == 1
    low = store.min_offset("r", 0)
    assert low > 0
    assert store.get_messages("r", 0, 0, 10).status is GetStatus.OFFSET_TOO_SMALL
    assert len(_read_all(store, "r", 0)) == 300 - low


def test_sync_group_commit_shares_fsyncs(open_store: Callable[..., MessageStore]) -> None:
    store = open_store(flush_mode="sync")
    barrier = threading.Barrier(16)

    def producer(i: int) -> None:
        barrier.wait()
        for j in range(20):
            store.put_messages([Message(topic="g", body=b"%d-%d" % (i, j), queue_id=i % 4)])

    threads = [threading.Thread(target=producer, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stats = store.stats()
    assert stats["commitlog_flushed_offset"] == stats["commitlog_max_offset"]
    assert stats["flushes"] < 320, "every put paid its own fdatasync"


def test_start_and_shutdown_leave_no_threads(tmp_path) -> None:
    before = {t.ident for t in threading.enumerate()}
    for mode in ("sync", "async"):
        s = MessageStore(small_config(tmp_path / mode, flush_mode=mode))
        s.start()
        s.put_messages([Message(topic="x", body=b"1")])
        s.shutdown()
        s.shutdown()
    assert {t.ident for t in threading.enumerate()} == before


def test_disk_past_hard_limit_refuses_writes_and_keeps_data(open_store: Callable[..., MessageStore], tmp_path) -> None:
    from store import DiskFullError

    store = open_store(tmp_path / "full", disk_hard_limit_ratio=0.0001, disk_soft_limit_ratio=0.00005)
    with pytest.raises(DiskFullError, match="hard limit"):
        store.put_messages([Message(topic="t", body=b"x")])
    assert store.max_offset("t", 0) == 0


def test_oversized_message_is_refused_and_nothing_is_written(open_store: Callable[..., MessageStore]) -> None:
    from store import MessageTooLargeError

    store = open_store(max_message_bytes=1000)
    with pytest.raises(MessageTooLargeError, match="limit is 1000 bytes"):
        store.put_messages([Message(topic="t", body=b"ok"), Message(topic="t", body=b"x" * 2000)])
    assert store.stats()["commitlog_max_offset"] == 0


def test_columnar_pull_matches_object_pull(open_store: Callable[..., MessageStore]) -> None:
    store = open_store(flush_mode="async")
    msgs = [Message(topic=f"c{i % 2}", body=b"b%d" % i * (i % 40), queue_id=i % 3, keys=(f"k{i}",),
                    tags="A" if i % 4 else "B", properties={"n": str(i)}) for i in range(900)]
    store.put_messages(msgs)
    _wait_dispatched(store)
    for topic, qid, offset, count, tags, max_bytes in [("c0", 0, 0, 50, None, None), ("c1", 2, 10, 1000, None, None),
                                                       ("c0", 1, 3, 20, frozenset({"B"}), None),
                                                       ("c1", 0, 0, 100, None, 2000), ("c0", 0, 999, 5, None, None),
                                                       ("c0", 9, 0, 5, None, None)]:
        a = store.get_messages(topic, qid, offset, count, tags, max_bytes)
        b = store.get_message_batch(topic, qid, offset, count, tags, max_bytes)
        assert (a.status, a.next_offset, a.min_offset, a.max_offset) == (
            b.status, b.next_offset, b.min_offset, b.max_offset)
        assert [m.body for m in a.messages] == b.batch.bodies
        assert [m.queue_offset for m in a.messages] == b.batch.queue_offsets.tolist()
        assert [m.msg_id for m in a.messages] == b.batch.msg_ids
        assert [m.keys for m in a.messages] == b.batch.keys
        assert [m.properties for m in a.messages] == [b.batch.properties(i) for i in range(len(b.batch))]


class _GateDispatcher:
    """A dispatcher that holds the reput thread until released (a slow Delta mirror, say)."""

    def __init__(self) -> None:
        self.gate = threading.Event()

    def dispatch(self, batch: object) -> None:
        self.gate.wait(10)


def test_wait_visible_waits_for_dispatch_of_what_was_appended(open_store: Callable[..., MessageStore]) -> None:
    store = open_store()
    gate = _GateDispatcher()
    store.add_dispatcher(gate)
    store.put_messages([Message(topic="ryw", body=b"first", queue_id=0, keys=("k1",))])
    time.sleep(0.1)  # the reput thread is now parked in the gate
    assert store.dispatch_behind
    assert store.wait_visible(0.2) is False  # bounded: a stuck dispatcher does not hang readers
    threading.Timer(0.3, gate.gate.set).start()
    assert store.wait_visible(5.0) is True
    assert not store.dispatch_behind
    assert store.max_offset("ryw", 0) == 1
    assert [m.body for m in store.query_by_key("ryw", "k1", 0, 2**62)] == [b"first"]


def test_read_records_returns_the_asked_records_in_log_order_across_segments(
        open_store: Callable[..., MessageStore]) -> None:
    store = open_store()  # 64 KiB segments: 500 records of ~200 B roll several times
    first = store.put_messages([Message(topic="a", body=b"%d" % i * 40, queue_id=0, keys=(f"k{i}",))
                                for i in range(500)])
    other = store.put_messages([Message(topic="b", body=b"other", queue_id=1, tags="t")])
    wanted = [r.msg_id for r in first[::7]] + [other[0].msg_id]
    got = store.read_records(list(reversed(wanted)))  # any order in, CommitLog order out
    assert got.msg_ids == wanted
    assert [bytes(b) for b in got.bodies[:2]] == [b"0" * 40, b"7" * 40]
    assert got.keys[1] == ("k7",) and got.topics[-1] == "b" and got.tags[-1] == "t"
    assert len(store.read_records([])) == 0


def test_a_get_right_after_a_put_sees_it_even_while_dispatch_lags(open_store: Callable[..., MessageStore]) -> None:
    store = open_store()
    gate = _GateDispatcher()
    store.add_dispatcher(gate)
    store.put_messages([Message(topic="lag", body=b"a", queue_id=0)])
    time.sleep(0.1)  # the reput thread now waits in the gate, before it can dispatch the next put
    store.put_messages([Message(topic="lag", body=b"b", queue_id=1, keys=("kb",))])
    assert store.get_messages("lag", 1, 0, settle=False).status is GetStatus.NO_QUEUE  # not dispatched yet
    threading.Timer(0.3, gate.gate.set).start()
    page = store.get_messages("lag", 1, 0)  # waits for the dispatcher instead of answering "nothing"
    assert page.status is GetStatus.FOUND and [m.body for m in page.messages] == [b"b"]
    assert store.get_message_batch("lag", 1, 0).status is GetStatus.FOUND
    assert [m.body for m in store.query_by_key("lag", "kb", 0, 2**62)] == [b"b"]


def test_read_spans_reads_one_run_per_segment_and_marks_what_lies_past_the_end(
        open_store: Callable[..., MessageStore]) -> None:
    """Many records are read with one copy per segment they lie in (not one per record); each comes out
    whole at its offset, and a unit that points past the written log is answered as gone (None)."""
    store = open_store(flush_mode="async")  # 64 KiB segments: 1000 records of ~190 B span 3 or more
    results = store.put_messages([Message(topic="spans", body=b"%04d" % i * 25, queue_id=0) for i in range(1000)])
    phys, sizes = [r.phy_offset for r in results], [r.size for r in results]
    end = store.commitlog.max_offset()
    runs = list(store.commitlog.read_spans(phys + [end + 64], sizes + [200]))
    segment = 64 << 10
    spanned = {p // segment for p in phys}
    assert [(i, j) for i, j, _, _ in runs][-1] == (1000, 1001) and runs[-1][3] is None
    whole = runs[:-1]
    assert len(whole) == len(spanned), f"{len(whole)} reads for records in {len(spanned)} segments"
    assert [i for i, _, _, _ in whole] == sorted({i for i, _, _, _ in whole}) and whole[0][0] == 0
    assert whole[-1][1] == 1000 and all(a[1] == b[0] for a, b in zip(whole, whole[1:]))
    for i, j, lo, buf in whole:
        assert buf is not None and lo // segment == (lo + len(buf) - 1) // segment
        for k in range(i, j):
            assert codec.decode_record(buf, phys[k] - lo, phys[k]).body == b"%04d" % k * 25
