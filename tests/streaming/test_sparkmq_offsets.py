"""Offset planning without Spark or a broker: JSON forms, starts, limits, ranges."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streaming.errors import OptionError
from streaming.offsets import (
    QueueRange,
    RangePlan,
    batch_start,
    from_json,
    initial_json,
    plan_end,
    plan_ranges,
    prorate,
    resolve,
    split_plans,
    to_json,
)
from streaming.options import OffsetSpec, parse_offsets_json

RANGES = {("orders", q): QueueRange(10 * q, 100 + q) for q in range(4)}


def test_json_form_sorts_topics_and_queue_ids_numerically() -> None:
    flat = {("b", 10): 1, ("b", 2): 2, ("a", 1): 3, ("b", 1): 4}
    text = json.dumps(to_json(flat))
    assert text == '{"a": {"1": 3}, "b": {"1": 4, "2": 2, "10": 1}}'
    assert from_json(json.loads(text)) == flat
    # The same offsets built in another order serialise identically.
    assert json.dumps(to_json(dict(reversed(list(flat.items()))))) == text


def test_resolve_keywords_and_json_with_earliest_latest_markers() -> None:
    assert resolve(OffsetSpec("earliest"), RANGES, name="s") == {k: r.min_offset for k, r in RANGES.items()}
    assert resolve(OffsetSpec("latest"), RANGES, name="s") == {k: r.max_offset for k, r in RANGES.items()}
    raw = '{"orders":{"0":5,"1":-2,"2":-1,"3":31}}'
    got = resolve(OffsetSpec("json", offsets=parse_offsets_json(raw, "s")), RANGES, name="s")
    assert got == {("orders", 0): 5, ("orders", 1): 10, ("orders", 2): 102, ("orders", 3): 31}
    # as in Kafka, the JSON must name every queue of the subscribed topics
    spec = OffsetSpec("json", offsets=parse_offsets_json('{"orders":{"0":5,"1":-2}}', "s"))
    with pytest.raises(OptionError, match="must name every queue.*missing: orders/2, orders/3"):
        resolve(spec, RANGES, name="startingOffsets")


def test_resolve_group_falls_back_to_earliest_for_uncommitted_queues() -> None:
    got = resolve(OffsetSpec("group"), RANGES, name="s", group={("orders", 1): 50})
    assert got[("orders", 1)] == 50 and got[("orders", 0)] == 0 and got[("orders", 3)] == 30


def test_resolve_rejects_unknown_topics_and_queues() -> None:
    spec = OffsetSpec("json", offsets={"nope": {0: 1}})
    with pytest.raises(OptionError, match="'nope', which is not subscribed"):
        resolve(spec, RANGES, name="startingOffsets")
    with pytest.raises(OptionError, match="queue 9 of topic 'orders'"):
        resolve(OffsetSpec("json", offsets={"orders": {9: 1}}), RANGES, name="startingOffsets")


@pytest.mark.parametrize(
    "raw, fragment",
    [
        ("{not json", "not valid JSON"),
        ('{"orders": [1, 2]}', "must map topics"),
        ('{"orders": {"x": 1}}', "queue id 'x'"),
        ('{"orders": {"0": -3}}', "must be an integer >= -2"),
        ('{"orders": {"0": "5"}}', "must be an integer >= -2"),
    ],
)
def test_bad_offsets_json_says_what_is_wrong(raw: str, fragment: str) -> None:
    with pytest.raises(OptionError, match=fragment):
        parse_offsets_json(raw, "startingOffsets")


def test_max_offsets_per_trigger_splits_in_proportion_to_backlog_like_kafka() -> None:
    avail = {("t", 0): 1000, ("t", 1): 3, ("t", 2): 3000, ("t", 3): 0}
    # 100 * 1000/4003 = 24.98 -> 24; 100 * 3/4003 = 0.07 -> 1 (small queues never starve)
    assert prorate(avail, 100) == {("t", 0): 24, ("t", 1): 1, ("t", 2): 74, ("t", 3): 0}
    assert prorate({("t", 0): 5, ("t", 1): 9}, 50) == {("t", 0): 5, ("t", 1): 9}


@given(
    st.dictionaries(st.tuples(st.just("t"), st.integers(0, 30)), st.integers(0, 10_000), max_size=12),
    st.integers(1, 50_000),
)
def test_prorate_properties(avail: dict, budget: int) -> None:
    alloc = prorate(avail, budget)
    assert all(0 <= alloc[k] <= avail[k] for k in avail)
    assert all(alloc[k] >= 1 for k in avail if avail[k] > 0)  # every backlog advances
    backlog = [k for k in avail if avail[k] > 0]
    assert sum(alloc.values()) <= max(budget, 0) + len(backlog)  # ceil of shares below one


def test_plan_end_limits_keeps_vanished_and_adds_new_queues() -> None:
    start = {("t", 0): 0, ("t", 1): 0, ("gone", 0): 7}
    ranges = {("t", 0): QueueRange(0, 100), ("t", 1): QueueRange(0, 100), ("t", 2): QueueRange(0, 100)}
    end = plan_end(start, ranges, max_rows=30)
    assert end == {("t", 0): 10, ("t", 1): 10, ("t", 2): 10, ("gone", 0): 7}
    assert plan_end(start, ranges) == {("t", 0): 100, ("t", 1): 100, ("t", 2): 100, ("gone", 0): 7}


def test_plan_end_with_available_now_target_reaches_the_target_and_stops() -> None:
    ranges = {("t", q): QueueRange(0, 50) for q in range(2)}
    target = {("t", 0): 40, ("t", 1): 20}
    start = {("t", 0): 0, ("t", 1): 0}
    seen = []
    for _ in range(10):
        end = plan_end(start, ranges, target=target, max_rows=25)
        if end == start:
            break
        seen.append(sum(end.values()) - sum(start.values()))
        start = end
    assert start == target and seen == [24, 24, 12]
    # a queue that appeared after the target was taken is not read
    ranges[("t", 2)] = QueueRange(0, 9)
    assert plan_end(start, ranges, target=target)[("t", 2)] == 0


def test_plan_end_skips_offsets_lost_to_retention() -> None:
    end = plan_end({("t", 0): 3}, {("t", 0): QueueRange(20, 30)}, max_rows=5)
    assert end == {("t", 0): 25}


def test_plan_ranges_is_deterministic_and_marks_new_queues() -> None:
    start = {("t", 1): 5, ("t", 0): 2}
    end = {("t", 0): 2, ("t", 1): 9, ("t", 10): 4, ("t", 2): 3}
    plans = plan_ranges(start, end)
    assert [(p.queue_id, p.start, p.end, p.new_queue) for p in plans] == [
        (1, 5, 9, False), (2, 0, 3, True), (10, 0, 4, True)
    ]
    assert plans == plan_ranges(dict(reversed(list(start.items()))), end)


def test_batch_zero_carries_its_start_so_a_replay_reads_the_same_range() -> None:
    first = initial_json({("t", 0): 5, ("t", 1): 7})
    assert list(first) == ["$initial", "t"] and from_json(first) == {("t", 0): 5, ("t", 1): 7}
    end = {"$from": to_json({("t", 0): 5, ("t", 1): 7}), "t": {"0": 9, "1": 7}}
    # Spark restarted with batch 0 uncommitted: initialOffset() moved (latest), end did not
    moved = initial_json({("t", 0): 9, ("t", 1): 9})
    assert batch_start(moved, end) == {("t", 0): 5, ("t", 1): 7}
    assert plan_ranges(batch_start(moved, end), from_json(end))[0].start == 5
    assert batch_start(end, {"t": {"0": 12, "1": 8}}) == {("t", 0): 9, ("t", 1): 7}


def test_min_partitions_and_max_records_cut_ranges_into_consecutive_pieces() -> None:
    plans = [RangePlan("t", 0, 0, 1000, True), RangePlan("t", 1, 50, 60, False)]
    cut = split_plans(plans, None, 300)
    assert [(p.queue_id, p.start, p.end) for p in cut] == [
        (0, 0, 250), (0, 250, 500), (0, 500, 750), (0, 750, 1000), (1, 50, 60)]
    assert [p.new_queue for p in cut] == [True, False, False, False, False]
    cut = split_plans(plans, 6, None)  # 1000/1010*6 = 5.9 -> 6 pieces, 10/1010*6 -> 1
    zero = [(p.start, p.end) for p in cut if p.queue_id == 0]
    assert len(zero) == 6 and zero[0][0] == 0 and zero[-1][1] == 1000
    assert all(a[1] == b[0] for a, b in zip(zero, zero[1:]))
    assert {e - s for s, e in zero} <= {166, 167} and len(cut) == 7
    assert split_plans(plans, 2, None) == plans  # already enough ranges
