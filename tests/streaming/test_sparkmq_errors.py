"""What a user sees when something is wrong: clear messages, through Spark."""

from __future__ import annotations

import socket
from typing import Any

import pytest

import streaming

from .support import NO_MIRROR, create_topic

pytestmark = pytest.mark.spark


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _read(spark: Any, **options: str) -> Any:
    streaming.register(spark)
    r = spark.read.format("sparkmq")
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def test_errors_name_the_problem_and_the_fix(spark: Any, broker_factory: Any) -> None:
    b = broker_factory(env=NO_MIRROR)
    create_topic(b.url, "orders")

    with pytest.raises(Exception, match="topic 'nope' does not exist on broker"):
        _read(spark, endpoint=b.url, subscribe="nope").collect()

    dead = f"http://127.0.0.1:{_free_port()}"
    with pytest.raises(Exception, match="no sparkmq broker answered .* is the broker running"):
        _read(spark, endpoint=dead, subscribe="orders").collect()

    with pytest.raises(Exception, match="option 'startingOffsets' is not valid JSON"):
        _read(spark, endpoint=b.url, subscribe="orders", startingOffsets="{orders: 1}").collect()

    with pytest.raises(Exception, match="names topic 'other', which is not subscribed"):
        _read(spark, endpoint=b.url, subscribe="orders",
              startingOffsets='{"other": {"0": 0}}').collect()

    with pytest.raises(Exception, match="option 'endpoint' is required"):
        _read(spark, subscribe="orders").collect()
