"""Staged transactions: nothing in the CommitLog until commit, then each message once."""

from __future__ import annotations

from pathlib import Path

from broker_api.settings import TransactionsSection
from broker_api.transactions import TX_PROPERTY, TransactionService
from store import Message, MessageStore, StoreConfig


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
