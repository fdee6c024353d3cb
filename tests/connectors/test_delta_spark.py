"""delta-spark over a live broker's mirror: SQL, readStream, time travel, and the snapshot fallback.

The shared ``spark`` session has delta-spark's jars (tests/conftest.py); the
jar-less and stale-~/.m2 cases run in a child Python with a session of their own.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from deltalake import DeltaTable

from connectors import ConnectorError, register_spark_view
from connectors.spark_view import delta_jars_loadable, mirror_stream

pytestmark = pytest.mark.spark

_REPO = Path(__file__).resolve().parents[2]
_FAST = {"SPARKMQ_MIRROR__BATCH_INTERVAL_S": "0.1"}


def _produce(url: str, topic: str, bodies: list[str]) -> None:
    msgs = [{"body": b, "keys": [b]} for b in bodies]
    resp = httpx.post(f"{url}/v1/topics/{topic}/messages", json={"messages": msgs}, timeout=30)
    assert resp.status_code == 200, resp.text


def _wait_mirrored(url: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    lag: dict[str, Any] = {}
    while time.monotonic() < deadline:
        lag = httpx.get(f"{url}/v1/broker", timeout=10).json()["mirror"]
        if lag["lag_bytes"] == 0 and lag["mirrored_offset"] > 0:
            return
        time.sleep(0.1)
    raise AssertionError(f"mirror still behind after {timeout_s}s: {lag}")


@pytest.fixture
def mirror(broker_factory: Callable[..., Any]) -> tuple[str, str]:
    """(broker url, mirror table path) of a running broker that mirrors fast."""
    b = broker_factory(env=_FAST)
    return b.url, str(b.data_dir / "delta" / "messages")


def _bodies(spark: Any, view: str, topic: str) -> list[str]:
    rows = spark.sql(f"SELECT CAST(body AS STRING) FROM {view} WHERE topic = '{topic}' ORDER BY commitlog_offset")
    return [r[0] for r in rows.collect()]


def test_spark_sql_over_the_live_mirror_sees_new_rows_without_re_registering(spark: Any,
                                                                              mirror: tuple[str, str]) -> None:
    url, table = mirror
    assert delta_jars_loadable(spark)
    _produce(url, "orders", [f"o-{i}" for i in range(30)])
    _wait_mirrored(url)
    assert register_spark_view(spark, table, "live_orders") == "delta"
    assert _bodies(spark, "live_orders", "orders") == [f"o-{i}" for i in range(30)]
    _produce(url, "orders", [f"o-{i}" for i in range(30, 50)])
    _wait_mirrored(url)
    # The delta view reads the latest version on every query: same view, new rows.
    assert _bodies(spark, "live_orders", "orders") == [f"o-{i}" for i in range(50)]
    spark.sql("REFRESH TABLE live_orders")  # accepted, and not needed
    counts = spark.sql("SELECT topic, count(*) FROM live_orders GROUP BY topic").collect()
    assert [tuple(r) for r in counts] == [("orders", 50)]


def test_read_stream_of_the_mirror_table_yields_only_new_messages_each_run(
        spark: Any, broker_factory: Callable[..., Any], tmp_path: Path) -> None:
    b = broker_factory(env={**_FAST, "SPARKMQ_MIRROR__COMPACT_EVERY_COMMITS": "2"})
    url, table = b.url, str(b.data_dir / "delta" / "messages")
    _produce(url, "clicks", [f"c-{i}" for i in range(10)])
    _wait_mirrored(url)
    seen: list[list[str]] = []

    def run_once() -> None:
        got: list[str] = []

        def collect(frame: Any, _batch_id: int) -> None:
            got.extend(r[0] for r in frame.selectExpr("CAST(body AS STRING)").collect())

        query = (mirror_stream(spark, table).where("topic = 'clicks'")
                 .writeStream.foreachBatch(collect)
                 .option("checkpointLocation", str(tmp_path / "checkpoint"))
                 .trigger(availableNow=True).start())
        query.awaitTermination(120)
        assert query.exception() is None
        seen.append(sorted(got, key=lambda b: int(b[2:])))

    run_once()
    first_run_version = DeltaTable(table).version()
    for i in range(10, 15):  # one mirror commit each; every second one is followed by a compaction
        _produce(url, "clicks", [f"c-{i}"])
        _wait_mirrored(url)
    run_once()
    assert seen == [[f"c-{i}" for i in range(10)], [f"c-{i}" for i in range(10, 15)]]
    later = [h for h in DeltaTable(table).history() if h["version"] > first_run_version]
    assert any(h.get("operation") == "OPTIMIZE" for h in later)  # compactions do not stop or repeat the stream


def test_time_travel_by_version_on_both_paths(spark: Any, mirror: tuple[str, str]) -> None:
    url, table = mirror
    _produce(url, "orders", ["first", "second"])
    _wait_mirrored(url)
    version = DeltaTable(table).version()
    _produce(url, "orders", ["third"])
    _wait_mirrored(url)
    assert DeltaTable(table).version() > version
    assert register_spark_view(spark, table, "then_delta", version=version) == "delta"
    assert register_spark_view(spark, table, "then_snap", mode="snapshot", version=version) == "snapshot"
    register_spark_view(spark, table, "now")
    assert _bodies(spark, "then_delta", "orders") == ["first", "second"]
    assert _bodies(spark, "then_snap", "orders") == ["first", "second"]
    assert _bodies(spark, "now", "orders") == ["first", "second", "third"]
    plain = spark.read.format("delta").option("versionAsOf", version).load(table)
    assert plain.where("topic = 'orders'").count() == 2
    with pytest.raises(ConnectorError, match="format\\('delta'\\)"):
        register_spark_view(spark, table, "future", version=version + 1000)


def test_snapshot_fallback_reads_the_same_rows_and_stays_pinned_until_re_registered(
        spark: Any, mirror: tuple[str, str]) -> None:
    url, table = mirror
    _produce(url, "orders", [f"o-{i}" for i in range(5)])
    _wait_mirrored(url)
    assert register_spark_view(spark, table, "snap", mode="snapshot") == "snapshot"
    register_spark_view(spark, table, "live")
    cols = "msg_id, topic, queue_id, queue_offset, keys, CAST(body AS STRING), store_date"
    def rows(view: str) -> list[tuple]:
        return [tuple(r) for r in spark.sql(f"SELECT {cols} FROM {view} ORDER BY commitlog_offset").collect()]
    assert rows("snap") == rows("live") and len(rows("snap")) == 5
    _produce(url, "orders", ["o-5"])
    _wait_mirrored(url)
    assert len(rows("snap")) == 5 and len(rows("live")) == 6  # the snapshot is one version
    register_spark_view(spark, table, "snap", mode="snapshot")
    assert rows("snap") == rows("live")


_CHILD_PRELUDE = """
import sys
from pyspark.sql import SparkSession
builder = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
           .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1"))
"""


def _run_child(code: str, env: dict[str, str] | None = None) -> str:
    full_env = {**os.environ, "PYSPARK_PYTHON": sys.executable, **(env or {})}
    done = subprocess.run([sys.executable, "-c", _CHILD_PRELUDE + textwrap.dedent(code)], cwd=_REPO, env=full_env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr[-4000:]
    return done.stdout


def test_a_session_without_the_jars_falls_back_to_the_snapshot(mirror: tuple[str, str]) -> None:
    url, table = mirror
    _produce(url, "orders", ["a", "b", "c"])
    _wait_mirrored(url)
    out = _run_child(f"""
        from connectors import ConnectorError, register_spark_view
        from connectors.spark_view import mirror_stream
        spark = builder.getOrCreate()
        print("used", register_spark_view(spark, {table!r}))
        print("rows", spark.sql("SELECT count(*) FROM messages").first()[0])
        for call in (lambda: register_spark_view(spark, {table!r}, mode="delta"),
                     lambda: mirror_stream(spark, {table!r})):
            try:
                call()
            except ConnectorError as exc:
                print("refused", str(exc)[:300])
        spark.stop()
    """)
    assert "used snapshot" in out and "rows 3" in out
    assert out.count("refused") == 2 and "configure_spark_with_delta_pip" in out


def test_a_stale_local_maven_entry_does_not_break_the_delta_session(tmp_path: Path) -> None:
    stale = tmp_path / "home" / ".m2" / "repository" / "io" / "delta" / "delta-storage" / "4.4.0"
    stale.mkdir(parents=True)
    (stale / "delta-storage-4.4.0.pom").write_text(
        '<project><modelVersion>4.0.0</modelVersion><groupId>io.delta</groupId>'
        '<artifactId>delta-storage</artifactId><version>4.4.0</version></project>')
    from tests.conftest import _ivy_dir

    with open(_ivy_dir() / ".lock", "w") as lock:  # the cache is shared with other test runs
        fcntl.flock(lock, fcntl.LOCK_EX)
        out = _run_child(f"""
            from connectors.spark_view import delta_jars_loadable, with_delta
            spark = with_delta(builder, ivy_dir={str(_ivy_dir())!r}).getOrCreate()
            print("loadable", delta_jars_loadable(spark))
            spark.stop()
        """, env={"JAVA_TOOL_OPTIONS": f"-Duser.home={tmp_path / 'home'}"})
    assert "loadable True" in out
