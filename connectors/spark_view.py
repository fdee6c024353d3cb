"""The mirror table in Spark: a SQL view, a stream and time travel.

* With delta-spark's jars in the session (build it with :func:`with_delta`,
  which is ``configure_spark_with_delta_pip`` plus Delta's SQL extension and
  catalog): ``spark.read.format("delta")``.  The view is live: every query
  reads the table's latest version, no refresh needed.
  :func:`mirror_stream` is ``spark.readStream.format("delta")`` over the table.
* Without them (pip-only Spark, no Maven access): a view over one snapshot of
  the table.  delta-rs pins one version and lists its active files; Spark's
  own Parquet reader reads them and the partition column (``store_date``,
  which lives in the Delta log and the directory name, not in the files) is
  restored from each file's partition value.  The view shows that version;
  call :func:`register_spark_view` again to see newer commits.

Both paths take ``version=`` for time travel (``versionAsOf`` in Delta).
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections import defaultdict
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa

from deltalake import DeltaTable
from deltalake.exceptions import DeltaError

from .errors import ConnectorError
from .rows import PARTITION_COLUMN

__all__ = ["delta_jars_loadable", "mirror_stream", "register_spark_view", "snapshot_dataframe", "with_delta"]

_MODES = ("auto", "delta", "snapshot")
_DELTA_SOURCE = "org.apache.spark.sql.delta.sources.DeltaDataSource"
_NO_JARS = ("this SparkSession has no delta-spark jars; build it with connectors.spark_view.with_delta(builder) "
            "(or delta's configure_spark_with_delta_pip), or pass --packages io.delta:delta-spark_<spark>_2.13:<version>")
# Ivy settings for with_delta(ivy_dir=...): Maven Central only.  Spark's default chain looks in ~/.m2 first,
# where an entry with a pom but no jar makes the whole resolution fail.
_IVY_SETTINGS = """<ivysettings>
  <settings defaultResolver="central"/>
  <resolvers>
    <ibiblio name="central" m2compatible="true" root="https://repo1.maven.org/maven2/"/>
  </resolvers>
</ivysettings>
"""


def with_delta(builder: Any, *, ivy_dir: str | Path | None = None, extra_packages: list[str] | None = None) -> Any:
    """``builder`` configured the way delta-spark documents, so ``format("delta")`` works.

    ``configure_spark_with_delta_pip`` (delta-spark's jars for the installed
    pyspark, from Maven Central through Ivy) plus Delta's SQL extension and
    catalog.  With ``ivy_dir``, Ivy keeps its cache there and resolves from
    Maven Central only (no ~/.m2), so the jars are downloaded once per
    directory and a stale local Maven entry cannot break the start.
    """
    try:
        from delta import configure_spark_with_delta_pip
    except ImportError as exc:
        raise ConnectorError("delta-spark is not installed; pip install -e '.[spark]'") from exc
    builder = (configure_spark_with_delta_pip(builder, extra_packages=extra_packages)
               .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
               .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog"))
    if ivy_dir is None:
        return builder
    ivy = Path(ivy_dir).expanduser().resolve()
    return builder.config("spark.jars.ivy", str(ivy)).config("spark.jars.ivySettings", str(_ivy_settings(ivy)))


def _ivy_settings(ivy: Path) -> Path:
    """Write (atomically, once) the Maven-Central-only Ivy settings file in ``ivy``."""
    path = ivy / "ivysettings.xml"
    if path.exists() and path.read_text() == _IVY_SETTINGS:
        return path
    ivy.mkdir(parents=True, exist_ok=True)
    tmp = ivy / f".ivysettings.{os.getpid()}.tmp"
    tmp.write_text(_IVY_SETTINGS)
    os.replace(tmp, path)
    return path


def register_spark_view(spark: Any, table_uri: str, name: str = "messages", *, mode: str = "auto",
                        version: int | None = None) -> str:
    """Make ``spark.sql("SELECT ... FROM <name>")`` read the mirror table; returns the path used.

    ``mode``: "delta" needs delta-spark's jars (a live view: each query reads
    the latest version), "snapshot" never uses them (the view is pinned to the
    version read now), "auto" uses delta when the jars are there and the
    snapshot otherwise.  ``version`` pins a past table version on both paths.
    """
    if mode not in _MODES:
        raise ConnectorError(f"mode must be one of {_MODES}, not {mode!r}")
    if version is not None and version < 0:
        raise ConnectorError(f"version must be >= 0, not {version}")
    use_delta = mode == "delta" or (mode == "auto" and delta_jars_loadable(spark))
    frame = _delta_frame(spark, table_uri, version) if use_delta else snapshot_dataframe(spark, table_uri, version)
    frame.createOrReplaceTempView(name)
    return "delta" if use_delta else "snapshot"


def mirror_stream(spark: Any, table_uri: str, *, starting_version: int | None = None) -> Any:
    """``spark.readStream.format("delta")`` over the mirror table (needs delta-spark's jars).

    The stream starts with the table's current rows (or at ``starting_version``)
    and then yields each new mirror commit; compaction commits carry no new
    rows and are skipped by Delta.
    """
    if not delta_jars_loadable(spark):
        raise ConnectorError(f"cannot stream {table_uri}: {_NO_JARS}")
    reader = spark.readStream.format("delta")
    if starting_version is not None:
        reader = reader.option("startingVersion", str(starting_version))
    return reader.load(spark_path(table_uri))


def _delta_frame(spark: Any, table_uri: str, version: int | None) -> Any:
    if not delta_jars_loadable(spark):
        raise ConnectorError(f"format('delta') cannot read {table_uri}: {_NO_JARS}")
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", str(version))
    try:
        return reader.load(spark_path(table_uri))
    except Exception as exc:  # noqa: BLE001 - py4j/Spark errors, translated
        raise ConnectorError(f"format('delta') cannot read {table_uri}: {exc}") from exc


def delta_jars_loadable(spark: Any) -> bool:
    """Whether the session's JVM can load delta-spark's data source class."""
    try:
        jvm = spark._jvm  # classic (non-Connect) sessions only
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        loader.loadClass(_DELTA_SOURCE)
        return True
    except Exception:  # noqa: BLE001 - any failure means "not loadable"
        return False


def snapshot_dataframe(spark: Any, table_uri: str, version: int | None = None) -> Any:
    """A DataFrame of one pinned version of the table (the latest, or ``version``), read without delta-spark."""
    from pyspark.sql import functions as F

    try:
        table = DeltaTable(table_uri, version=version)
        actions = pa.table(table.get_add_actions(flatten=True)).to_pylist()
    except DeltaError as exc:
        raise ConnectorError(f"cannot read Delta table {table_uri}: {exc}") from exc
    schema = _data_schema(table)
    root = table.table_uri.rstrip("/")
    by_date: dict[dt.date | None, list[str]] = defaultdict(list)
    for action in actions:
        by_date[_partition_date(action)].append(spark_path(action_file_uri(root, str(action["path"]))))
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


def action_file_uri(root: str, path: str) -> str:
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


def spark_path(uri: str) -> str:
    """delta-rs gives local files as plain paths or file:// URIs; Spark takes both as file:."""
    if "://" in uri and not uri.startswith("file://"):
        return uri
    path = uri[len("file://"):] if uri.startswith("file://") else uri
    return "file://" + path if path.startswith("/") else path
