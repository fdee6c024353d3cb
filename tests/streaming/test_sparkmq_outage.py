"""A dead broker costs its own queues, not the query (issue 21), end to end.

Real parts only: a NameServer that drops silent brokers after 4 s, two
brokers registered with it, SIGKILL, a restart on the same data dir and
port, and the session SparkSession.
"""

from __future__ import annotations

import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import StreamingQueryException

import streaming
from tests.namesrv.support import NamesrvProcess, free_port

from .support import BatchCollector, checkpoint, create_topic, produce, wait_until, wait_visible

pytestmark = pytest.mark.spark

BROKER_ENV = {
    "SPARKMQ_MIRROR__ENABLED": "false",
    "SPARKMQ_BROKER__REGISTER_INTERVAL_S": "0.5",
    "SPARKMQ_BROKER__LOG_LEVEL": "warning",
}


@pytest.fixture(scope="module")
def quick_namesrv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NamesrvProcess]:
    """A NameServer that drops a broker 4 s after its last heartbeat."""
    env = {"SPARKMQ_NAMESRV_BROKER_TIMEOUT_S": "4", "SPARKMQ_NAMESRV_SCAN_INTERVAL_S": "0.5"}
    proc = NamesrvProcess(free_port(), tmp_path_factory.mktemp("qns") / "namesrv.log", env).start()
    yield proc
    proc.stop()


@pytest.fixture
def start_broker(
    broker_factory: Callable[..., Any], quick_namesrv: NamesrvProcess, spark: Any
) -> Callable[[str], Any]:
    streaming.register(spark)
    addr = quick_namesrv.url.removeprefix("http://")

    def start(name: str) -> Any:
        return broker_factory(env={**BROKER_ENV, "SPARKMQ_BROKER__NAME": name,
                                   "SPARKMQ_BROKER__NAMESRV_ADDR": addr})
    return start


def _routed(ns: NamesrvProcess, topic: str) -> set[str]:
    resp = ns.get(f"/v1/routes/{topic}")
    return {b["broker_name"] for b in resp.json()["brokers"]} if resp.status_code == 200 else set()


def _reader(spark: Any, ns: NamesrvProcess, topic: str, **options: str) -> Any:
    r = (spark.readStream.format("sparkmq").option("namesrv", ns.url.removeprefix("http://"))
         .option("subscribe", topic).option("startingOffsets", "earliest"))
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def _start(df: Any, sink: BatchCollector, ckpt: str, *, now: bool = False) -> Any:
    w = df.writeStream.foreachBatch(sink).option("checkpointLocation", ckpt)
    return (w.trigger(availableNow=True) if now else w.trigger(processingTime="500 milliseconds")).start()


def _values(sink: BatchCollector) -> list[bytes]:
    return sorted(row[3] for row in sink.rows())


def _expect(ids: list[int]) -> list[bytes]:
    return sorted(f"orders-{i}".encode() for i in ids)


def _failure(q: Any, timeout_s: float) -> str:
    try:
        q.awaitTermination(timeout_s)
    except StreamingQueryException as exc:
        return str(exc)
    q.stop()
    raise AssertionError("the query should have failed")


def test_a_killed_broker_stops_its_queues_only_and_resumes_exactly_once(
    spark: Any, start_broker: Callable[[str], Any], quick_namesrv: NamesrvProcess, tmp_path: Path
) -> None:
    a, b = start_broker("broker-a"), start_broker("broker-b")
    for broker, first in ((a, 0), (b, 1000)):
        create_topic(broker.url, "orders", queues=2)
        produce(broker.url, "orders", 20, start=first, queues=2)
        wait_visible(broker.url, "orders", 20)
    wait_until(lambda: _routed(quick_namesrv, "orders") == {"broker-a", "broker-b"}, 20, "routes")
    seeded = checkpoint(tmp_path, "seeded")
    first = BatchCollector()
    _start(_reader(spark, quick_namesrv, "orders"), first, seeded, now=True).awaitTermination(120)
    assert _values(first) == _expect(list(range(20)) + list(range(1000, 1020)))
    for name in ("restart", "at-once", "small"):  # each copy gets its own query id
        shutil.copytree(seeded, checkpoint(tmp_path, name))
        (Path(checkpoint(tmp_path, name)) / "metadata").write_text(f'{{"id":"{uuid.uuid4()}"}}')

    main = BatchCollector()
    q = _start(_reader(spark, quick_namesrv, "orders"), main, checkpoint(tmp_path, "main"))
    try:
        wait_until(lambda: len(main.rows()) >= 40, 60, "the first 40 rows")
        b.kill()
        killed = time.monotonic()
        produce(a.url, "orders", 10, start=20, queues=2)
        wait_until(lambda: len(main.rows()) >= 50, 30, "the live broker's new rows")
        assert q.isActive

        # brokerDownTimeoutMs=0: today's behaviour, fail at once, naming the broker
        text = _failure(_start(_reader(spark, quick_namesrv, "orders", brokerDownTimeoutMs="0"),
                               BatchCollector(), checkpoint(tmp_path, "at-once"), now=True), 60)
        assert "broker 'broker-b'" in text and "brokerDownTimeoutMs=0" in text

        # dropped from the routes while a restarted query's checkpoint holds its offsets
        wait_until(lambda: _routed(quick_namesrv, "orders") == {"broker-a"}, 20, "b expired")
        restarted = BatchCollector()
        q2 = _start(_reader(spark, quick_namesrv, "orders"), restarted,
                    checkpoint(tmp_path, "restart"))
        small = _start(_reader(spark, quick_namesrv, "orders", brokerDownTimeoutMs="2000"),
                       BatchCollector(), checkpoint(tmp_path, "small"))
        started = time.monotonic()
        text = _failure(small, 60)
        assert time.monotonic() - started >= 2.0
        assert "broker 'broker-b'" in text and "no longer routes topic 'orders'" in text
        wait_until(lambda: len(restarted.rows()) >= 10 or not q2.isActive, 60,
                   "the restarted query reading a")
        assert q2.isActive, str(q2.exception())
        assert q.isActive and q2.isActive
        assert time.monotonic() - killed < 45  # the outage stays short

        b.start()
        produce(b.url, "orders", 10, start=1020, queues=2)
        everything = _expect(list(range(30)) + list(range(1000, 1030)))
        wait_until(lambda: _values(main) == everything, 60, "every row once after b is back")
        wait_until(lambda: len(restarted.rows()) >= 20, 60, "the restarted query reading b")
        assert _values(restarted) == _expect(list(range(20, 30)) + list(range(1020, 1030)))
        assert q.isActive and q.exception() is None
    finally:
        for query in spark.streams.active:
            query.stop()
