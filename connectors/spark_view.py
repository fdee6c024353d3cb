"""Register the mirror table as a view in a SparkSession.

* With delta-spark's jars on the classpath: ``spark.read.format("delta")``.
* Without them (pip-only Spark, no Maven access): a view over the table's
  current snapshot.  delta-rs pins one version and lists its active files;
  Spark's own Parquet reader reads them and the partition column
  (``store_date``, which lives in the Delta log and the directory name, not in
  the files) is restored from each file's partition value.  The view shows
  that version; call the helper again to see newer commits.
"""

from __future__ import annotations

import datetime as dt
import json
from collections import defaultdict
from typing import Any
from urllib.parse import unquote

import pyarrow as pa

from deltalake import DeltaTable
from deltalake.exceptions import DeltaError

from .errors import ConnectorError
from .rows import PARTITION_COLUMN

__all__ = ["register_spark_view", "snapshot_dataframe"]

_MODES = ("auto", "delta", "snapshot")


def register_spark_view(spark: Any, table_uri: str, name: str = "messages", *, mode: str = "auto") -> None:
    """Make ``spark.sql("SELECT ... FROM <name>")`` read the mirror table.

    ``mode``: "delta" needs delta-spark's jars, "snapshot" never uses them,
    "auto" tries delta first and falls back to the snapshot.
    """
    if mode not in _MODES:
        raise ConnectorError(f"mode must be one of {_MODES}, not {mode!r}")
    frame = None
    if mode in ("auto", "delta") and (mode == "delta" or delta_jars_loadable(spark)):
        try:
            frame = spark.read.format("delta").load(_spark_path(table_uri))
        except Exception as exc:  # noqa: BLE001 - py4j/Spark errors, translated
            raise ConnectorError(f"format('delta') cannot read {table_uri}: {exc}") from exc
    if frame is None:
        frame = snapshot_dataframe(spark, table_uri)
    frame.createOrReplaceTempView(name)


def delta_jars_loadable(spark: Any) -> bool:
    """Whether the session's JVM can load delta-spark's data source class."""
    try:
        jvm = spark._jvm  # classic (non-Connect) sessions only
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        loader.loadClass("org.apache.spark.sql.delta.sources.DeltaDataSource")
        return True
    except Exception:  # noqa: BLE001 - any failure means "not loadable"
        return False


def snapshot_dataframe(spark: Any, table_uri: str) -> Any:
    """A DataFrame of one pinned version of the table, read without delta-spark."""
    from pyspark.sql import functions as F

    try:
        table = DeltaTable(table_uri)
        actions = pa.table(table.get_add_actions(flatten=True)).to_pylist()
    except DeltaError as exc:
        raise ConnectorError(f"cannot read Delta table {table_uri}: {exc}") from exc
    schema = _data_schema(table)
    root = table.table_uri.rstrip("/")
    by_date: dict[dt.date | None, list[str]] = defaultdict(list)
    for action in actions:
        by_date[_partition_date(action)].append(_spark_path(_file_uri(root, str(action["path"]))))
    if not by_date:
        return spark.createDataFrame([], schema).withColumn(PARTITION_COLUMN, F.lit(None).cast("date"))
    frames = [
        spark.read.schema(schema).parquet(*paths).withColumn(PARTITION_COLUMN, F.lit(day).cast("date"))
        for day, paths in sorted(by_date.items(), key=lambda kv: (kv[0] is None, kv[0] or dt.date.min))
    ]
    frame = frames[0]
    for other in frames[1:]:
        frame = frame.unionByName(other)
    return frame


def _data_schema(table: DeltaTable) -> Any:
    """Spark schema of the columns stored in the files (partition columns left out)."""
    from pyspark.sql.types import StructType

    full = StructType.fromJson(_schema_json(table))
    keep = set(table.metadata().partition_columns)
    return StructType([f for f in full.fields if f.name not in keep])


def _schema_json(table: DeltaTable) -> dict:
    return json.loads(table.schema().to_json())


def _file_uri(root: str, path: str) -> str:
    """Absolute location of an add action's (URL-encoded, usually relative) path."""
    if "://" in path:
        return path
    return f"{root}/{unquote(path)}"


def _partition_date(action: dict) -> dt.date | None:
    """The store_date of one file, whatever form delta-rs reports it in."""
    value = action.get(f"partition.{PARTITION_COLUMN}", action.get(PARTITION_COLUMN))
    if value is None or value == "__HIVE_DEFAULT_PARTITION__":
        return None
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    return dt.date.fromisoformat(str(value)[:10])


def _spark_path(uri: str) -> str:
    """delta-rs gives local files as plain paths or file:// URIs; Spark takes both as file:."""
    if "://" in uri and not uri.startswith("file://"):
        return uri
    path = uri[len("file://"):] if uri.startswith("file://") else uri
    return "file://" + path if path.startswith("/") else path
