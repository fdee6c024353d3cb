"""spark.sql over the registered mirror view matches the embedded engine, with delta-spark and without."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from connectors import ConnectorError, register_spark_view, run_sql
from connectors.rows import batch_to_table
from connectors.table import MirrorTable

from .batches import make_batch

pytestmark = pytest.mark.spark

_DAY_MS = 86_400_000
_T0 = 1_763_700_000_000  # 2025-11-21 04:40 UTC


@pytest.fixture
def table_uri(tmp_path: Path) -> str:
    uri = str(tmp_path / "messages")
    table = MirrorTable(uri, "a")
    for day in range(3):  # three store_date partitions, two commits each
        for part in range(2):
            start = (day * 2 + part) * 10_000
            b = make_batch(start, 25, topic=f"t{part}", store_ms=_T0 + day * _DAY_MS,
                           props=[{"day": str(day)}] * 25)
            table.append(batch_to_table(b, from_offset=0, bodies=True), b.end_offset)
    table.compact()  # the view must read the active files only
    return uri


def _normal(v: Any) -> Any:
    if isinstance(v, dt.datetime):  # Spark hands back naive local time, the engine aware UTC
        return v.astimezone(dt.timezone.utc).replace(tzinfo=None)
    if isinstance(v, dict):
        return sorted(v.items())
    if isinstance(v, list) and v and isinstance(v[0], tuple):
        return sorted(v)
    if isinstance(v, bytearray):
        return bytes(v)
    return v


@pytest.mark.parametrize("mode", ["delta", "snapshot"])
def test_spark_sql_over_the_view_matches_the_embedded_engine(spark: Any, table_uri: str, mode: str) -> None:
    assert register_spark_view(spark, table_uri, "mirror_view", mode=mode) == mode
    sql = ("SELECT store_date, topic, count(*) AS n, min(store_timestamp) AS first "
           "FROM {t} GROUP BY store_date, topic ORDER BY store_date, topic")
    want = [tuple(_normal(v) for v in r.values())
            for r in run_sql(table_uri, sql.format(t="messages"), max_rows=100, timeout_s=30).to_pylist()]
    got = [tuple(_normal(v) for v in r) for r in spark.sql(sql.format(t="mirror_view")).collect()]
    assert got == want and len(got) == 6
    assert got[0][0] == dt.date(2025, 11, 21) and got[-1][0] == dt.date(2025, 11, 23)
    rows_sql = "SELECT msg_id, keys, properties, body, store_date FROM {t} ORDER BY commitlog_offset"
    want_rows = [tuple(_normal(v) for v in r.values())
                 for r in run_sql(table_uri, rows_sql.format(t="messages"), max_rows=1000, timeout_s=30).to_pylist()]
    got_rows = [tuple(_normal(v) for v in r) for r in spark.sql(rows_sql.format(t="mirror_view")).collect()]
    assert got_rows == want_rows and len(got_rows) == 150


def test_auto_mode_uses_delta_when_the_session_has_the_jars(spark: Any, table_uri: str) -> None:
    assert register_spark_view(spark, table_uri, "auto_view") == "delta"
    assert spark.sql("SELECT count(*) FROM auto_view").first()[0] == 150


def test_a_past_version_on_both_paths(spark: Any, table_uri: str) -> None:
    # version 0 creates the table, 1..6 are the six appends (25 rows each), 7 compacts (same rows)
    for mode in ("delta", "snapshot"):
        register_spark_view(spark, table_uri, "v1_view", mode=mode, version=2)
        assert spark.sql("SELECT count(*) FROM v1_view").first()[0] == 50, mode
        register_spark_view(spark, table_uri, "latest_view", mode=mode)
        assert spark.sql("SELECT count(*) FROM latest_view").first()[0] == 150, mode


def test_bad_arguments_are_clear_errors(spark: Any, table_uri: str) -> None:
    with pytest.raises(ConnectorError, match="mode must be one of"):
        register_spark_view(spark, table_uri, "nope", mode="live")
    with pytest.raises(ConnectorError, match="version must be >= 0"):
        register_spark_view(spark, table_uri, "nope", version=-1)
    with pytest.raises(ConnectorError, match="cannot read Delta table"):
        register_spark_view(spark, table_uri + "-missing", "nope", mode="snapshot")
