"""Column-wise append (put_columns): the same records as put_messages, read back, rolls, errors."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from store import InvalidMessageError, Message, MessageStore, MessageTooLargeError
from store.codec import HEADER_DTYPE, HEADER_SIZE
from store.packed import PackedBodies

_TIMES = ("born_ts", "store_ts")


def _records(store: MessageStore) -> list[bytes]:
    """Every record of the CommitLog with its two timestamps and its WCRC digits blanked."""
    log = store.commitlog
    out, pos = [], log.min_offset()
    while pos < log.max_offset():
        size = int.from_bytes(log.read_chunk(pos, 4), "big")
        rec = bytearray(log.read_chunk(pos, size))
        if len(rec) < HEADER_SIZE:  # a BLANK: jump to the next segment
            pos = log.next_segment_offset(pos)
            continue
        hdr = np.frombuffer(rec, HEADER_DTYPE, 1).copy()
        for name in _TIMES:
            hdr[name] = 0
        rec[:HEADER_SIZE] = hdr.tobytes()
        rec[-9:-1] = b"-" * 8  # the WCRC digits cover the timestamps
        out.append(bytes(rec))
        pos += size
    return out


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(bodies=st.lists(st.binary(max_size=300), min_size=1, max_size=60),
       same=st.booleans(), with_keys=st.booleans(), tags=st.sampled_from([None, "TagA", "ünï"]))
def test_columns_write_the_bytes_put_messages_writes(open_store: Callable[..., MessageStore], tmp_path_factory,
                                                     bodies, same, with_keys, tags) -> None:
    if same:
        bodies = [b"x" * 100] * len(bodies)
    keys = [f"k{i}" for i in range(len(bodies))] if with_keys else None
    a = open_store(tmp_path_factory.mktemp("a"), flush_mode="async")
    b = open_store(tmp_path_factory.mktemp("b"), flush_mode="async")
    for _ in range(3):  # several batches: queue offsets continue, segments roll (64 KiB)
        res = a.put_columns("orders", 2, bodies, keys=keys, tags=tags)
        b.put_messages([Message(topic="orders", body=body, queue_id=2, tags=tags,
                                keys=(keys[i],) if keys else ()) for i, body in enumerate(bodies)])
    assert _records(a) == _records(b)
    assert res.first_queue_offset == 2 * len(bodies)
    page = a.get_message(res.msg_ids()[-1])
    assert page.body == bodies[-1] and page.tags == tags and page.queue_offset == 3 * len(bodies) - 1


def test_columns_read_back_across_segment_rolls(open_store: Callable[..., MessageStore]) -> None:
    store = open_store()
    bodies = [bytes([i % 251]) * 100 for i in range(2000)]  # ~430 KiB: several 64 KiB segments
    res = store.put_columns("t", 0, bodies, keys=[str(i) for i in range(2000)], tags="x")
    assert len(res) == 2000 and res.first_queue_offset == 0
    got, offset = [], 0
    while offset < 2000:
        page = store.get_messages("t", 0, offset, 500)
        got += [m.body for m in page.messages]
        offset = page.next_offset
    assert got == bodies
    assert store.wait_visible(10.0)
    assert [m.body for m in store.query_by_key("t", "1999", 0, 2**62)] == [bodies[1999]]


def test_columns_refuse_bad_input_and_write_nothing(open_store: Callable[..., MessageStore]) -> None:
    store = open_store()
    before = store.commitlog.max_offset()
    with pytest.raises(InvalidMessageError):
        store.put_columns("t", 0, [b"a", b"b"], keys=["ok", "bad\x01"])
    with pytest.raises(InvalidMessageError):
        store.put_columns("t", 0, [b"a", b"b"], keys=["only-one"])
    with pytest.raises(InvalidMessageError):
        store.put_columns("t", 0, [b"a"], keys=[""])
    for keys in (["ab", "c\x03"], ["ab", "\x00b"], ["", ""], ["k" * 40000, "q" * 40000]):  # keys of one length
        with pytest.raises(InvalidMessageError):
            store.put_columns("t", 0, [b"a", b"b"], keys=keys)
    with pytest.raises(InvalidMessageError):
        store.put_columns("t", 0, [b"a"], tags="x\x02")
    with pytest.raises(InvalidMessageError):
        store.put_columns("", 0, [b"a"])
    with pytest.raises(MessageTooLargeError):
        store.put_columns("t", 0, [b"a", b"z" * (store.max_message_bytes + 1)])
    assert store.commitlog.max_offset() == before



@pytest.mark.parametrize("shape", ["equal", "mixed-with-keys", "equal-with-keys"])
def test_packed_bodies_write_the_bytes_a_list_writes(open_store: Callable[..., MessageStore], tmp_path_factory,
                                                     shape: str) -> None:
    """Bodies given as one buffer and offsets (the Arrow layout) store exactly what a list of bytes does."""
    bodies = [bytes([65 + i % 26]) * 40 for i in range(300)] if shape.startswith("equal") else \
        [b"m" * (i % 7) + b"!" for i in range(300)]
    keys = [f"k{i:03d}" for i in range(300)] if shape.endswith("keys") else None
    a = open_store(tmp_path_factory.mktemp("a"), flush_mode="async")
    b = open_store(tmp_path_factory.mktemp("b"), flush_mode="async")
    packed = PackedBodies.from_bytes([b"skipped"] + bodies)[1:301]
    for _ in range(3):  # segments roll (64 KiB)
        a.put_columns("t", 1, bodies, keys=keys, tags="T")
        b.put_columns("t", 1, packed, keys=keys, tags="T")
    assert _records(a) == _records(b)


def test_column_groups_land_in_their_queues_or_none_do(open_store: Callable[..., MessageStore]) -> None:
    store = open_store()
    packed = PackedBodies.from_bytes([b"a%d" % i for i in range(10)])
    rows = [np.arange(0, 10, 2), np.arange(1, 10, 2)]
    res = store.put_column_groups("t", [(q, packed.take(r), None) for q, r in enumerate(rows)], tags="x")
    assert [len(r) for r in res] == [5, 5] and [r.queue_id for r in res] == [0, 1]
    assert [m.body for m in store.get_messages("t", 1, 0, 10).messages] == [b"a1", b"a3", b"a5", b"a7", b"a9"]
    before = store.commitlog.max_offset()
    with pytest.raises(InvalidMessageError):  # the second group is bad: the first is not written either
        store.put_column_groups("t", [(0, packed, None), (1, packed, ["k"] * 9 + ["bad\x01"])])
    assert store.commitlog.max_offset() == before


@pytest.mark.parametrize("keys", [None, ["k1", "k2", "k3"], ["k", "longer key", "k3"]])
def test_a_column_put_can_give_every_message_properties_and_a_sys_flag(open_store: Callable[..., MessageStore],
                                                                       keys: list[str] | None) -> None:
    # what a committed exactly-once sink batch is appended with
    store = open_store(flush_mode="async")
    extra = ({"sparkmq.tx_id": "tx-1", "origin": "sink"}, 8)
    res = store.put_column_groups("orders", [(1, [b"a", b"bb", b"ccc"], keys)], "TagA", extra)[0]
    for i, msg_id in enumerate(res.msg_ids()):
        m = store.get_message(msg_id)
        assert m.body == [b"a", b"bb", b"ccc"][i] and m.tags == "TagA" and m.sys_flag == 8
        assert m.properties["sparkmq.tx_id"] == "tx-1" and m.properties["origin"] == "sink"
        assert m.keys == ((keys[i],) if keys else ())
    with pytest.raises(InvalidMessageError, match="control characters"):
        store.put_column_groups("orders", [(1, [b"x"], None)], None, ({"p": "bad\x01value"}, 8))


def test_packed_bodies_take_rows_of_one_length_from_bodies_of_several_lengths() -> None:
    # the rows taken have equal lengths, the others do not: a column put of one queue's rows (keys
    # routing rows of different lengths to different queues) failed here with a reshape error
    bodies = PackedBodies.from_bytes([b"aa", b"b", b"cc", b"dddd"])
    taken = bodies.take(np.array([0, 2]))
    assert [bytes(v) for v in taken.views()] == [b"aa", b"cc"]
    assert [bytes(v) for v in bodies.take(np.array([3, 1])).views()] == [b"dddd", b"b"]
