"""The ``sparkmq`` data source class and its one-call registration.

The reader side (and ``pyarrow.compute``) is imported when a reader or the
schema is asked for: a Python worker that plans or commits a sink loads the
writer side only.
"""

from __future__ import annotations

import os
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)

from .errors import OptionError
from .options import parse_columns, parse_reader, parse_writer
from .writer import (
    SparkMQBatchWriter,
    SparkMQStreamWriter,
    stream_sink_id,
    validate_input_schema,
)

__all__ = ["SparkMQDataSource", "register"]


class SparkMQDataSource(DataSource):
    """``format("sparkmq")``: consume queues as partitions; transactional sink."""

    @classmethod
    def name(cls) -> str:
        return "sparkmq"

    def schema(self) -> Any:
        from .schema import spark_schema

        return spark_schema(parse_columns(self.options))

    def reader(self, schema: Any) -> DataSourceReader:
        from .reader import SparkMQBatchReader

        return SparkMQBatchReader(parse_reader(self.options, batch=True))

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        from .reader import SparkMQStreamReader

        return SparkMQStreamReader(parse_reader(self.options, batch=False))

    def writer(self, schema: Any, overwrite: bool) -> DataSourceWriter:
        if overwrite:
            raise OptionError("sparkmq topics are append-only; use .mode('append')")
        opts = parse_writer(self.options)
        validate_input_schema(schema, opts)
        return SparkMQBatchWriter(opts)

    def streamWriter(self, schema: Any, overwrite: bool) -> DataSourceStreamWriter:
        # overwrite is Complete output mode: as Kafka's sink, every batch appends the whole
        # result table (topics are never truncated).
        opts = parse_writer(self.options)
        validate_input_schema(schema, opts)
        return SparkMQStreamWriter(opts, stream_sink_id(opts, self.options))


WORKER_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "workerpath")


def prefer_installed_pyspark(spark: Any) -> bool:
    """Let the Python processes Spark starts from now on import an installed PySpark's bytecode.

    Puts :data:`WORKER_PATH` (whose ``sitecustomize`` drops a pip-installed PySpark's own
    ``pyspark.zip`` from ``sys.path``) on the ``PYTHONPATH`` of the session's
    ``SparkContext.environment``, which Spark hands to the processes of the data sources and
    UDFs defined afterwards. False (nothing done) for a Spark Connect session.
    """
    try:
        environment = spark.sparkContext.environment
    except (AttributeError, NotImplementedError):  # Spark Connect: no SparkContext on the client
        return False
    entries = [e for e in environment.get("PYTHONPATH", "").split(os.pathsep) if e]
    if WORKER_PATH not in entries:
        environment["PYTHONPATH"] = os.pathsep.join([WORKER_PATH, *entries])
    return True


def register(spark: Any, *, installed_pyspark: bool = True) -> None:
    """Register the ``sparkmq`` format on this SparkSession.

    ``installed_pyspark`` (default True): the Python processes Spark starts for the source and
    sink (and for data sources and UDFs defined after this call) import a pip-installed PySpark
    from its package, with bytecode, instead of compiling it again from ``pyspark.zip``; see
    :func:`prefer_installed_pyspark`. A PySpark from a Spark distribution is used as before.
    """
    if installed_pyspark:
        prefer_installed_pyspark(spark)
    spark.dataSource.register(SparkMQDataSource)
