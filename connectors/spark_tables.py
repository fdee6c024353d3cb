"""Table topics in Spark: every topic's Delta table (and its ``<topic>__dlq``) as a Spark view.

    from connectors import register_table_topics, table_changes
    names = register_table_topics(spark, "http://127.0.0.1:8080")   # or the tables directory on disk
    spark.sql("SELECT region, sum(amount) FROM orders GROUP BY region").show()
    changes = table_changes(spark, "http://127.0.0.1:8080", "accounts")  # readChangeFeed stream (upsert tables)

The source is either a broker URL (its ``GET /v1/tables`` names each table
topic and where its tables are) or the tables directory itself
(``[tables] root_dir``, by default ``<data_dir>/tables``), where each
sub-directory holding a ``_delta_log`` is one table named by the directory.

With delta-spark's jars in the session the views use ``format("delta")``
through :func:`connectors.spark_view.register_spark_view` (live: each query
reads the latest version).  Without them each view is one snapshot read by
Spark's Parquet reader, partition columns restored from the Delta log; call
the helper again to see newer commits.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError

from .errors import ConnectorError
from .spark_view import action_file_uri, spark_path, delta_jars_loadable, register_spark_view

__all__ = ["register_table_topics", "table_changes", "table_locations"]

_DLQ_SUFFIX = "__dlq"


def table_locations(source: str, *, token: str | None = None, timeout_s: float = 10.0) -> dict[str, str]:
    """Table name -> Delta table URI: each table topic by its name and ``<topic>__dlq``.

    ``source``: a broker URL (``http(s)://``) or a tables directory.
    """
    if source.startswith(("http://", "https://")):
        return _from_broker(source.rstrip("/"), token, timeout_s)
    root = Path(source)
    if not root.is_dir():
        raise ConnectorError(f"no tables directory at {source}; pass a broker URL or [tables] root_dir")
    return {d.name: str(d.resolve()) for d in sorted(root.iterdir()) if (d / "_delta_log").is_dir()}


def _from_broker(url: str, token: str | None, timeout_s: float) -> dict[str, str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        resp = httpx.get(f"{url}/v1/tables", headers=headers, timeout=timeout_s)
        resp.raise_for_status()
        tables = resp.json()["tables"]
    except (httpx.HTTPError, ValueError, KeyError) as exc:
        raise ConnectorError(f"cannot list the table topics of {url}: {exc}") from exc
    out: dict[str, str] = {}
    for topic, status in sorted(tables.items()):
        if status.get("table_uri"):
            out[topic] = status["table_uri"]
            out[topic + _DLQ_SUFFIX] = status["dlq_uri"]
    return out


def register_table_topics(spark: Any, source: str, *, topics: list[str] | None = None, mode: str = "auto",
                          token: str | None = None) -> list[str]:
    """Register every table topic of ``source`` (or just ``topics``) and its DLQ as views; the names registered.

    A table not written yet (no commit on disk) is skipped.  ``mode``: as
    :func:`connectors.spark_view.register_spark_view` ("auto", "delta", "snapshot").
    """
    wanted = None if topics is None else set(topics) | {t + _DLQ_SUFFIX for t in topics}
    use_delta = mode == "delta" or (mode == "auto" and delta_jars_loadable(spark))
    done = []
    for name, uri in table_locations(source, token=token).items():
        if wanted is not None and name not in wanted or not _exists(uri):
            continue
        if use_delta:
            register_spark_view(spark, uri, name, mode="delta")
        else:
            snapshot_frame(spark, uri).createOrReplaceTempView(name)
        done.append(name)
    return done


def table_changes(spark: Any, source: str, topic: str, *, starting_version: int = 0,
                  token: str | None = None) -> Any:
    """``readStream.format("delta").option("readChangeFeed", "true")`` of a table topic (needs the delta jars).

    Rows carry Delta's ``_change_type`` (insert, update_preimage,
    update_postimage, delete), ``_commit_version`` and ``_commit_timestamp``.
    """
    uri = table_locations(source, token=token).get(topic)
    if uri is None:
        raise ConnectorError(f"topic {topic!r} has no table at {source}; give it one with PUT /v1/topics/{topic}")
    if not delta_jars_loadable(spark):
        raise ConnectorError("a change feed needs delta-spark's jars; build the session with "
                             "connectors.spark_view.with_delta(builder)")
    return (spark.readStream.format("delta").option("readChangeFeed", "true")
            .option("startingVersion", str(starting_version)).load(spark_path(uri)))


def _exists(uri: str) -> bool:
    try:
        DeltaTable(uri)
    except (DeltaError, OSError):
        return False
    return True


def snapshot_frame(spark: Any, uri: str) -> Any:
    """One pinned version of a table topic's table, read without delta-spark (any partition columns)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    try:
        table = DeltaTable(uri)
        actions = pa.table(table.get_add_actions(flatten=True)).to_pylist()
    except DeltaError as exc:
        raise ConnectorError(f"cannot read Delta table {uri}: {exc}") from exc
    full = StructType.fromJson(json.loads(table.schema().to_json()))
    parts = list(table.metadata().partition_columns)
    data = StructType([f for f in full.fields if f.name not in parts])
    root = table.table_uri.rstrip("/")
    groups: dict[tuple[Any, ...], list[str]] = defaultdict(list)
    for action in actions:
        key = tuple(action.get(f"partition.{p}") for p in parts)
        groups[key].append(spark_path(action_file_uri(root, str(action["path"]))))
    types = {f.name: f.dataType for f in full.fields}
    if not groups:
        return spark.createDataFrame([], full)
    frames = []
    for key, paths in sorted(groups.items(), key=lambda kv: [str(v) for v in kv[0]]):
        frame = spark.read.schema(data).parquet(*paths)
        for column, value in zip(parts, key):
            frame = frame.withColumn(column, F.lit(None if value is None else str(value)).cast(types[column]))
        frames.append(frame.select(*[f.name for f in full.fields]))
    result = frames[0]
    for other in frames[1:]:
        result = result.unionByName(other)
    return result
