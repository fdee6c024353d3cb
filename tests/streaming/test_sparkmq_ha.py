"""A Spark availableNow query reads from the slave while the master is down, then continues exactly once.

Real processes: a master and its slave (HA replication, identical queue
offsets), SIGKILL of the master, a restart on the same data dir and port.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import streaming
from tests.broker_api.ha_support import caught_up, start_pair

from .support import BatchCollector, assert_exactly_once_in_order, checkpoint, create_topic, produce, spans

pytestmark = pytest.mark.spark


def _run_once(spark: Any, endpoint: str, ckpt: str) -> BatchCollector:
    sink = BatchCollector()
    df = (spark.readStream.format("sparkmq").option("endpoint", endpoint).option("subscribe", "orders")
          .option("startingOffsets", "earliest").load())
    q = df.writeStream.foreachBatch(sink).option("checkpointLocation", ckpt).trigger(availableNow=True).start()
    assert q.awaitTermination(120), "the availableNow query did not finish"
    assert q.exception() is None
    return sink


def test_available_now_reads_the_slave_while_the_master_is_down_and_continues_exactly_once(
        spark: Any, broker_factory: Callable[..., Any], tmp_path: Path) -> None:
    streaming.register(spark)
    pair = start_pair(broker_factory)
    master, slave = pair.master, pair.slave
    create_topic(master.url, "orders", queues=2)
    produce(master.url, "orders", 20, queues=2)
    caught_up(master, slave)
    endpoint = f"{master.url},{slave.url}"
    ckpt = checkpoint(tmp_path, "ha")

    master.kill()
    first = _run_once(spark, endpoint, ckpt)
    assert_exactly_once_in_order(first.rows(), spans(None, {0: 10, 1: 10}))

    master.start()
    produce(master.url, "orders", 10, start=20, queues=2)
    caught_up(master, slave)
    second = _run_once(spark, endpoint, ckpt)
    assert_exactly_once_in_order(second.rows(), spans({0: 10, 1: 10}, {0: 15, 1: 15}))
    assert sorted(r[3] for r in second.rows()) == sorted(f"orders-{i}".encode() for i in range(20, 30))
