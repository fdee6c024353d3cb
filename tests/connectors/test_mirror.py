"""DeltaMirror on a real MessageStore: complete, exactly once, across restarts and drops."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from deltalake import DeltaTable

from connectors import DeltaMirror, MirrorConfig, MirrorProcess, run_sql
from store import Message, MessageStore, PutResult, StoreConfig, SysFlag


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MessageStore]:
    s = MessageStore(StoreConfig(root_dir=tmp_path / "store", commitlog_segment_bytes=64 << 10))
    s.start()
    yield s
    s.shutdown()


@pytest.fixture(params=["thread", "process"])
def host(request: pytest.FixtureRequest) -> str:
    """Every test runs with the mirror in a broker thread and in its own process ([mirror] host)."""
    return str(request.param)


def _open(host: str, store: MessageStore, config: MirrorConfig) -> DeltaMirror | MirrorProcess:
    return DeltaMirror(store, config) if host == "thread" else MirrorProcess(store, config)


def _config(tmp_path: Path, **kw: object) -> MirrorConfig:
    base = dict(table_uri=str(tmp_path / "delta" / "messages"), app_id="broker-a", batch_interval_s=0.1,
                batch_rows=500)
    base.update(kw)
    return MirrorConfig(**base)  # type: ignore[arg-type]


def _put(store: MessageStore, n: int, start: int = 0, per_call: int = 50) -> list[PutResult]:
    out: list[PutResult] = []
    for lo in range(start, start + n, per_call):
        out += store.put_messages([
            Message(topic=f"t{i % 3}", body=f"body-{i}".encode(), queue_id=i % 2, keys=(f"k{i}",),
                    tags="A" if i % 2 else None, properties={"i": str(i)})
            for i in range(lo, min(lo + per_call, start + n))
        ])
    return out


def _wait_caught_up(mirror: DeltaMirror | MirrorProcess, timeout_s: float = 60.0) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        lag = mirror.lag()
        if lag["lag_bytes"] == 0:
            return lag
        time.sleep(0.05)
    raise AssertionError(f"mirror did not catch up: {mirror.lag()}")


def _rows(uri: str) -> list[dict]:
    cols = ["msg_id", "topic", "queue_id", "queue_offset", "commitlog_offset", "keys", "body", "properties"]
    return DeltaTable(uri).to_pyarrow_table(columns=cols).sort_by("commitlog_offset").to_pylist()


def _expect(results: list[PutResult]) -> list[tuple]:
    return sorted((r.phy_offset, r.msg_id, r.topic, r.queue_id, r.queue_offset) for r in results)


def _got(uri: str) -> list[tuple]:
    return [(r["commitlog_offset"], r["msg_id"], r["topic"], r["queue_id"], r["queue_offset"]) for r in _rows(uri)]


def test_mirror_holds_every_message_written_before_and_after_it_started(host: str, store: MessageStore, tmp_path: Path) -> None:
    before = _put(store, 900)
    mirror = _open(host, store, _config(tmp_path))
    mirror.start()
    try:
        after = _put(store, 900, start=900)
        lag = _wait_caught_up(mirror)
    finally:
        mirror.stop()
    uri = mirror.table_uri
    assert _got(uri) == _expect(before + after)
    rows = _rows(uri)
    assert rows[5]["body"] == b"body-5" and rows[5]["keys"] == ["k5"] and rows[5]["properties"] == [("i", "5")]
    assert lag["mirrored_offset"] == lag["commitlog_offset"] == store.stats()["commitlog_max_offset"]
    assert lag["lag_seconds"] == 0.0
    assert not [t for t in threading.enumerate() if t.name in ("sparkmq-delta-mirror", "sparkmq-mirror-watch")]


def test_restart_resumes_where_the_table_stopped(host: str, store: MessageStore, tmp_path: Path) -> None:
    first = _open(host, store, _config(tmp_path))
    first.start()
    written = _put(store, 400)
    _wait_caught_up(first)
    first.stop()
    written += _put(store, 400, start=400)  # while no mirror runs
    second = _open(host, store, _config(tmp_path))
    second.start()
    try:
        written += _put(store, 200, start=800)
        _wait_caught_up(second)
    finally:
        second.stop()
    assert _got(second.table_uri) == _expect(written)


def test_store_restart_redispatch_does_not_duplicate_rows(host: str, tmp_path: Path) -> None:
    config = StoreConfig(root_dir=tmp_path / "store", commitlog_segment_bytes=64 << 10)
    written: list[PutResult] = []
    for round_ in range(2):
        s = MessageStore(config)
        s.start()
        mirror = _open(host, s, _config(tmp_path))
        mirror.start()
        written += _put(s, 300, start=round_ * 300)
        _wait_caught_up(mirror)
        mirror.stop()
        s.shutdown()
    assert _got(str(tmp_path / "delta" / "messages")) == _expect(written)


def test_a_full_inbox_drops_batches_but_no_rows(store: MessageStore, tmp_path: Path) -> None:
    mirror = DeltaMirror(store, _config(tmp_path, batch_rows=100_000, batch_interval_s=0.2), queue_max_bytes=1)
    mirror.start()
    written: list[PutResult] = []
    try:
        # Keep producing (bounded) until the one-byte inbox has had to drop a
        # batch: that happens once a batch arrives while another still waits,
        # e.g. during a Delta commit.
        deadline = time.monotonic() + 30
        while mirror.stats()["dropped_batches"] == 0 and time.monotonic() < deadline and len(written) < 60_000:
            written += _put(store, 200, start=len(written), per_call=20)
            time.sleep(0.005)
        _wait_caught_up(mirror)
    finally:
        mirror.stop()
    assert mirror.stats()["dropped_batches"] > 0
    assert _got(mirror.table_uri) == _expect(written)


def test_bodies_off_mirrors_index_columns_only(host: str, store: MessageStore, tmp_path: Path) -> None:
    mirror = _open(host, store, _config(tmp_path, bodies=False))
    mirror.start()
    try:
        written = _put(store, 100)
        _wait_caught_up(mirror)
    finally:
        mirror.stop()
    rows = _rows(mirror.table_uri)
    assert len(rows) == 100 and all(r["body"] is None for r in rows)
    assert [r["keys"] for r in rows[:2]] == [["k0"], ["k1"]]
    assert _got(mirror.table_uri) == _expect(written)


def test_half_and_rolled_back_messages_are_not_mirrored(host: str, store: MessageStore, tmp_path: Path) -> None:
    mirror = _open(host, store, _config(tmp_path))
    mirror.start()
    try:
        store.put_messages([
            Message(topic="RMQ_SYS_TRANS_HALF_TOPIC", body=b"half", sys_flag=int(SysFlag.TRANSACTION_PREPARED)),
            Message(topic="orders", body=b"rolled back", sys_flag=int(SysFlag.TRANSACTION_ROLLBACK)),
            Message(topic="orders", body=b"committed", sys_flag=int(SysFlag.TRANSACTION_COMMIT)),
            Message(topic="orders", body=b"plain"),
        ])
        _wait_caught_up(mirror)
    finally:
        mirror.stop()
    assert [r["body"] for r in _rows(mirror.table_uri)] == [b"committed", b"plain"]


def test_compaction_on_its_cadence_keeps_query_results_identical(host: str, store: MessageStore, tmp_path: Path) -> None:
    mirror = _open(host, store, _config(tmp_path, compact_every_commits=4,
                                        checkpoint_every_commits=3, vacuum_retention_hours=0))
    mirror.start()
    written: list[PutResult] = []
    try:
        for round_ in range(9):  # one commit per round
            written += _put(store, 100, start=round_ * 100)
            _wait_caught_up(mirror)
    finally:
        mirror.stop()
    uri = mirror.table_uri
    operations = [h["operation"] for h in DeltaTable(uri).history()]
    assert "OPTIMIZE" in operations and mirror.stats()["commits"] >= 8
    assert _got(uri) == _expect(written)
    sql = "SELECT topic, count(*) AS n, sum(queue_offset) AS s FROM messages GROUP BY topic ORDER BY topic"
    expected = {}
    for r in written:
        n, s = expected.get(r.topic, (0, 0))
        expected[r.topic] = (n + 1, s + r.queue_offset)
    got = run_sql(uri, sql, max_rows=10, timeout_s=30).to_pylist()
    assert {r["topic"]: (r["n"], r["s"]) for r in got} == expected


def test_lag_shows_bytes_and_age_until_the_commit_and_stop_commits_the_rest(host: str, store: MessageStore,
                                                                            tmp_path: Path) -> None:
    mirror = _open(host, store, _config(tmp_path, batch_interval_s=60, batch_rows=1_000_000))
    mirror.start()
    try:
        written = _put(store, 10)
        deadline = time.monotonic() + 20
        while (lag := mirror.lag())["lag_seconds"] < 0.4 and time.monotonic() < deadline:
            time.sleep(0.05)  # the age of the oldest unmirrored message grows while nothing commits
        assert lag["lag_seconds"] >= 0.4
        assert lag["mirrored_offset"] == 0 and lag["lag_bytes"] == lag["commitlog_offset"] > 0
    finally:
        mirror.stop()
    assert _got(mirror.table_uri) == _expect(written)


def test_a_clean_stop_leaves_the_table_complete(host: str, store: MessageStore, tmp_path: Path) -> None:
    mirror = _open(host, store, _config(tmp_path, batch_interval_s=60, batch_rows=1_000_000))
    mirror.start()
    written = _put(store, 500, per_call=10)
    mirror.stop()  # right away: some batches may not even have been dispatched yet
    assert _got(mirror.table_uri) == _expect(written)


def test_segments_deleted_by_retention_before_mirroring_are_skipped(host: str, store: MessageStore, tmp_path: Path) -> None:
    written = _put(store, 1500)  # several 64 KiB segments, no mirror yet
    deadline = time.monotonic() + 30
    while store.stats()["dispatch_behind_bytes"] and time.monotonic() < deadline:
        time.sleep(0.02)  # retention deletes dispatched segments (the ConsumeQueues need them first)
    assert store.run_retention(force=True) > 0
    first_kept = int(store.stats()["commitlog_min_offset"])  # type: ignore[call-overload]
    mirror = _open(host, store, _config(tmp_path))
    mirror.start()
    try:
        written += _put(store, 100, start=1500)
        _wait_caught_up(mirror)
    finally:
        mirror.stop()
    assert _got(mirror.table_uri) == _expect([r for r in written if r.phy_offset >= first_kept])
