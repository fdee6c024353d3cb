"""Option ``filter``: the broker applies a SQL92 property filter to the Spark source's pulls."""

from __future__ import annotations

from typing import Any

import pytest

import streaming

from .support import create_topic, produce

pytestmark = pytest.mark.spark


def _read(spark: Any, url: str, **options: str) -> Any:
    streaming.register(spark)
    r = spark.read.format("sparkmq").option("endpoint", url).option("subscribe", "orders")
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def test_a_filtered_read_gets_only_matching_messages_and_a_bad_filter_names_its_position(
        spark: Any, broker: Any) -> None:
    create_topic(broker.url, "orders")
    produce(broker.url, "orders", 200, tags=lambda i: "eu" if i % 2 else "us")  # property i = "0".."199"
    rows = _read(spark, broker.url, filter="i >= 10 AND i < 30 AND TAGS = 'eu'").collect()
    assert sorted(r["value"].decode() for r in rows) == [f"orders-{i}" for i in range(11, 30, 2)]
    with pytest.raises(Exception) as info:
        _read(spark, broker.url, filter="i >>= 3").collect()
    assert "bad_filter" in str(info.value) and "position" in str(info.value)
