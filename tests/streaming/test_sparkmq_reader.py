"""The reader driven as Spark drives it, against a real broker but without Spark."""

from __future__ import annotations

import json
import pickle
import time
from typing import Any

import httpx
import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows

from streaming.errors import DataLossError, OptionError
from streaming.options import parse_reader
from streaming.reader import SparkMQBatchReader, SparkMQStreamReader

from .support import NO_MIRROR, create_topic, produce, wait_visible


def _reader(url: str, **options: str) -> SparkMQStreamReader:
    opts = {"endpoint": url, **{k.lower(): v for k, v in options.items()}}
    return SparkMQStreamReader(parse_reader(opts, batch=False))


def _read_all(reader: SparkMQStreamReader, start: dict, end: dict) -> list[dict[str, Any]]:
    executor_side = pickle.loads(pickle.dumps(reader))  # as Spark ships it
    return [row for p in reader.partitions(start, end)
            for batch in executor_side.read(pickle.loads(pickle.dumps(p)))
            for row in batch.to_pylist()]


def test_pattern_subscription_picks_up_new_topics_between_batches(broker_factory: Any) -> None:
    b = broker_factory(env=NO_MIRROR)
    create_topic(b.url, "evt-a", queues=2)
    produce(b.url, "evt-a", 10, queues=2)
    wait_visible(b.url, "evt-a", 10)
    r = _reader(b.url, subscribePattern="evt-.*", startingOffsets="earliest")
    start = r.initialOffset()
    assert start == {"$initial": 1, "evt-a": {"0": 0, "1": 0}}
    end = r.latestOffset(start, ReadMaxRows(6))
    assert end == {"$from": {"evt-a": {"0": 0, "1": 0}}, "evt-a": {"0": 3, "1": 3}}
    assert r.latestOffset(end, ReadAllAvailable()) == {"evt-a": {"0": 5, "1": 5}}

    create_topic(b.url, "evt-b", queues=2)
    create_topic(b.url, "other", queues=2)
    produce(b.url, "evt-b", 4, queues=2)
    wait_visible(b.url, "evt-b", 4)
    start = {"evt-a": {"0": 5, "1": 5}}
    end = r.latestOffset(start, ReadAllAvailable())
    assert json.dumps(end) == '{"evt-a": {"0": 5, "1": 5}, "evt-b": {"0": 2, "1": 2}}'
    rows = _read_all(r, start, end)
    assert sorted(x["value"] for x in rows) == [b"evt-b-0", b"evt-b-1", b"evt-b-2", b"evt-b-3"]
    assert r.latestOffset(end, ReadAllAvailable()) == end  # nothing new: same JSON back


def test_read_reports_or_skips_offsets_deleted_after_planning(broker_factory: Any) -> None:
    b = broker_factory(env={**NO_MIRROR, "SPARKMQ_STORE__COMMITLOG_SEGMENT_BYTES": "65536"})
    create_topic(b.url, "logs", queues=1)
    produce(b.url, "logs", 1500, queues=1, size=100)
    wait_visible(b.url, "logs", 1500)
    strict, lenient = _reader(b.url, subscribe="logs"), _reader(b.url, subscribe="logs",
                                                                   failOnDataLoss="false")
    start, end = {"logs": {"0": 0}}, {"logs": {"0": 1500}}
    httpx.post(f"{b.url}/v1/admin/retention", json={"force": True}, timeout=30).raise_for_status()
    low = httpx.get(f"{b.url}/v1/topics/logs/queues").json()[0]["min_offset"]
    assert 0 < low < 1500

    with pytest.raises(DataLossError, match=r"logs/0: offsets \[0, \d+\) were deleted"):
        _read_all(strict, start, end)
    rows = _read_all(lenient, start, end)
    assert [x["offset"] for x in rows] == list(range(low, 1500))


def test_starting_timestamp_assign_and_endpoint_failover(broker_factory: Any) -> None:
    b = broker_factory(env=NO_MIRROR)
    create_topic(b.url, "t", queues=3)
    produce(b.url, "t", 6, queues=3)
    wait_visible(b.url, "t", 6)
    time.sleep(0.05)
    cut_ms = int(time.time() * 1000)
    time.sleep(0.05)
    produce(b.url, "t", 9, start=6, queues=3)
    wait_visible(b.url, "t", 15)

    r = _reader(b.url, subscribe="t", startingTimestamp=str(cut_ms))
    assert r.initialOffset() == {"$initial": 1, "t": {"0": 2, "1": 2, "2": 2}}
    by_queue = json.dumps({"t": {"0": cut_ms, "1": 0, "2": 4_000_000_000_000}})
    r = _reader(b.url, subscribe="t", startingOffsetsByTimestamp=by_queue)
    with pytest.raises(OptionError, match=r"no message at or after the timestamp in t/2 "
                                          r"\(timestamp 4000000000000\).*'latest'"):
        r.initialOffset()  # Kafka's default strategy: error
    r = _reader(b.url, subscribe="t", startingOffsetsByTimestamp=by_queue,
                startingOffsetsByTimestampStrategy="latest")
    assert r.initialOffset() == {"$initial": 1, "t": {"0": 2, "1": 0, "2": 5}}

    def batch(**options: str) -> list[tuple[int, int, int]]:
        opts = {"endpoint": b.url, "subscribe": "t", **{k.lower(): v for k, v in options.items()}}
        parts = SparkMQBatchReader(parse_reader(opts, batch=True)).partitions()
        return [(p.queue_id, p.start, p.end) for p in parts]  # type: ignore[attr-defined]

    # batch ends by time: the first offset at or after it; no match reads to the end
    assert batch(endingTimestamp=str(cut_ms)) == [(0, 0, 2), (1, 0, 2), (2, 0, 2)]
    assert batch(endingOffsetsByTimestamp=by_queue) == [(0, 0, 2), (2, 0, 5)]
    # one queue's range over several tasks, consecutive and complete
    assert batch(maxRecordsPerPartition="2") == [
        (q, s, e) for q in range(3) for s, e in ((0, 1), (1, 3), (3, 5))]
    assert len(batch(minPartitions="6")) == 6

    # the first endpoint is down: the reader fails over to the second
    dead = "http://127.0.0.1:9"
    r = _reader(f"{dead},{b.url}", assign='{"t": [2, 0]}',
                startingOffsets='{"t": {"2": 4, "0": -2}}')
    start = r.initialOffset()
    assert start == {"$initial": 1, "t": {"0": 0, "2": 4}}  # queue 1 is not assigned
    rows = _read_all(r, start, r.latestOffset(start, ReadAllAvailable()))
    assert [(x["partition"], x["offset"]) for x in rows] == [(0, o) for o in range(5)] + [(2, 4)]


def test_a_replayed_batch_zero_reads_its_first_range_though_latest_moved(
    broker_factory: Any,
) -> None:
    """Spark restarts a query whose batch 0 is logged but not committed: initialOffset()
    is asked again (a new reader), yet batch 0 must read the offsets it was planned with."""
    b = broker_factory(env=NO_MIRROR)
    create_topic(b.url, "t", queues=2)
    produce(b.url, "t", 10, queues=2)
    wait_visible(b.url, "t", 10)
    first = _reader(b.url, subscribe="t", startingOffsets="latest", maxOffsetsPerTrigger="4")
    start = first.initialOffset()
    assert first.initialOffset() is start  # asked again by the same run: the same answer
    produce(b.url, "t", 10, start=10, queues=2)
    wait_visible(b.url, "t", 20)
    end = first.latestOffset(start, ReadMaxRows(4))  # Spark logs this in offsets/0
    planned = [(x["partition"], x["offset"]) for x in _read_all(first, start, end)]
    assert planned == [(0, 5), (0, 6), (1, 5), (1, 6)]

    # batch 0 fails; more is produced; the query restarts from the checkpoint
    produce(b.url, "t", 10, start=20, queues=2)
    wait_visible(b.url, "t", 30)
    again = _reader(b.url, subscribe="t", startingOffsets="latest", maxOffsetsPerTrigger="4")
    moved = again.initialOffset()
    assert moved == {"$initial": 1, "t": {"0": 15, "1": 15}}  # latest moved on
    replay = [(x["partition"], x["offset"]) for x in _read_all(again, moved, end)]
    assert replay == planned
    after = again.latestOffset(end, ReadAllAvailable())
    assert after == {"t": {"0": 15, "1": 15}}
    rows = _read_all(again, end, after)
    assert [(x["partition"], x["offset"]) for x in rows] == (
        [(0, o) for o in range(7, 15)] + [(1, o) for o in range(7, 15)])


def test_min_offsets_per_trigger_waits_for_enough_new_offsets_or_max_trigger_delay(
    broker_factory: Any,
) -> None:
    b = broker_factory(env=NO_MIRROR)
    create_topic(b.url, "t", queues=2)
    r = _reader(b.url, subscribe="t", startingOffsets="earliest", minOffsetsPerTrigger="10",
                maxTriggerDelay="4s")
    limit = r.getDefaultReadLimit()
    assert isinstance(limit, ReadMinRows) and limit.min_rows == 10
    start = r.initialOffset()
    first = r.latestOffset(start, limit)  # batch 0 (Spark always plans it): the start
    produce(b.url, "t", 6, queues=2)
    wait_visible(b.url, "t", 6)
    assert r.latestOffset(first, limit) == first  # 6 < 10: no batch yet
    produce(b.url, "t", 4, start=6, queues=2)
    wait_visible(b.url, "t", 10)
    second = r.latestOffset(first, limit)
    assert second["t"] == {"0": 5, "1": 5}  # 10 new offsets: the trigger fires
    produce(b.url, "t", 2, start=10, queues=2)
    wait_visible(b.url, "t", 12)
    assert r.latestOffset(second, limit) == second
    time.sleep(4.1)  # maxTriggerDelay passed: fire with what there is
    assert r.latestOffset(second, limit) == {"t": {"0": 6, "1": 6}}
    # AvailableNow passes ReadAllAvailable and never waits; maxOffsetsPerTrigger takes the limit
    assert r.latestOffset(second, ReadAllAvailable()) == {"t": {"0": 6, "1": 6}}
    both = _reader(b.url, subscribe="t", minOffsetsPerTrigger="2", maxOffsetsPerTrigger="4")
    assert isinstance(both.getDefaultReadLimit(), ReadMaxRows)
