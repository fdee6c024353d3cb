"""Reader/writer option parsing: defaults, Kafka-style names, clear errors."""

from __future__ import annotations

import pytest

from streaming.errors import OptionError
from streaming.options import parse_reader, parse_writer

BASE = {"endpoint": "http://127.0.0.1:8080", "subscribe": "orders"}


def opts(**extra: str) -> dict[str, str]:
    # Spark lower-cases option names (CaseInsensitiveDict)
    return {k.lower(): v for k, v in {**BASE, **extra}.items()}


def test_stream_defaults_follow_kafka() -> None:
    o = parse_reader(opts(), batch=False)
    assert o.starting.kind == "latest" and o.fail_on_data_loss is True
    assert o.max_offsets_per_trigger is None and o.subscription.topics == ("orders",)
    assert o.client.endpoints == ("http://127.0.0.1:8080",)


def test_batch_defaults_and_rules() -> None:
    o = parse_reader(opts(endingOffsets='{"orders":{"0":5,"1":-1}}'), batch=True)
    assert o.starting.kind == "earliest" and o.ending.offsets == {"orders": {0: 5, 1: -1}}
    with pytest.raises(OptionError, match="not allowed in a batch read"):
        parse_reader(opts(startingOffsets="latest"), batch=True)
    with pytest.raises(OptionError, match="batch reads"):
        parse_reader(opts(endingOffsets="latest"), batch=False)


def test_subscription_forms() -> None:
    o = parse_reader({**opts(), "subscribe": "b, a,b"}, batch=False)
    assert o.subscription.topics == ("a", "b")
    o = parse_reader({"endpoint": BASE["endpoint"], "subscribepattern": "ord.*"}, batch=False)
    # Kafka's partial match (findFirstIn): 'xorders' contains 'ord...'; anchor to exclude it
    assert o.subscription.matches("orders") and o.subscription.matches("xorders")
    o = parse_reader({"endpoint": BASE["endpoint"], "subscribepattern": "^ord"}, batch=False)
    assert o.subscription.matches("orders") and not o.subscription.matches("xorders")
    o = parse_reader({"endpoint": BASE["endpoint"], "assign": '{"orders":[1,0]}'}, batch=False)
    assert o.subscription.assigned == {"orders": (0, 1)}


@pytest.mark.parametrize(
    "options, fragment",
    [
        ({"subscribe": "orders"}, "option 'endpoint' is required"),
        ({"endpoint": "127.0.0.1:8080", "subscribe": "o"}, "is not a broker URL"),
        ({"endpoint": "http://h:1"}, "exactly one of the options"),
        ({"endpoint": "http://h:1", "subscribe": "a", "assign": "{}"}, "exactly one of"),
        ({"endpoint": "http://h:1", "assign": "[1]"}, "must map topics to lists"),
        ({**BASE, "startingoffsets": "{bad"}, "startingOffsets' is not valid JSON"),
        ({**BASE, "startingoffsets": "newest"}, "must be 'earliest', 'latest', 'group'"),
        ({**BASE, "startingoffsets": "group"}, "needs the option 'group'"),
        ({**BASE, "maxoffsetspertrigger": "0"}, "must be a positive integer"),
        ({**BASE, "failondataloss": "maybe"}, "must be true or false"),
        ({**BASE, "startingtimestamp": "yesterday"}, "epoch milliseconds"),
        ({**BASE, "startingoffsetsbytimestamp": '{"orders": {"0": -1}}'}, "epoch milliseconds"),
        ({**BASE, "startingoffsetsbytimestampstrategy": "skip"}, "must be 'error' or 'latest'"),
        ({**BASE, "endingtimestamp": "5"}, "'endingTimestamp' is for batch reads"),
        ({**BASE, "minoffsetspertrigger": "9", "maxoffsetspertrigger": "5"}, "must not exceed"),
        ({**BASE, "maxtriggerdelay": "soon"}, "must be a duration"),
        ({**BASE, "minpartitions": "0"}, "'minPartitions' must be a positive integer"),
        # typos never silently fall back to a default
        ({**BASE, "startingoffset": "earliest"},
         r"unknown reader option 'startingoffset'.*did you mean 'startingOffsets'\?.*Valid"),
        ({**BASE, "maxoffsetpertrigger": "5"}, "did you mean 'maxOffsetsPerTrigger'"),
        ({**BASE, "kafka.bootstrap.servers": "h:9092"}, "no Kafka client.*'endpoint'"),
    ],
)
def test_bad_options_fail_with_a_clear_message(options: dict[str, str], fragment: str) -> None:
    with pytest.raises(OptionError, match=fragment):
        parse_reader(options, batch=False)


def test_writer_options() -> None:
    w = parse_writer({"endpoint": "http://a:1, http://b:2/", "topic": "out", "sinkid": "s1"})
    assert w.client.endpoints == ("http://a:1", "http://b:2")
    assert w.topic == "out" and w.sink_id == "s1" and w.chunk_rows > 0
    with pytest.raises(OptionError, match="unknown writer option 'topics'.*did you mean 'topic'"):
        parse_writer({"endpoint": "http://a:1", "topics": "out"})


def test_kafka_options_and_aliases() -> None:
    o = parse_reader(opts(**{
        "kafkaConsumer.pollTimeoutMs": "5000", "fetchOffset.numRetries": "5",
        "fetchOffset.retryIntervalMs": "20", "minOffsetsPerTrigger": "10",
        "maxTriggerDelay": "30s", "minPartitions": "8", "maxRecordsPerPartition": "1000",
        "includeHeaders": "true", "groupIdPrefix": "ignored",
        "startingOffsetsByTimestamp": '{"orders": {"0": 1700000000000}}',
        "startingOffsetsByTimestampStrategy": "latest"}), batch=False)
    assert o.client.timeout_s == 5.0 and o.client.retries == 5 and o.client.retry_interval_ms == 20
    assert (o.min_offsets_per_trigger, o.max_trigger_delay_ms) == (10, 30_000)
    assert (o.min_partitions, o.max_records_per_partition) == (8, 1000)
    assert o.columns.headers and not o.columns.sparkmq and not o.columns.broker
    assert o.starting.kind == "timestamps" and o.starting.strategy == "latest"
    assert o.starting.offsets == {"orders": {0: 1_700_000_000_000}}
    # startingTimestamp wins over the per-queue form and startingOffsets (Kafka's order)
    o = parse_reader(opts(startingTimestamp="5", startingOffsets="earliest",
                          startingOffsetsByTimestamp='{"orders": {"0": 1}}'), batch=False)
    assert (o.starting.kind, o.starting.timestamp_ms, o.starting.strategy) == ("timestamp", 5, "error")
    b = parse_reader(opts(endingTimestamp="7", maxOffsetsPerTrigger="3"), batch=True)
    assert b.ending.kind == "timestamp" and b.max_offsets_per_trigger is None  # ignored
    with pytest.raises(OptionError, match="-1 in its JSON"):
        parse_reader(opts(startingOffsets='{"orders": {"0": -1}}'), batch=True)
