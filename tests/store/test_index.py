"""The key index: IndexFile on disk and the IndexService dispatcher."""

from __future__ import annotations

import tempfile
import threading
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from store.dispatch import DispatchBatch
from store.errors import CorruptRecordError, StoreClosedError
from store.index_file import IndexFile, file_size
from store.index_service import IndexService, key_hash
from store.message import SysFlag

T0 = 1_700_000_000_000  # ms
WIDE = (0, 1 << 62)


def make_batch(topics: list[str], keys: list[tuple[str, ...]], phys: list[int],
               stamps: list[int] | None = None, sys_flags: list[int] | None = None) -> DispatchBatch:
    n = len(topics)
    stamps = stamps if stamps is not None else [T0] * n
    return DispatchBatch(
        topics=topics,
        queue_ids=np.zeros(n, np.int32),
        queue_offsets=np.arange(n, dtype=np.int64),
        phy_offsets=np.asarray(phys, dtype=np.int64),
        sizes=np.full(n, 100, np.int32),
        tag_codes=np.zeros(n, np.int64),
        store_timestamps=np.asarray(stamps, dtype=np.int64),
        born_timestamps=np.asarray(stamps, dtype=np.int64),
        sys_flags=np.asarray(sys_flags if sys_flags is not None else [0] * n, dtype=np.int32),
        keys=keys,
        tags=[None] * n,
        properties_raw=[b""] * n,
        bodies=[b"x"] * n,
        msg_ids=[f"{p:032X}" for p in phys],
        end_offset=(max(phys) + 100) if n else 0,
    )


def one_key_batch(topic: str, keys: list[str], first_phy: int, stamps: list[int] | None = None) -> DispatchBatch:
    phys = [first_phy + 100 * i for i in range(len(keys))]
    return make_batch([topic] * len(keys), [(k,) for k in keys], phys, stamps)


def service(path: Path, slots: int = 64, entries: int = 1000) -> IndexService:
    svc = IndexService(path, slots, entries)
    svc.load()
    return svc


# ------------------------------------------------------------------ IndexFile
def test_index_file_round_trip_and_layout(tmp_path: Path) -> None:
    f = IndexFile.create(tmp_path / "f", slots=8, entries=16, begin_phy_offset=500, begin_timestamp=T0)
    assert (tmp_path / "f").stat().st_size == file_size(8, 16) == 40 + 8 * 4 + 16 * 20
    accepted = f.put_batch(np.array([3, 11, 3]), np.array([500, 600, 700]), np.array([T0, T0 + 1500, T0 + 2500]))
    assert accepted == 3
    assert f.query(3, *WIDE, 10) == [700, 500]  # newest first, hash 11 shares slot 3 but is filtered
    assert f.query(11, *WIDE, 10) == [600]
    assert f.query(5, *WIDE, 10) == []
    assert (f.begin_phy_offset, f.end_phy_offset, f.end_timestamp) == (500, 700, T0 + 2500)
    f.close()
    f.close()
    with pytest.raises(StoreClosedError):
        f.query(3, *WIDE, 10)


def test_index_file_time_filter_is_second_granular(tmp_path: Path) -> None:
    f = IndexFile.create(tmp_path / "f", slots=4, entries=16, begin_phy_offset=0, begin_timestamp=T0)
    f.put_batch(np.array([1, 1, 1]), np.array([0, 100, 200]), np.array([T0 + 200, T0 + 5_300, T0 + 9_999]))
    assert f.query(1, T0 + 5_000, T0 + 5_999, 10) == [100]
    assert f.query(1, T0 + 5_900, T0 + 6_000, 10) == [100]  # same second as 5_300
    assert f.query(1, T0 + 6_000, T0 + 8_999, 10) == []
    assert f.query(1, T0, T0 + 9_000, 10) == [200, 100, 0]
    f.close()


def test_index_file_fills_up_and_accepts_part_of_a_batch(tmp_path: Path) -> None:
    f = IndexFile.create(tmp_path / "f", slots=2, entries=5, begin_phy_offset=0, begin_timestamp=T0)
    assert f.put_batch(np.arange(6), np.arange(6) * 10, np.full(6, T0)) == 4  # entry 0 is reserved
    assert f.is_full
    assert f.put_batch(np.array([1]), np.array([99]), np.array([T0])) == 0
    assert f.query(0, *WIDE, 10) == [0]
    assert f.query(3, *WIDE, 10) == [30]
    f.close()


def test_index_file_open_rejects_garbled_header(tmp_path: Path) -> None:
    path = tmp_path / "f"
    IndexFile.create(path, slots=8, entries=16, begin_phy_offset=0, begin_timestamp=T0).close()
    with path.open("r+b") as fh:
        fh.seek(32)
        fh.write(b"\xff\x00\x00\x7f")  # hash_slot_count
    with pytest.raises(CorruptRecordError):
        IndexFile.open(path)
    (tmp_path / "short").write_bytes(b"\x01" * 10)
    with pytest.raises(CorruptRecordError):
        IndexFile.open(tmp_path / "short")


def test_garbled_chain_never_loops(tmp_path: Path) -> None:
    path = tmp_path / "f"
    f = IndexFile.create(path, slots=1, entries=8, begin_phy_offset=0, begin_timestamp=T0)
    f.put_batch(np.array([7, 7, 7]), np.array([0, 100, 200]), np.full(3, T0))
    f.close()
    data = bytearray(path.read_bytes())
    entries_at = 40 + 4
    data[entries_at + 1 * 20 + 16: entries_at + 1 * 20 + 20] = (3).to_bytes(4, "little")  # 1 -> 3: a cycle
    path.write_bytes(bytes(data))
    f = IndexFile.open(path)
    assert f.query(7, *WIDE, 100) == [200, 100, 0]
    f.close()


# --------------------------------------------------------------- IndexService
def test_dispatch_then_query_by_topic_and_key(tmp_path: Path) -> None:
    svc = service(tmp_path)
    svc.dispatch(make_batch(
        ["orders", "orders", "payments", "orders"],
        [("o-1",), ("o-2", "customer-9"), ("o-1",), ()],
        [0, 100, 200, 300],
    ))
    assert svc.query("orders", "o-1", *WIDE, 10) == [0]
    assert svc.query("orders", "o-2", *WIDE, 10) == [100]
    assert svc.query("orders", "customer-9", *WIDE, 10) == [100]
    assert svc.query("payments", "o-1", *WIDE, 10) == [200]
    assert svc.query("orders", "missing", *WIDE, 10) == []
    assert svc.max_phy_offset() == 400
    svc.close()
    with pytest.raises(StoreClosedError):
        svc.query("orders", "o-1", *WIDE, 10)


def test_records_without_keys_still_advance_coverage(tmp_path: Path) -> None:
    svc = service(tmp_path)
    svc.dispatch(make_batch([], [], []))
    assert svc.max_phy_offset() == 0 and svc.files() == []
    svc.dispatch(make_batch(["t", "t"], [(), ()], [0, 100]))
    assert svc.max_phy_offset() == 200  # recovery need not re-dispatch these
    svc.dispatch(make_batch(["t"], [("k",)], [200]))
    svc.close()
    svc = service(tmp_path)
    assert svc.max_phy_offset() == 300
    assert svc.query("t", "k", *WIDE, 10) == [200]
    svc.close()


def test_time_range_and_max_count(tmp_path: Path) -> None:
    svc = service(tmp_path)
    stamps = [T0 + 10_000 * i for i in range(10)]
    svc.dispatch(one_key_batch("t", ["k"] * 10, 0, stamps))
    assert svc.query("t", "k", *WIDE, 100) == [100 * i for i in reversed(range(10))]
    assert svc.query("t", "k", *WIDE, 3) == [900, 800, 700]
    assert svc.query("t", "k", T0 + 20_000, T0 + 40_000, 100) == [400, 300, 200]
    assert svc.query("t", "k", T0 + 200_000, T0 + 300_000, 100) == []
    assert svc.query("t", "k", 0, T0 - 1_000, 100) == []
    svc.close()


def test_duplicates_never_crowd_out_results(tmp_path: Path) -> None:
    svc = service(tmp_path, slots=4, entries=8)
    batch = one_key_batch("t", ["k"] * 6, 0)
    svc.dispatch(batch)
    svc.dispatch(batch)  # a recovery re-dispatch indexes the same records again, across files
    svc.dispatch(make_batch(["t"], [("k", "k", "k")], [600]))  # the same key three times in one record
    assert svc.query("t", "k", *WIDE, 3) == [600, 500, 400]
    assert svc.query("t", "k", *WIDE, 100) == [600, 500, 400, 300, 200, 100, 0]
    svc.close()


def test_transaction_prepared_and_rollback_are_not_indexed(tmp_path: Path) -> None:
    svc = service(tmp_path)
    flags = [0, int(SysFlag.TRANSACTION_PREPARED), int(SysFlag.TRANSACTION_COMMIT),
             int(SysFlag.TRANSACTION_ROLLBACK) | int(SysFlag.COMPRESSED)]
    svc.dispatch(make_batch(["t"] * 4, [("k",)] * 4, [0, 100, 200, 300], sys_flags=flags))
    assert svc.query("t", "k", *WIDE, 10) == [200, 0]
    svc.close()


def test_colliding_keys_chain_within_and_across_batches(tmp_path: Path) -> None:
    svc = service(tmp_path, slots=1, entries=10_000)  # every key in one slot
    keys = [f"k{i % 7}" for i in range(300)]
    svc.dispatch(one_key_batch("t", keys[:150], 0))
    svc.dispatch(one_key_batch("t", keys[150:], 150 * 100))
    for k in range(7):
        expected = [100 * i for i in reversed(range(300)) if keys[i] == f"k{k}"]
        assert svc.query("t", f"k{k}", *WIDE, 1000) == expected
    svc.close()


def test_rolls_to_new_files_and_queries_span_them(tmp_path: Path) -> None:
    svc = service(tmp_path, slots=4, entries=11)  # 10 entries per file
    svc.dispatch(one_key_batch("t", ["a", "b"] * 12, 0))  # 24 entries: 3 files
    svc.dispatch(one_key_batch("t", ["a"] * 8, 2400))
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [f"{phy:020d}" for phy in (0, 1000, 2000, 3000)]
    a_phys = [100 * i for i in range(24) if i % 2 == 0] + [2400 + 100 * i for i in range(8)]
    assert svc.query("t", "a", *WIDE, 100) == sorted(a_phys, reverse=True)
    assert svc.query("t", "a", *WIDE, 5) == sorted(a_phys, reverse=True)[:5]
    assert svc.max_phy_offset() == 3200
    svc.close()


def test_reopen_after_close_answers_the_same(tmp_path: Path) -> None:
    svc = service(tmp_path, slots=16, entries=50)
    rng = np.random.default_rng(7)
    keys = [f"key-{int(x)}" for x in rng.integers(0, 40, 200)]
    svc.dispatch(one_key_batch("t", keys, 0, [T0 + 37 * i for i in range(200)]))
    before = {k: svc.query("t", k, *WIDE, 1000) for k in set(keys)}
    covered = svc.max_phy_offset()
    svc.close()
    again = service(tmp_path, slots=16, entries=50)
    assert {k: again.query("t", k, *WIDE, 1000) for k in set(keys)} == before
    assert again.max_phy_offset() == covered
    again.dispatch(one_key_batch("t", [keys[0]], covered))
    assert again.query("t", keys[0], *WIDE, 1000) == [covered, *before[keys[0]]]
    again.close()


def test_garbled_file_is_renamed_aside_and_service_still_works(tmp_path: Path) -> None:
    svc = service(tmp_path, slots=4, entries=11)
    svc.dispatch(one_key_batch("t", ["a"] * 25, 0))
    svc.close()
    middle = tmp_path / f"{1000:020d}"
    middle.write_bytes(b"\x00" * 40)  # header of zeros: 0 slots
    svc = service(tmp_path, slots=4, entries=11)
    assert (tmp_path / f"{1000:020d}.corrupt").exists() and not middle.exists()
    assert svc.query("t", "a", *WIDE, 100) == [2400, 2300, 2200, 2100, 2000] + [900 - 100 * i for i in range(10)]
    svc.dispatch(one_key_batch("t", ["a"], 2500))
    assert svc.query("t", "a", *WIDE, 1) == [2500]
    svc.close()


def test_delete_files_before_keeps_the_newest(tmp_path: Path) -> None:
    svc = service(tmp_path, slots=4, entries=11)
    svc.dispatch(one_key_batch("t", ["a"] * 30, 0))  # files at 0, 1000, 2000
    assert svc.delete_files_before(1500) == 1
    assert [f.begin_phy_offset for f in svc.files()] == [1000, 2000]
    assert not (tmp_path / f"{0:020d}").exists()
    assert svc.query("t", "a", *WIDE, 100) == [2900 - 100 * i for i in range(20)]
    assert svc.delete_files_before(1 << 40) == 1
    assert [f.begin_phy_offset for f in svc.files()] == [2000]
    svc.close()


def test_delete_files_after_truncation(tmp_path: Path) -> None:
    svc = service(tmp_path, slots=4, entries=11)
    svc.dispatch(one_key_batch("t", ["a"] * 30, 0))
    assert svc.delete_files_after(1500) == 1
    assert [f.begin_phy_offset for f in svc.files()] == [0, 1000]
    assert svc.max_phy_offset() == 1500  # recovery re-dispatches from here
    svc.dispatch(one_key_batch("t", ["a"] * 5, 1500))  # duplicates of 1500.. are allowed
    found = svc.query("t", "a", *WIDE, 100)
    assert found[:5] == [1900, 1800, 1700, 1600, 1500]
    assert sorted(set(found)) == [100 * i for i in range(20)]
    assert svc.delete_files_after(0) == 3
    assert svc.files() == []
    assert svc.max_phy_offset() == 0
    svc.close()


def test_queries_while_dispatching_and_deleting(tmp_path: Path) -> None:
    svc = service(tmp_path, slots=64, entries=2000)
    errors: list[BaseException] = []
    stop = threading.Event()
    hot = {b * 10_000 + 200 * i for b in range(50) for i in range(50)}

    def reader() -> None:
        try:
            while not stop.is_set():
                found = svc.query("t", "hot", *WIDE, 10_000)
                assert found == sorted(set(found), reverse=True) and set(found) <= hot
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    for b in range(50):
        svc.dispatch(one_key_batch("t", ["hot", "cold"] * 50, b * 10_000))
        if b % 10 == 9:
            svc.delete_files_before(b * 10_000 - 20_000)
    stop.set()
    for t in threads:
        t.join(timeout=30)
    assert not errors and not any(t.is_alive() for t in threads)
    oldest = svc.files()[0].begin_phy_offset
    assert svc.query("t", "hot", *WIDE, 10_000) == sorted((p for p in hot if p >= oldest), reverse=True)
    svc.close()


def test_key_hash_is_stable() -> None:
    assert key_hash("t", "k") == zlib.crc32(b"t#k") & 0x7FFFFFFF
    assert key_hash("orders", "ключ") == zlib.crc32("orders#ключ".encode()) & 0x7FFFFFFF
    assert key_hash("t", "\ud800") >= 0  # a lone surrogate from a URL never raises


_records = st.lists(
    st.tuples(st.sampled_from(["orders", "payments", "ü"]), st.lists(st.text(min_size=1, max_size=5), max_size=3)),
    min_size=1,
    max_size=150,
)


@settings(max_examples=40, deadline=None)
@given(
    records=_records,
    cuts=st.lists(st.integers(min_value=0, max_value=150), max_size=6),
    slots=st.integers(min_value=1, max_value=16),
    entries=st.integers(min_value=2, max_value=60),
    gaps=st.lists(st.integers(min_value=0, max_value=3_000), min_size=150, max_size=150),
    window=st.tuples(st.integers(0, 200_000), st.integers(0, 200_000)),
)
def test_every_inserted_key_is_found(records: list[tuple[str, list[str]]], cuts: list[int], slots: int,
                                     entries: int, gaps: list[int], window: tuple[int, int]) -> None:
    n = len(records)
    stamps = [T0 + sum(gaps[:i + 1]) for i in range(n)]
    where: dict[tuple[str, str], list[int]] = {}
    for i, (topic, keys) in enumerate(records):
        for key in dict.fromkeys(keys):
            where.setdefault((topic, key), []).insert(0, i)
    with tempfile.TemporaryDirectory() as tmp:
        svc = service(Path(tmp), slots=slots, entries=entries)
        bounds = sorted({0, n, *(c for c in cuts if c < n)})
        for lo, hi in zip(bounds, bounds[1:]):
            chunk = records[lo:hi]
            svc.dispatch(make_batch([t for t, _ in chunk], [tuple(k) for _, k in chunk],
                                    [100 * i for i in range(lo, hi)], stamps[lo:hi]))
        begin, end = T0 + min(window), T0 + max(window)
        for (topic, key), rows in where.items():
            assert svc.query(topic, key, *WIDE, n) == [100 * i for i in rows]
            found = {phy // 100 for phy in svc.query(topic, key, begin, end, n)}
            assert {i for i in rows if begin <= stamps[i] <= end} <= found
            assert all(begin - 1000 < stamps[i] < end + 1000 for i in found)
        svc.close()
