"""The sink: rows → transactional half messages → one idempotent batch commit.

Exactly-once, per micro-batch::

    executor task   write(batches)   POST /v1/topics/{t}/messages {"transactional": true}
                                     POST ...?transaction_id=ID   (more chunks, same tx)
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
committed by the ones that had not (a commit that failed halfway).
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from .client import BrokerClient
from .errors import OptionError, SinkConflictError, SparkMQError
from .options import ClientConfig, WriterOptions
from .routing import TopicRouter, split_by_broker

__all__ = [
    "SinkCommitMessage",
    "SparkMQStreamWriter",
    "SparkMQBatchWriter",
    "validate_input_schema",
    "produce_tables",
]

log = logging.getLogger("sparkmq.streaming")

_COLUMN_TYPES = {
    "value": ("binary", "string"),
    "key": ("string",),
    "keys": ("array<string>",),
    "tags": ("string",),
    "properties": ("map<string,string>",),
    "queue_id": ("int", "bigint", "smallint", "tinyint"),
    "topic": ("string",),
}


@dataclass
class SinkCommitMessage(WriterCommitMessage):
    """What one task wrote: its open transactions (one per topic) and row count.

    With ``namesrv``, ``per_broker`` maps broker address → transaction ids and
    ``broker_names`` address → broker name; ``transaction_ids`` is then empty.
    """

    transaction_ids: list[str] = field(default_factory=list)
    rows: int = 0
    per_broker: dict[str, list[str]] = field(default_factory=dict)
    broker_names: dict[str, str] = field(default_factory=dict)


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


def _keys(batch: pa.RecordBatch) -> pa.Array | None:
    names = batch.schema.names
    if "keys" in names and "key" in names:
        keys, key = batch.column("keys").to_pylist(), batch.column("key").to_pylist()
        merged = [ks if ks else ([k] if k is not None else []) for ks, k in zip(keys, key)]
        return pa.array(merged, pa.list_(pa.string()))
    if "keys" in names:
        return batch.column("keys")
    if "key" in names:
        return batch.column("key")  # the broker takes a string column as one key per row
    return None


def _produce_table(batch: pa.RecordBatch) -> pa.Table:
    value = batch.column("value")
    empty = "" if pa.types.is_string(value.type) else b""
    columns: dict[str, pa.Array] = {"body": pc.fill_null(value, empty)}
    keys = _keys(batch)
    if keys is not None:
        columns["keys"] = keys
    for name in ("tags", "properties", "queue_id"):
        if name in batch.schema.names:
            columns[name] = batch.column(name)
    return pa.table(columns)


def produce_tables(batch: pa.RecordBatch, topic: str | None) -> dict[str, pa.Table]:
    """Rows of one Arrow batch → Arrow produce bodies, one per target topic.

    The ``topic`` option wins over a ``topic`` column (as in Spark's Kafka sink).
    """
    if topic is not None or "topic" not in batch.schema.names:
        assert topic is not None
        return {topic: _produce_table(batch)}
    topics = batch.column("topic")
    if topics.null_count:
        raise SparkMQError("a row has a null 'topic' and there is no 'topic' option")
    return {
        str(t): _produce_table(batch.filter(pc.equal(topics, t)))
        for t in sorted(pc.unique(topics).to_pylist())
    }


class _TaskTransactions:
    """A task's open transactions: one per (broker address, topic); '' = the endpoint."""

    def __init__(self, opts: WriterOptions) -> None:
        self._opts = opts
        self._clients: dict[str, BrokerClient] = {}
        self.txids: dict[tuple[str, str], str] = {}
        self.names: dict[str, str] = {}
        self.rows = 0

    def client(self, address: str) -> BrokerClient:
        if address not in self._clients:
            config = self._opts.client if not address else ClientConfig(
                endpoints=(address,), timeout_s=self._opts.client.timeout_s)
            self._clients[address] = BrokerClient(config)
        return self._clients[address]

    def send(self, address: str, topic: str, table: pa.Table) -> None:
        answer = self.client(address).produce_arrow(
            topic, table, transactional=True, transaction_id=self.txids.get((address, topic)))
        self.txids.setdefault((address, topic), str(answer["transaction_id"]))
        self.rows += table.num_rows

    def rollback(self) -> None:
        for (address, _topic), txid in self.txids.items():
            try:
                self.client(address).end_transaction(txid, "rollback")
            except SparkMQError as exc:
                log.warning("rollback of %s failed (the broker times it out): %s", txid, exc)

    def close(self) -> None:
        for client in self._clients.values():
            client.close()

    def message(self) -> SinkCommitMessage:
        if not self._opts.client.routed:
            return SinkCommitMessage(transaction_ids=sorted(self.txids.values()), rows=self.rows)
        per_broker: dict[str, list[str]] = {}
        for (address, _topic), txid in sorted(self.txids.items()):
            per_broker.setdefault(address, []).append(txid)
        return SinkCommitMessage(rows=self.rows, per_broker=per_broker,
                                 broker_names=dict(self.names))


def _partition_seed() -> int:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return ctx.partitionId() if ctx is not None else 0


def _send_chunk(
    tx: _TaskTransactions, router: TopicRouter | None, chunk: pa.RecordBatch,
    topic_option: str | None, seed: int,
) -> None:
    for topic, table in produce_tables(chunk, topic_option).items():
        if router is None:
            tx.send("", topic, table)
            continue
        for name, (route, part) in split_by_broker(table, router.writable(topic), seed).items():
            tx.names[route.address] = name
            tx.send(route.address, topic, part)


def _write_task(opts: WriterOptions, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
    tx = _TaskTransactions(opts)
    router = TopicRouter(opts.client.namesrv, opts.client.timeout_s) if opts.client.routed else None
    seed = _partition_seed() if router is not None else 0
    try:
        for batch in iterator:
            for start in range(0, batch.num_rows, opts.chunk_rows):
                _send_chunk(tx, router, batch.slice(start, opts.chunk_rows), opts.topic,
                            seed + start)
        return tx.message()
    except BaseException:
        tx.rollback()
        raise
    finally:
        tx.close()
        if router is not None:
            router.close()


def _txids(messages: list[WriterCommitMessage | None]) -> list[str]:
    return [t for m in messages if isinstance(m, SinkCommitMessage) for t in m.transaction_ids]


def _per_broker(
    opts: WriterOptions, messages: list[WriterCommitMessage | None]
) -> list[tuple[str, ClientConfig, list[str]]]:
    """(broker name, client config, transaction ids) for each broker the batch wrote to."""
    if not opts.client.routed:
        return [("", opts.client, _txids(messages))]
    merged: dict[str, list[str]] = {}
    names: dict[str, str] = {}
    for m in messages:
        if isinstance(m, SinkCommitMessage):
            names.update(m.broker_names)
            for address, txids in m.per_broker.items():
                merged.setdefault(address, []).extend(txids)
    return [
        (names.get(addr, addr), ClientConfig((addr,), opts.client.timeout_s), sorted(txids))
        for addr, txids in sorted(merged.items(), key=lambda kv: names.get(kv[0], kv[0]))
    ]


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


class SparkMQStreamWriter(DataSourceStreamArrowWriter):
    """writeStream: transactional halves per task, one idempotent commit per batch."""

    def __init__(self, opts: WriterOptions, sink_id: str) -> None:
        self._opts = opts
        self.sink_id = sink_id

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        return _write_task(self._opts, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        for broker, config, txids in _per_broker(self._opts, messages):
            with BrokerClient(config) as client:
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
        for _broker, config, txids in _per_broker(self._opts, messages):
            with BrokerClient(config) as client:
                client.abort_sink_batch(self.sink_id, batchId, txids)


class SparkMQBatchWriter(DataSourceArrowWriter):
    """df.write: every task's halves become visible in one commit, or none do."""

    def __init__(self, opts: WriterOptions) -> None:
        self._opts = opts
        self.sink_id = f"batch-{uuid.uuid4().hex}"

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        return _write_task(self._opts, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        for _broker, config, txids in _per_broker(self._opts, messages):
            with BrokerClient(config) as client:
                client.commit_sink_batch(self.sink_id, 0, txids)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        for _broker, config, txids in _per_broker(self._opts, messages):
            with BrokerClient(config) as client:
                client.abort_sink_batch(self.sink_id, 0, txids)
