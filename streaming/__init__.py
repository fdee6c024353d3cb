"""The ``sparkmq`` PySpark data source: readStream/read and writeStream/write.

    import streaming
    streaming.register(spark)
    df = (spark.readStream.format("sparkmq")
          .option("endpoint", "http://127.0.0.1:8080")
          .option("subscribe", "orders").load())   # Kafka's columns: key, value, topic,
                                                   # partition, offset, timestamp, ...

It talks to brokers over HTTP only (never the store), so executors on other
machines work.
"""

from __future__ import annotations

from .errors import (
    BrokerRequestError,
    BrokerUnavailableError,
    DataLossError,
    NamesrvUnavailableError,
    OptionError,
    SinkConflictError,
    SinkError,
    SparkMQError,
    TopicNotFoundError,
)
from .lag import lag
from .schema import ARROW_SCHEMA, SCHEMA_DDL, spark_schema
from .source import SparkMQDataSource, register

__all__ = [
    "ARROW_SCHEMA",
    "SCHEMA_DDL",
    "BrokerRequestError",
    "BrokerUnavailableError",
    "DataLossError",
    "NamesrvUnavailableError",
    "OptionError",
    "SinkConflictError",
    "SinkError",
    "SparkMQDataSource",
    "SparkMQError",
    "TopicNotFoundError",
    "lag",
    "register",
    "spark_schema",
]
