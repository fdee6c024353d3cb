"""``option("namesrv", ...)``: reading and writing across brokers found through a NameServer.

Real parts only: a NameServer subprocess, brokers registered with it (short
register interval), the session SparkSession.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pytest
from pyspark.errors import StreamingQueryException

import streaming
from streaming.errors import NamesrvUnavailableError, OptionError
from streaming.namesrv import BrokerRoute
from streaming.offsets import QueueRange, from_json, plan_end, plan_ranges, to_json
from streaming.options import parse_reader
from streaming.reader import SparkMQStreamReader
from streaming.routing import split_by_broker
from tests.namesrv.support import NamesrvProcess, free_port

from .support import (
    BatchCollector,
    checkpoint,
    create_topic,
    produce,
    wait_until,
    wait_visible,
)

BROKER_ENV = {
    "SPARKMQ_MIRROR__ENABLED": "false",
    "SPARKMQ_BROKER__REGISTER_INTERVAL_S": "0.5",
    "SPARKMQ_BROKER__LOG_LEVEL": "warning",
}


# -- offsets JSON and options, no Spark -------------------------------------------------

def test_broker_level_offsets_json_has_a_stable_key_order() -> None:
    flat = {("orders", "broker-b", 0): 3, ("orders", "broker-a", 10): 1,
            ("orders", "broker-a", 2): 7, ("audit", "broker-a", 0): 5}
    text = json.dumps(to_json(flat))
    assert text == ('{"audit": {"broker-a": {"0": 5}}, "orders": {"broker-a": {"2": 7, "10": 1}, '
                    '"broker-b": {"0": 3}}}')
    assert from_json(json.loads(text)) == flat
    assert json.dumps(to_json(dict(reversed(list(flat.items()))))) == text


def test_single_broker_offsets_json_is_unchanged() -> None:
    flat = {("orders", 0): 23, ("orders", 1): 7}
    assert to_json(flat) == {"orders": {"0": 23, "1": 7}}
    assert from_json({"orders": {"0": 23, "1": 7}}) == flat


def test_namesrv_option_forms_and_broker_level_starting_offsets() -> None:
    opts = parse_reader({"namesrv": "127.0.0.1:9876; http://127.0.0.1:9877/", "subscribe": "orders",
                         "startingoffsets": '{"orders": {"broker-a": {"0": 12, "1": -2}}}'},
                        batch=False)
    assert opts.client.namesrv == ("http://127.0.0.1:9876", "http://127.0.0.1:9877")
    assert opts.client.routed and opts.client.endpoints == ()
    assert opts.starting.broker_offsets == {"orders": {"broker-a": {0: 12, 1: -2}}}
    with pytest.raises(OptionError, match="not both"):
        parse_reader({"namesrv": "127.0.0.1:9876", "endpoint": "http://127.0.0.1:1",
                      "subscribe": "t"}, batch=False)
    with pytest.raises(OptionError, match="broker names"):
        parse_reader({"namesrv": "127.0.0.1:9876", "subscribe": "t",
                      "startingoffsets": '{"t": {"0": 1}}'}, batch=False)
    with pytest.raises(OptionError, match="needs option 'namesrv'"):
        parse_reader({"endpoint": "http://127.0.0.1:1", "subscribe": "t",
                      "startingoffsets": '{"t": {"broker-a": {"0": 1}}}'}, batch=False)


def test_planning_picks_up_a_joined_broker_from_its_earliest_offset() -> None:
    start = {("t", "broker-a", 0): 5}
    ranges = {("t", "broker-a", 0): QueueRange(0, 9), ("t", "broker-b", 0): QueueRange(2, 4)}
    end = plan_end(start, ranges)
    assert end == {("t", "broker-a", 0): 9, ("t", "broker-b", 0): 4}
    plans = plan_ranges(start, end)
    assert [(p.broker, p.start, p.end, p.new_queue) for p in plans] == [
        ("broker-a", 5, 9, False), ("broker-b", 0, 4, True)]


def test_writer_routing_uses_the_clients_broker_queue_slots() -> None:
    brokers = [BrokerRoute("broker-b", "http://b", 2, 2), BrokerRoute("broker-a", "http://a", 2, 2)]
    keys = [[f"k{i % 9}"] for i in range(40)] + [[]] * 8
    table = pa.table({"body": [b"x"] * len(keys), "keys": pa.array(keys, pa.list_(pa.string()))})
    slots = sorted((b, q) for b in ("broker-a", "broker-b") for q in range(2))
    placed: dict[str, set[tuple[str, int]]] = {}
    unkeyed: list[str] = []
    for name, (_route, part) in split_by_broker(table, brokers, seed=0).items():
        for ks, qid in zip(part.column("keys").to_pylist(), part.column("queue_id").to_pylist()):
            if ks:
                placed.setdefault(ks[0], set()).add((name, qid))
            else:
                unkeyed.append(name)
    assert placed == {k: {slots[zlib.crc32(k.encode()) % 4]} for k in placed}
    assert sorted(unkeyed) == ["broker-a"] * 4 + ["broker-b"] * 4  # round robin over slots


def test_unreachable_namesrv_is_a_clear_error() -> None:
    opts = parse_reader({"namesrv": f"127.0.0.1:{free_port()}", "subscribe": "t"}, batch=False)
    with pytest.raises(NamesrvUnavailableError, match="no NameServer answered.*'namesrv' option"):
        SparkMQStreamReader(opts).initialOffset()


# -- end to end --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def namesrv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NamesrvProcess]:
    proc = NamesrvProcess(free_port(), tmp_path_factory.mktemp("namesrv") / "namesrv.log").start()
    yield proc
    proc.stop()


@pytest.fixture
def start_broker(
    broker_factory: Callable[..., Any], namesrv: NamesrvProcess, spark: Any
) -> Callable[[str], Any]:
    """``start(name)``: a broker registered with the NameServer; also registers ``sparkmq``."""
    streaming.register(spark)

    def start(name: str) -> Any:
        return broker_factory(env={**BROKER_ENV, "SPARKMQ_BROKER__NAME": name,
                                   "SPARKMQ_BROKER__NAMESRV_ADDR": namesrv.url.removeprefix("http://")})
    return start


def _route_brokers(namesrv: NamesrvProcess, topic: str) -> set[str]:
    resp = namesrv.get(f"/v1/routes/{topic}")
    return {b["broker_name"] for b in resp.json()["brokers"]} if resp.status_code == 200 else set()


def _wait_route(namesrv: NamesrvProcess, topic: str, brokers: set[str]) -> None:
    wait_until(lambda: _route_brokers(namesrv, topic) == brokers, 20, f"{topic} routed to {brokers}")


def _topic_on(broker: Any, topic: str, n: int, start: int = 0) -> None:
    """Create ``topic`` (2 queues) on ``broker`` if needed; produce ``n`` messages."""
    create_topic(broker.url, topic, queues=2)
    produce(broker.url, topic, n, start=start, queues=2)


def _read_available_now(spark: Any, namesrv: NamesrvProcess, topic: str, ckpt: str,
                        **options: str) -> tuple[list[bytes], Any]:
    reader = (spark.readStream.format("sparkmq").option("namesrv", namesrv.url.removeprefix("http://"))
              .option("subscribe", topic).option("startingOffsets", "earliest"))
    for k, v in options.items():
        reader = reader.option(k, v)
    sink = BatchCollector()
    q = (reader.load().writeStream.foreachBatch(sink).option("checkpointLocation", ckpt)
         .trigger(availableNow=True).start())
    q.awaitTermination(120)
    if q.exception() is not None:
        raise AssertionError(str(q.exception()))
    return [row[3] for row in sink.rows()], q


def _values(topic: str, ids: range) -> list[bytes]:
    return [f"{topic}-{i}".encode() for i in ids]


def test_available_now_reads_both_brokers_exactly_once(
    spark: Any, start_broker: Callable[[str], Any], namesrv: NamesrvProcess, tmp_path: Path
) -> None:
    a, b = start_broker("broker-a"), start_broker("broker-b")
    _topic_on(a, "both", 30)
    _topic_on(b, "both", 20, start=30)
    wait_visible(a.url, "both", 30)
    wait_visible(b.url, "both", 20)
    _wait_route(namesrv, "both", {"broker-a", "broker-b"})
    got, q = _read_available_now(spark, namesrv, "both", checkpoint(tmp_path, "both"))
    assert sorted(got) == sorted(_values("both", range(50)))
    end = json.loads(q.lastProgress["sources"][0]["endOffset"])
    start = {"broker-a": {"0": 0, "1": 0}, "broker-b": {"0": 0, "1": 0}}
    assert end == {"$from": {"both": start},  # batch 0 keeps where it started
                   "both": {"broker-a": {"0": 15, "1": 15}, "broker-b": {"0": 10, "1": 10}}}
    # queue ids repeat across brokers: the 'broker' column completes a message's identity
    df = (spark.read.format("sparkmq").option("namesrv", namesrv.url.removeprefix("http://"))
          .option("subscribe", "both").load())
    assert df.columns[-1] == "broker"
    ids = [(r.topic, r.partition, r.offset, r.broker) for r in df.collect()]
    assert len(set(ids)) == 50 and len({i[:3] for i in ids}) == 30
    assert {i[3] for i in ids} == {"broker-a", "broker-b"}


def test_a_broker_joining_between_runs_is_picked_up_without_rereading(
    spark: Any, start_broker: Callable[[str], Any], namesrv: NamesrvProcess, tmp_path: Path
) -> None:
    ckpt = checkpoint(tmp_path, "join")
    a = start_broker("broker-a")
    _topic_on(a, "joined", 10)
    wait_visible(a.url, "joined", 10)
    _wait_route(namesrv, "joined", {"broker-a"})
    first, _ = _read_available_now(spark, namesrv, "joined", ckpt)
    assert sorted(first) == sorted(_values("joined", range(10)))

    b = start_broker("broker-b")
    _topic_on(b, "joined", 6, start=100)
    produce(a.url, "joined", 4, start=10, queues=2)
    wait_visible(a.url, "joined", 14)
    wait_visible(b.url, "joined", 6)
    _wait_route(namesrv, "joined", {"broker-a", "broker-b"})
    second, _ = _read_available_now(spark, namesrv, "joined", ckpt, group="g-joined")
    assert sorted(second) == sorted(_values("joined", range(10, 14)) + _values("joined", range(100, 106)))
    # option 'group': each broker holds the group's offsets of its own queues
    assert _group(a.url, "g-joined", "joined") == {"0": 7, "1": 7}
    assert _group(b.url, "g-joined", "joined") == {"0": 3, "1": 3}


def _group(url: str, group: str, topic: str) -> dict[str, int]:
    body = httpx.get(f"{url}/v1/groups/{group}/offsets", params={"topic": topic}, timeout=5).json()
    return {str(q): int(o) for q, o in (body.get("offsets") or {}).items()}


def test_a_broker_leaving_with_unread_data_is_waited_for_and_read_when_it_returns(
    spark: Any, start_broker: Callable[[str], Any], namesrv: NamesrvProcess, tmp_path: Path
) -> None:
    ckpt = checkpoint(tmp_path, "leave")
    a, b = start_broker("broker-a"), start_broker("broker-b")
    _topic_on(a, "leave", 8)
    _topic_on(b, "leave", 8, start=100)
    wait_visible(a.url, "leave", 8)
    wait_visible(b.url, "leave", 8)
    _wait_route(namesrv, "leave", {"broker-a", "broker-b"})
    first, _ = _read_available_now(spark, namesrv, "leave", ckpt)
    assert len(first) == 16

    produce(b.url, "leave", 4, start=108, queues=2)  # never read: b leaves first
    wait_visible(b.url, "leave", 12)
    produce(a.url, "leave", 3, start=8, queues=2)
    wait_visible(a.url, "leave", 11)
    assert b.stop() == 0
    _wait_route(namesrv, "leave", {"broker-a"})
    with pytest.raises(StreamingQueryException) as failed:
        _read_available_now(spark, namesrv, "leave", ckpt, brokerDownTimeoutMs="0")
    text = str(failed.value)
    assert "broker 'broker-b'" in text and "no longer routes topic 'leave'" in text
    assert "Restart that broker" in text

    rest, _ = _read_available_now(spark, namesrv, "leave", ckpt)  # a's rows; b's wait
    assert sorted(rest) == sorted(_values("leave", range(8, 11)))
    b.start()
    _wait_route(namesrv, "leave", {"broker-a", "broker-b"})
    last, _ = _read_available_now(spark, namesrv, "leave", ckpt)
    assert sorted(last) == sorted(_values("leave", range(108, 112)))


def _broker_rows(spark: Any, url: str, topic: str) -> list[tuple[str, bytes]]:
    df = spark.read.format("sparkmq").option("endpoint", url).option("subscribe", topic).load()
    return [(r[0], bytes(r[1])) for r in df.select("key", "value").collect()]


def test_writer_spreads_rows_over_both_brokers_exactly_once_with_keys_on_one_broker(
    spark: Any, start_broker: Callable[[str], Any], namesrv: NamesrvProcess, tmp_path: Path
) -> None:
    a, b = start_broker("broker-a"), start_broker("broker-b")
    _topic_on(a, "wsrc", 40)
    wait_visible(a.url, "wsrc", 40)
    for broker in (a, b):
        create_topic(broker.url, "wdst", queues=2)
    _wait_route(namesrv, "wsrc", {"broker-a"})
    _wait_route(namesrv, "wdst", {"broker-a", "broker-b"})
    addr = namesrv.url.removeprefix("http://")
    ckpt = checkpoint(tmp_path, "writer")

    def run() -> list[int]:
        src = (spark.readStream.format("sparkmq").option("namesrv", addr).option("subscribe", "wsrc")
               .option("startingOffsets", "earliest").load()
               .selectExpr("concat('user-', cast(offset % 7 as string)) AS key", "value"))
        q = (src.writeStream.format("sparkmq").option("namesrv", addr).option("topic", "wdst")
             .option("checkpointLocation", ckpt).trigger(availableNow=True).start())
        q.awaitTermination(120)
        assert q.exception() is None, str(q.exception())
        return [p["batchId"] for p in q.recentProgress if p["numInputRows"]]

    assert run() == [0]
    # Crash between the sink commits and Spark's commit log: Spark replays batch 0,
    # and every broker drops its part of the replay (exactly once per broker).
    commits = Path(ckpt) / "commits"
    for name in ("0", ".0.crc"):
        (commits / name).unlink(missing_ok=True)
    assert run() == [0]  # replayed
    on_a, on_b = _broker_rows(spark, a.url, "wdst"), _broker_rows(spark, b.url, "wdst")
    assert on_a and on_b
    assert sorted(v for _, v in on_a + on_b) == sorted(_values("wsrc", range(40)))
    assert not {k for k, _ in on_a} & {k for k, _ in on_b}
    route = httpx.get(f"{namesrv.url}/v1/routes/wdst", timeout=5).json()
    assert {q["broker_name"] for q in route["queues"]} == {"broker-a", "broker-b"}


def test_writer_moves_keyless_rows_off_a_dead_broker_and_fails_keyed_rows_naming_it(
    spark: Any, start_broker: Callable[[str], Any], namesrv: NamesrvProcess
) -> None:
    a, b = start_broker("broker-a"), start_broker("broker-b")
    for broker in (a, b):
        create_topic(broker.url, "wdead", queues=2)
    _wait_route(namesrv, "wdead", {"broker-a", "broker-b"})
    b.kill()  # still in the routes for the NameServer's 120 s expiry
    addr = namesrv.url.removeprefix("http://")

    def write(df: Any) -> None:
        (df.write.format("sparkmq").option("namesrv", addr).option("topic", "wdead")
         .mode("append").save())

    write(spark.createDataFrame([(f"v{i}",) for i in range(20)], "value string"))
    assert sorted(v for _, v in _broker_rows(spark, a.url, "wdead")) == sorted(
        f"v{i}".encode() for i in range(20))

    keyed = spark.createDataFrame([(f"user-{i}", f"k{i}") for i in range(20)], "key string, value string")
    with pytest.raises(Exception) as failed:
        write(keyed)
    text = str(failed.value)
    assert "broker 'broker-b'" in text and "per-key order" in text and str(b.port) in text
    assert len(_broker_rows(spark, a.url, "wdead")) == 20  # the failed write left nothing

    def read(**options: str) -> Any:
        r = spark.read.format("sparkmq").option("namesrv", addr).option("subscribe", "wdead")
        for k, v in options.items():
            r = r.option(k, v)
        return r.load().collect()

    with pytest.raises(Exception, match="broker 'broker-b'.*skipUnavailableBrokers"):
        read()
    assert len(read(skipUnavailableBrokers="true")) == 20
