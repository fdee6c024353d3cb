"""Column puts with per-message born times and first-message properties (columns.GroupRows): the
same records as put_messages with the same born times and properties."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from store import InvalidMessageError, Message, MessageStore
from store.codec import HEADER_DTYPE, HEADER_SIZE
from store.columns import GroupRows
from store.packed import PackedBodies


def _records(store: MessageStore) -> list[bytes]:
    """Every record with its store time and WCRC digits blanked (its born time kept)."""
    log = store.commitlog
    out, pos = [], log.min_offset()
    while pos < log.max_offset():
        size = int.from_bytes(log.read_chunk(pos, 4), "big")
        rec = bytearray(log.read_chunk(pos, size))
        if len(rec) < HEADER_SIZE:  # a BLANK: the next segment
            pos = log.next_segment_offset(pos)
            continue
        hdr = np.frombuffer(rec, HEADER_DTYPE, 1).copy()
        hdr["store_ts"] = 0
        rec[:HEADER_SIZE] = hdr.tobytes()
        rec[-9:-1] = b"-" * 8
        out.append(bytes(rec))
        pos += size
    return out


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(bodies=st.lists(st.binary(max_size=200), min_size=1, max_size=40), same=st.booleans(),
       keys=st.sampled_from(["none", "equal", "mixed"]), first=st.booleans(), tags=st.sampled_from([None, "T"]),
       born=st.lists(st.integers(-5, 2 ** 42).filter(bool), min_size=40, max_size=40))  # 0: "now" to put_messages
def test_born_times_and_first_properties_write_the_bytes_put_messages_writes(
        open_store: Callable[..., MessageStore], tmp_path_factory, bodies, same, keys, first, tags, born) -> None:
    n = len(bodies)
    if same:
        bodies = [b"x" * 60] * n
    key_list = None if keys == "none" else [f"k{i:02d}" if keys == "equal" else "k" * (1 + i % 3) for i in range(n)]
    first_props = {"KAFKA_SEQ": "7,0,10,20"} if first else None
    a = open_store(tmp_path_factory.mktemp("a"), flush_mode="async")
    b = open_store(tmp_path_factory.mktemp("b"), flush_mode="async")
    extra = ({"origin": "x"}, 0)
    for _ in range(2):
        rows = GroupRows(np.array(born[:n], np.int64), first_props)
        a.put_column_groups("t", [(3, PackedBodies.from_bytes(bodies), key_list)], tags, extra, [rows])
        b.put_messages([Message("t", body, 3, (key_list[i],) if key_list else (), tags,
                                {**extra[0], **(first_props if first and i == 0 else {})}, born_timestamp=born[i])
                        for i, body in enumerate(bodies)])
    assert _records(a) == _records(b)


def test_born_times_read_back_and_a_wrong_count_is_refused(open_store: Callable[..., MessageStore]) -> None:
    store = open_store()
    born = np.array([1_000, 5_000, 3_000], np.int64)
    res = store.put_column_groups("t", [(0, [b"a", b"b", b"c"], None)], rows=[GroupRows(born)])[0]
    assert [store.get_message(i).born_timestamp for i in res.msg_ids()] == [1_000, 5_000, 3_000]
    before = store.commitlog.max_offset()
    with pytest.raises(InvalidMessageError, match="born times"):
        store.put_column_groups("t", [(0, [b"a", b"b"], None)], rows=[GroupRows(born)])
    assert store.commitlog.max_offset() == before
