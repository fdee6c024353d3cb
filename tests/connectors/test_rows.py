"""Dispatch batches become mirror rows: half messages and system topics are left out."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from connectors.rows import MESSAGE_SCHEMA, batch_to_table, decode_properties_column
from store import Message, MessageStore, PutResult, StoreConfig, SysFlag, decode_properties

from .batches import encode_properties, make_batch


def test_rows_carry_every_column_in_utc() -> None:
    batch = make_batch(1000, 3, props=[{"a": "1"}, {}, {"x": "y", "k": ""}], store_ms=1_700_000_000_123)
    table = batch_to_table(batch, from_offset=0, bodies=True)
    assert table.schema == MESSAGE_SCHEMA
    rows = table.to_pylist()
    assert [r["commitlog_offset"] for r in rows] == [1000, 1100, 1200]
    assert [r["properties"] for r in rows] == [[("a", "1")], [], [("x", "y"), ("k", "")]]
    assert rows[0]["keys"] == ["k0"] and rows[0]["tags"] == "A" and rows[1]["tags"] is None
    assert rows[0]["body"] == b"body-1000-0"
    assert rows[0]["store_timestamp"] == dt.datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=dt.timezone.utc)
    assert rows[0]["store_date"] == dt.date(2023, 11, 14)


def test_half_messages_rollbacks_and_system_topics_are_left_out() -> None:
    flags = [0, int(SysFlag.TRANSACTION_PREPARED), int(SysFlag.TRANSACTION_COMMIT),
             int(SysFlag.TRANSACTION_ROLLBACK), 0]
    topics = ["t", "RMQ_SYS_TRANS_HALF_TOPIC", "t", "t", "RMQ_SYS_TRANS_HALF_TOPIC"]
    table = batch_to_table(make_batch(0, 5, sys_flags=flags, topics=topics), from_offset=0, bodies=True)
    assert table["commitlog_offset"].to_pylist() == [0, 200]


def test_rows_before_the_resume_offset_are_skipped_and_bodies_can_be_off() -> None:
    table = batch_to_table(make_batch(0, 4), from_offset=200, bodies=False)
    assert table["commitlog_offset"].to_pylist() == [200, 300]
    assert table["body"].to_pylist() == [None, None]


_text = st.text(alphabet=st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), max_size=8)


@given(st.lists(st.dictionaries(_text.filter(bool), _text, max_size=4), max_size=20))
def test_column_decoding_matches_the_store_codec(rows: list[dict[str, str]]) -> None:
    raw = [encode_properties(p) for p in rows]
    decoded = decode_properties_column(raw).to_pylist()
    assert [dict(r) for r in decoded] == [decode_properties(r) for r in raw]


def _stored_rows(tmp_path: Path, messages: list[Message]) -> tuple[list[dict], list[PutResult]]:
    store = MessageStore(StoreConfig(root_dir=tmp_path / "store"))
    store.start()
    try:
        results = store.put_messages(messages)
        store.wait_visible(10)
        tables = [batch_to_table(b, from_offset=0, bodies=True) for b in store.read_dispatch_batches(0)]
    finally:
        store.shutdown()
    return [r for t in tables for r in t.to_pylist()], results


def test_rows_built_from_the_commitlog_bytes_match_what_was_produced(tmp_path: Path) -> None:
    """Bodies, keys, tags, properties and ids come straight from the records' bytes, row for row."""
    messages = [Message(topic=f"t{i % 3}", body=b"b%d" % i * (i % 4), queue_id=i % 2,
                        keys=(f"k{i}",) if i % 3 else (), tags=f"tag{i % 2}" if i % 5 else None,
                        properties={"n": str(i), "e": ""} if i % 4 else {}) for i in range(300)]
    rows, results = _stored_rows(tmp_path, messages)
    assert [(r["msg_id"], r["topic"], r["queue_offset"]) for r in rows] == \
        [(p.msg_id, p.topic, p.queue_offset) for p in results]
    for m, r in zip(messages, rows):
        assert r["body"] == m.body and r["keys"] == list(m.keys) and r["tags"] == m.tags
        assert dict(r["properties"]) == dict(m.properties)


def test_records_with_several_keys_still_become_rows(tmp_path: Path) -> None:
    messages = [Message(topic="t", body=b"x", keys=("a", "b")), Message(topic="t", body=b"y", keys=("c",)),
                Message(topic="t", body=b"z", tags="T", properties={"p": "q"})]
    rows, _ = _stored_rows(tmp_path, messages)
    assert [(r["keys"], r["tags"], r["properties"], r["body"]) for r in rows] == [
        (["a", "b"], None, [], b"x"), (["c"], None, [], b"y"), ([], "T", [("p", "q")], b"z")]
