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

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

# Each name loads its module on first use: a Python worker that unpickles the sink
# (streaming.writer) imports neither the reader side nor pyarrow.compute.
_WHERE: dict[str, str] = {
    **dict.fromkeys(("BrokerRequestError", "BrokerUnavailableError", "DataLossError", "NamesrvUnavailableError",
                     "OptionError", "SinkConflictError", "SinkError", "SparkMQError", "TopicNotFoundError"), "errors"),
    "lag": "lag",
    **dict.fromkeys(("ARROW_SCHEMA", "SCHEMA_DDL", "spark_schema"), "schema"),
    **dict.fromkeys(("SparkMQDataSource", "register"), "source"),
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


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
