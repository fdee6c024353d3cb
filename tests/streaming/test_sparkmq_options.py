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
    ],
)
def test_bad_options_fail_with_a_clear_message(options: dict[str, str], fragment: str) -> None:
    with pytest.raises(OptionError, match=fragment):
        parse_reader(options, batch=False)


def test_writer_options() -> None:
    w = parse_writer({"endpoint": "http://a:1, http://b:2/", "topic": "out", "sinkid": "s1"})
    assert w.client.endpoints == ("http://a:1", "http://b:2")
    assert w.topic == "out" and w.sink_id == "s1" and w.chunk_rows > 0
