"""The ``sparkmq`` data source class and its one-call registration.

The reader side (and ``pyarrow.compute``) is imported when a reader or the
schema is asked for: a Python worker that plans or commits a sink loads the
writer side only.
"""

from __future__ import annotations

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


def register(spark: Any) -> None:
    """Register the ``sparkmq`` format on this SparkSession."""
    spark.dataSource.register(SparkMQDataSource)
