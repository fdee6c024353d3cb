"""A query that dies in its first micro-batch replays exactly that batch (real Spark).

Spark writes batch 0's end to ``offsets/0`` before it runs the batch; on a
restart with batch 0 uncommitted it asks ``initialOffset()`` again, and a
start resolved from ``latest`` or a group would have moved. These tests make
batch 0 fail after it was planned, move the world on, restart on the same
checkpoint and check that the replay covers the planned range, no more and no
less, and that batch 1 continues right after it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest

import streaming

from .support import NO_MIRROR, checkpoint, create_topic, produce, wait_visible

pytestmark = pytest.mark.spark

Rows = list[tuple[int, int]]


class _FailFirst:
    """foreachBatch sink that records each batch's (partition, offset) and fails batch 0
    (after calling ``before_failing``)."""

    def __init__(self, fail: bool, before_failing: Any = None) -> None:
        self.fail, self.before_failing = fail, before_failing
        self.batches: dict[int, Rows] = {}

    def __call__(self, df: Any, batch_id: int) -> None:
        self.batches[batch_id] = sorted((r.partition, r.offset) for r in
                                        df.select("partition", "offset").collect())
        if self.fail and batch_id == 0:
            if self.before_failing is not None:
                self.before_failing()
            raise RuntimeError("the sink dies in batch 0")


def _query(spark: Any, url: str, sink: _FailFirst, ckpt: str, available_now: bool,
           **options: str) -> Any:
    reader = spark.readStream.format("sparkmq").option("endpoint", url).option("subscribe", "t")
    for k, v in options.items():
        reader = reader.option(k, v)
    w = reader.load().writeStream.foreachBatch(sink).option("checkpointLocation", ckpt)
    w = w.trigger(availableNow=True) if available_now else w.trigger(processingTime="1 second")
    return w.start()


def _fail_then_replay(spark: Any, url: str, ckpt: str, during: Any, after: Any,
                      **options: str) -> tuple[Rows, _FailFirst]:
    """Run until batch 0 fails (calling ``during`` in its sink), call ``after``, restart.

    Returns batch 0 of the failed run and the sink of the restarted run."""
    first = _FailFirst(fail=True, before_failing=during)
    q = _query(spark, url, first, ckpt, False, **options)
    with pytest.raises(Exception, match="dies in batch 0"):
        q.awaitTermination(180)
    after()
    again = _FailFirst(fail=False)
    q = _query(spark, url, again, ckpt, True, **options)
    q.awaitTermination(180)
    assert q.exception() is None
    assert streaming.lag(q.lastProgress) == {"t/0": 0, "t/1": 0}
    return first.batches[0], again


def _produced_from(rows: Rows, before: dict[int, int], top: dict[int, int]) -> None:
    """``rows`` are every offset in [before, top) of each queue, once, in order."""
    assert rows == [(q, o) for q in sorted(top) for o in range(before[q], top[q])]


def test_latest_start_dies_in_batch_zero_and_reads_everything_after_its_start(
    spark: Any, broker_factory: Any, tmp_path: Path
) -> None:
    """Spark plans batch 0 in the trigger that asks initialOffset(), so with 'latest' it is
    empty; messages produced while it fails and before the restart must all be read once.
    (A batch 0 holding messages is replayed in the group test here and, for 'latest', at
    reader level in test_sparkmq_reader.)"""
    b = broker_factory(env=NO_MIRROR)
    streaming.register(spark)
    create_topic(b.url, "t", queues=2)
    produce(b.url, "t", 20, queues=2)  # before the query: 'latest' skips these
    wait_visible(b.url, "t", 20)

    def during() -> None:  # batch 0 is planned and running: produce, then it fails
        produce(b.url, "t", 10, start=20, queues=2)

    def after() -> None:  # it failed: more arrives before the restart
        produce(b.url, "t", 10, start=30, queues=2)
        wait_visible(b.url, "t", 40)

    planned, again = _fail_then_replay(spark, b.url, checkpoint(tmp_path, "latest"), during,
                                       after, startingOffsets="latest")
    assert again.batches[0] == planned == []
    rest = sorted(r for i in sorted(again.batches) if i > 0 for r in again.batches[i])
    _produced_from(rest, {0: 10, 1: 10}, {0: 20, 1: 20})  # nothing skipped, nothing twice


def test_group_start_dies_in_batch_zero_and_replays_from_where_the_group_was(
    spark: Any, broker_factory: Any, tmp_path: Path
) -> None:
    b = broker_factory(env=NO_MIRROR)
    streaming.register(spark)
    create_topic(b.url, "t", queues=2)
    produce(b.url, "t", 20, queues=2)
    wait_visible(b.url, "t", 20)

    def commit(offset: int) -> None:
        r = httpx.put(f"{b.url}/v1/groups/g/offsets",
                      json={"topic": "t", "offsets": {"0": offset, "1": offset}}, timeout=10)
        assert r.status_code in (200, 204), r.text

    commit(4)

    def move_on() -> None:  # another member of the group moves it; more arrives
        commit(8)
        produce(b.url, "t", 10, start=20, queues=2)
        wait_visible(b.url, "t", 30)

    planned, again = _fail_then_replay(
        spark, b.url, checkpoint(tmp_path, "group"), during=lambda: None, after=move_on,
        startingOffsets="group", group="g")
    _produced_from(planned, {0: 4, 1: 4}, {0: 10, 1: 10})
    assert again.batches[0] == planned  # not from 8, where the group is now
    rest = sorted(r for i in sorted(again.batches) if i > 0 for r in again.batches[i])
    _produced_from(rest, {0: 10, 1: 10}, {0: 15, 1: 15})
    got = httpx.get(f"{b.url}/v1/groups/g/offsets", params={"topic": "t"}, timeout=10).json()
    assert {int(k): v for k, v in got["offsets"].items()} == {0: 15, 1: 15}


def test_timestamp_start_dies_in_batch_zero_and_replays_the_same_range(
    spark: Any, broker_factory: Any, tmp_path: Path
) -> None:
    """A start by time is stable while messages are added; the replay still reads batch 0."""
    b = broker_factory(env=NO_MIRROR)
    streaming.register(spark)
    create_topic(b.url, "t", queues=2)
    produce(b.url, "t", 6, queues=2)
    wait_visible(b.url, "t", 6)
    time.sleep(0.05)
    produce(b.url, "t", 4, start=6, queues=2)  # offsets 3 and 4 of each queue
    wait_visible(b.url, "t", 10)
    pulled = httpx.get(f"{b.url}/v1/topics/t/queues/0/messages",
                       params={"offset": 3, "max_messages": 1}, timeout=10).json()
    cut = pulled["messages"][0]["born_timestamp"]

    def more() -> None:
        produce(b.url, "t", 10, start=10, queues=2)
        wait_visible(b.url, "t", 20)

    planned, again = _fail_then_replay(
        spark, b.url, checkpoint(tmp_path, "ts"), during=lambda: None, after=more,
        startingTimestamp=str(cut), startingOffsetsByTimestampStrategy="latest")
    _produced_from(planned, {0: 3, 1: 3}, {0: 5, 1: 5})
    assert again.batches[0] == planned
    rest = sorted(r for i in sorted(again.batches) if i > 0 for r in again.batches[i])
    _produced_from(rest, {0: 5, 1: 5}, {0: 10, 1: 10})
