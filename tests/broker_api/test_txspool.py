"""Staged transactions: nothing in the CommitLog until commit, then each message once."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker_api.settings.broker import TransactionsSection
from broker_api.transactions.service import TX_PROPERTY, TransactionService
from store import Message, MessageStore, MessageTooLargeError, StoreConfig, SysFlag


def _store(root: Path) -> MessageStore:
    store = MessageStore(StoreConfig(root_dir=root, commitlog_segment_bytes=1 << 20,
                                     index_slots=100, index_entries=400))
    store.start()
    return store


def _end(store: MessageStore) -> int:
    return int(store.stats()["commitlog_max_offset"])  # type: ignore[call-overload]


def test_staged_messages_survive_a_restart_and_are_appended_once_at_commit(tmp_path: Path) -> None:
    store = _store(tmp_path / "store")
    meta = tmp_path / "config"
    try:
        tx = TransactionService(store, meta, TransactionsSection())
        tx.start()
        before = _end(store)
        kept, results = tx.add_halves([Message("t", b"a", 1, ("k",), "T", {"p": "1"})], None)
        tx.add_halves([Message("t", b"b", 2)], kept)
        dropped, _ = tx.add_halves([Message("t", b"never", 0)], None)
        assert _end(store) == before  # staged outside the CommitLog
        assert results[0].msg_id == f"{kept}-0"
        tx.rollback(dropped)
        tx.stop()

        again = TransactionService(store, meta, TransactionsSection())
        again.start()
        assert sorted(p.name for p in (meta / "tx-spool").iterdir()) == [f"{kept}.msgs"]
        assert again.sink_commit("s", 0, [kept]) == {"status": "committed", "messages": 2}
        assert again.sink_commit("s", 0, [kept]) == {"status": "already_committed"}
        assert list((meta / "tx-spool").iterdir()) == []
        pages = [store.get_messages("t", q, 0, 10).messages for q in (0, 1, 2)]
        assert [len(p) for p in pages] == [0, 1, 1]
        a = pages[1][0]
        assert (a.body, a.keys, a.tags, a.properties) == (b"a", ("k",), "T",
                                                           {"p": "1", TX_PROPERTY: kept})
        again.stop()
    finally:
        store.shutdown()


def test_raw_arrow_bodies_are_parsed_at_commit_and_a_bad_one_leaves_the_batch_open(
    tmp_path: Path,
) -> None:
    import pyarrow as pa

    def body(values: list[bytes]) -> bytes:
        table = pa.table({"body": pa.array(values, pa.binary())})
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as w:
            w.write_table(table)
        return bytes(sink.getvalue().to_pybytes())

    def parse(topic: str, raw: bytes) -> list[Message]:
        rows = pa.ipc.open_stream(raw).read_all().column("body").to_pylist()
        if b"bad" in rows:
            raise ValueError("row 'bad' does not parse")
        return [Message(topic, b, i % 2) for i, b in enumerate(rows)]

    store = _store(tmp_path / "store")
    meta = tmp_path / "config"
    try:
        tx = TransactionService(store, meta, TransactionsSection())
        tx.start()
        good = tx.stage_raw("t", body([b"a", b"b"]), 2, None)
        tx.stage_raw("t", body([b"c"]), 1, good)
        bad = tx.stage_raw("t", body([b"x", b"bad"]), 2, None)
        tx.stop()  # a restart between staging and commit

        again = TransactionService(store, meta, TransactionsSection())
        again.start()
        try:
            again.sink_commit("s", 0, [good, bad], parse)
        except ValueError:
            pass
        assert again.describe(bad)["state"] == "open" and not store.get_messages("t", 0, 0, 9).messages
        assert again.sink_abort("s", 0, [good, bad])["rolled_back"] == 2
        retry = again.stage_raw("t", body([b"a", b"b", b"c"]), 3, None)
        assert again.sink_commit("s", 0, [retry], parse)["messages"] == 3
        got = [m.body for q in (0, 1) for m in store.get_messages("t", q, 0, 9).messages]
        assert sorted(got) == [b"a", b"b", b"c"] and list((meta / "tx-spool").iterdir()) == []
        again.stop()
    finally:
        store.shutdown()


def test_a_commit_by_columns_is_finished_exactly_once_after_a_crash_mid_publish(tmp_path: Path) -> None:
    import numpy as np
    import pyarrow as pa

    from broker_api.transactions.columns import ColumnFrame, publish_frames, read_frames
    from store.packed import PackedBodies

    def body(values: list[bytes], queues: list[int]) -> bytes:
        table = pa.table({"body": pa.array(values, pa.binary()), "queue_id": pa.array(queues, pa.int32())})
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as w:
            w.write_table(table)
        return bytes(sink.getvalue().to_pybytes())

    def columns(topic: str, raw: bytes) -> ColumnFrame:  # what the broker's parser gives for such a body
        table = pa.ipc.open_stream(raw).read_all()
        return ColumnFrame(topic, PackedBodies.from_bytes(table.column("body").to_pylist()), None, "T",
                           table.column("queue_id").to_numpy().astype(np.int64))

    def no_messages(topic: str, raw: bytes) -> list[Message]:
        raise AssertionError("every body has the column shape: no row is parsed into a message")

    store = _store(tmp_path / "store")
    meta = tmp_path / "config"
    try:
        tx = TransactionService(store, meta, TransactionsSection())
        tx.start()
        tx_id = tx.stage_raw("t", body([b"a0", b"b1", b"c0", b"d1"], [0, 1, 0, 1]), 4, None)
        tx.stage_raw("t", body([b"e1", b"f0"], [1, 0]), 2, tx_id)
        staged = tx._get(tx_id)
        tx.prepare_raw([staged], no_messages, columns)
        tx._decide([staged], "committed", ("sink", 7))
        frames = read_frames(tx._spool.columns_path(tx_id))
        assert [len(f) for f in frames] == [4, 2] and [f.tags for f in frames] == ["T", "T"]
        # the crash: the first body's rows reached the CommitLog, the second's did not, nothing was journaled
        assert publish_frames(store, frames[:1], {TX_PROPERTY: tx_id}) == 4
        tx.stop()
        store.shutdown()

        store = _store(tmp_path / "store")  # the broker starts again
        again = TransactionService(store, meta, TransactionsSection())
        again.start()  # finds the decided, unpublished commit: counts the 4 rows, appends the other 2
        assert again.describe(tx_id)["published"] is True
        assert again.sink_info("sink")["last_batch_id"] == 7
        assert again.sink_commit("sink", 7, [])["status"] == "already_committed"
        stored = {q: store.get_messages("t", q, 0, 10).messages for q in (0, 1)}
        assert [m.body for m in stored[0]] == [b"a0", b"c0", b"f0"]  # each row once, in the queue chosen
        assert [m.body for m in stored[1]] == [b"b1", b"d1", b"e1"]
        assert {m.properties.get(TX_PROPERTY) for q in (0, 1) for m in stored[q]} == {tx_id}
        assert {m.tags for q in (0, 1) for m in stored[q]} == {"T"}
        flags = [int(f) for b in store.read_dispatch_batches(0) for f in b.sys_flags]
        assert flags == [int(SysFlag.TRANSACTION_COMMIT)] * 6  # as the per-message commit writes them
        assert not any((meta / "tx-spool").iterdir())  # the frames are gone once published
        again.stop()
    finally:
        store.shutdown()


def test_a_message_too_large_for_todays_limit_fails_the_commit_and_leaves_the_transaction_open(
    tmp_path: Path,
) -> None:
    """Staged under one max_message_bytes, committed after a restart with a smaller one: the commit
    is refused before its decision (nothing journaled as decided that the publish could not append),
    the transaction stays open and can be rolled back; a half message the same.  Before, the decision
    was journaled and every restart retried a publish the store refused."""
    meta = tmp_path / "config"
    store = _store(tmp_path / "store")
    try:
        tx = TransactionService(store, meta, TransactionsSection())
        tx.start()
        staged, _ = tx.add_halves([Message("t", b"s" * 3000, 0)], None)
        half, _ = tx.add_halves([Message("t", b"h" * 3000, 0)], None, check_url="http://127.0.0.1:9/check")
        tx.stop()
    finally:
        store.shutdown()
    store = MessageStore(StoreConfig(root_dir=tmp_path / "store", commitlog_segment_bytes=1 << 20,
                                     index_slots=100, index_entries=400, max_message_bytes=2048))
    store.start()
    try:
        again = TransactionService(store, meta, TransactionsSection())
        again.start()
        end = _end(store)
        for tx_id, commit in ((staged, lambda t: again.commit(t)), (half, lambda t: again.sink_commit("s", 0, [t]))):
            with pytest.raises(MessageTooLargeError, match=f"transaction {tx_id} cannot be committed.*still open"):
                commit(tx_id)
            assert again.describe(tx_id)["state"] == "open"
            assert again.rollback(tx_id)["state"] == "rolled_back"
        assert _end(store) == end, "nothing was appended"
        assert store.get_messages("t", 0, 0, 10).messages == []
        again.stop()
    finally:
        store.shutdown()
