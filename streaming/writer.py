"""The sink: rows → staged transactional messages → one idempotent batch commit.

Exactly-once, per micro-batch::

    executor task   write(batches)   POST /v1/topics/{t}/messages?transactional=true&staging=raw
                                     POST ...?transaction_id=ID&staging=raw (more chunks, same tx)
                                     (Arrow bodies the broker keeps unparsed until the commit)
                                     -> SinkCommitMessage(transaction_ids)
    driver          commit(msgs, b)  POST /v1/sinks/{sinkId}/batches/{b}/commit {ids}
                                       first time   -> "committed": halves become visible
                                       replayed b   -> "already_committed": broker rolls
                                                       the replay's halves back
                    abort(msgs, b)   POST /v1/sinks/{sinkId}/batches/{b}/abort {ids}

Halves of a failed task are rolled back by the task, or by the broker's
transaction timeout. A batch write (``df.write``) uses a fresh sink id per
job and commits all its tasks' transactions at once.

With ``namesrv`` each task routes rows to the brokers serving the topic
(see :mod:`routing`) and keeps one transaction per (broker, topic); the
driver commits each broker's transactions on that broker, keyed on
(sinkId, batchId) there. The guarantee is exactly once *per broker*: a
replayed batch is dropped by every broker that already committed it and
committed by the ones that had not (a commit that failed halfway). A send
that cannot reach its broker moves the task's free rows (no key, no
queue_id) to another broker, at most ``sendRetries`` times; see
:mod:`sending` for why that never duplicates.
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from .errors import OptionError, SinkConflictError
from .options import ClientConfig, WriterOptions
from .sink_commit import SinkCommitMessage, per_broker

if TYPE_CHECKING:
    import pyarrow as pa

    from .client import BrokerClient

__all__ = [
    "SinkCommitMessage",
    "SparkMQStreamWriter",
    "SparkMQBatchWriter",
    "validate_input_schema",
]

log = logging.getLogger("sparkmq.streaming")

_INT = ("int", "bigint", "smallint", "tinyint")
_COLUMN_TYPES = {
    "value": ("binary", "string"),
    "key": ("string", "binary"),
    "keys": ("array<string>",),
    "tags": ("string",),
    "properties": ("map<string,string>",),
    "queue_id": _INT,
    "partition": _INT,
    "headers": ("array<struct<key:string,value:binary>>", "array<struct<key:string,value:string>>"),
    "topic": ("string",),
}


def validate_input_schema(schema: Any, opts: WriterOptions) -> None:
    """Check the DataFrame's columns before any task runs (driver side)."""
    types = {f.name: f.dataType.simpleString() for f in schema.fields}
    if "value" not in types:
        raise OptionError(
            f"the sparkmq sink needs a 'value' column (binary or string); got {sorted(types)}"
        )
    for name, allowed in _COLUMN_TYPES.items():
        if name in types and types[name] not in allowed:
            raise OptionError(f"column {name!r} must be {' or '.join(allowed)}, "
                              f"got {types[name]}")
    if opts.topic is None and "topic" not in types:
        raise OptionError("set .option('topic', ...) or provide a 'topic' column")
    if "partition" in types and "queue_id" in types:
        raise OptionError("give either a 'partition' (Kafka's name) or a 'queue_id' column, "
                          "not both: both name the queue a row goes to")


def stream_sink_id(opts: WriterOptions, options: Any) -> str:
    """``sinkId`` option, else derived from the checkpoint location."""
    if opts.sink_id:
        return opts.sink_id
    checkpoint = options.get("checkpointlocation") or options.get("path")
    if not checkpoint:
        raise OptionError(
            "option 'sinkId' is required for writeStream: a stable name for this query's "
            "sink; exactly-once commits are keyed on (sinkId, batchId)"
        )
    return "ckpt-" + hashlib.sha256(str(checkpoint).encode()).hexdigest()[:24]


def _write_task(opts: WriterOptions, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
    """An executor task's sends; imported here, so the driver's planner and commit runner
    (which unpickle this module too) never load pyarrow and the task's sending code."""
    from .sending import write_task

    return write_task(opts, iterator)


def _client(config: ClientConfig) -> BrokerClient:
    """A commit's client; imported here, so the write planner (which only checks options and
    the schema) loads no HTTP code."""
    from .client import BrokerClient

    return BrokerClient(config)


class SparkMQStreamWriter(DataSourceStreamArrowWriter):
    """writeStream: transactional halves per task, one idempotent commit per batch."""

    def __init__(self, opts: WriterOptions, sink_id: str) -> None:
        self._opts = opts
        self.sink_id = sink_id

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        return _write_task(self._opts, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        for broker, config, txids in per_broker(self._opts, messages):
            with _client(config) as client:
                self._commit_on(client, broker, batchId, txids)

    def _commit_on(self, client: BrokerClient, broker: str, batchId: int, txids: list[str]) -> None:
        on = f" on broker {broker!r}" if broker else ""
        last = client.sink_status(self.sink_id).get("last_batch_id")
        if last is not None and batchId < int(last):
            client.abort_sink_batch(self.sink_id, batchId, txids)
            raise SinkConflictError(
                f"sinkId {self.sink_id!r} already committed batch {last}{on}, and this query "
                f"is committing batch {batchId}: the sinkId is reused by a query with a "
                "different (or fresh) checkpoint. Use a new sinkId for a new checkpoint."
            )
        answer = client.commit_sink_batch(self.sink_id, batchId, txids)
        if answer.get("status") == "already_committed":
            log.info("sink %s batch %d was already committed%s; replay's %d transactions "
                     "rolled back", self.sink_id, batchId, on, len(txids))

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        for _broker, config, txids in per_broker(self._opts, messages):
            with _client(config) as client:
                client.abort_sink_batch(self.sink_id, batchId, txids)


class SparkMQBatchWriter(DataSourceArrowWriter):
    """df.write: every task's halves become visible in one commit, or none do."""

    def __init__(self, opts: WriterOptions) -> None:
        self._opts = opts
        self.sink_id = f"batch-{uuid.uuid4().hex}"

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        return _write_task(self._opts, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        for _broker, config, txids in per_broker(self._opts, messages):
            with _client(config) as client:
                client.commit_sink_batch(self.sink_id, 0, txids)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        for _broker, config, txids in per_broker(self._opts, messages):
            with _client(config) as client:
                client.abort_sink_batch(self.sink_id, 0, txids)
