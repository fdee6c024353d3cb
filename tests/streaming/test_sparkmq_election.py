"""Spark across a controller election: the source and the sink follow the new master, no duplicates, no gaps.

Real processes: a NameServer with the controller, two brokers of one broker
name (SYNC), SIGKILL of the master; the query finds the new master through
the NameServer (``option("namesrv")``) and continues from its checkpoint.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import streaming
from tests.broker_api.ha_support import wait_for
from tests.broker_api.test_controller_failover import MASTER_TIMEOUT_S, controller, master_of, send, start_group
from tests.namesrv.support import NamesrvProcess

from .support import BatchCollector, checkpoint

pytestmark = pytest.mark.spark
__all__ = ["controller"]  # the fixture


def _run_once(spark: Any, namesrv: str, ckpt: str) -> list[tuple[str, int, int, bytes]]:
    sink = BatchCollector()
    df = (spark.readStream.format("sparkmq").option("namesrv", namesrv).option("subscribe", "t")
          .option("startingOffsets", "earliest").load())
    q = df.writeStream.foreachBatch(sink).option("checkpointLocation", ckpt).trigger(availableNow=True).start()
    assert q.awaitTermination(120), "the availableNow query did not finish"
    assert q.exception() is None
    return [(r[0], r[1], r[2], r[3]) for r in sink.rows()]


def _write(spark: Any, namesrv: str, values: list[str]) -> None:
    df = spark.createDataFrame([(v,) for v in values], "value string")
    df.write.format("sparkmq").option("namesrv", namesrv).option("topic", "t").mode("append").save()


def _check(rows: list[tuple[str, int, int, bytes]], bodies: set[str]) -> None:
    """Each (queue, offset) once, offsets in order per queue, exactly ``bodies``."""
    keys = [(q, o) for _, q, o, _ in rows]
    assert len(keys) == len(set(keys)), "a message was read twice"
    for queue in {q for q, _ in keys}:
        offsets = [o for q, o in keys if q == queue]
        assert offsets == sorted(offsets)
    got = sorted(bytes(r[3]).decode() for r in rows)
    assert got == sorted(bodies), (len(got), len(bodies))


def test_source_and_sink_follow_an_elected_master_with_no_duplicates_and_no_gaps(
        spark: Any, broker_factory: Callable[..., Any], controller: NamesrvProcess, tmp_path: Path) -> None:
    streaming.register(spark)
    master, slave = start_group(broker_factory, controller, "sync_master")
    ns = f"127.0.0.1:{controller.port}"
    wait_for(lambda: controller.get("/v1/routes/t").status_code == 200, 20, "the topic's route")
    ckpt = checkpoint(tmp_path, "election")
    first = {f"a{i}" for i in range(40)}
    _write(spark, ns, sorted(first))
    _check(_run_once(spark, ns, ckpt), first)

    master.kill()
    wait_for(lambda: master_of(controller) == slave.url, MASTER_TIMEOUT_S + 10, "the slave's election")
    wait_for(lambda: send(slave.url, ["probe"]), 10, "the new master to take writes")
    second = {f"b{i}" for i in range(40)}
    _write(spark, ns, sorted(second))  # the sink finds the new master through the NameServer
    _check(_run_once(spark, ns, ckpt), second | {"probe"})  # continues at the old master's offsets

    master.start()  # the old master rejoins as a slave
    wait_for(lambda: len(controller.get("/v1/controller/groups/bk").json()["sync_state_set"]) == 2, 30,
             "the old master to rejoin")
    third = {f"c{i}" for i in range(40)}
    _write(spark, ns, sorted(third))
    _check(_run_once(spark, ns, ckpt), third)
