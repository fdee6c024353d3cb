"""A sink task's sends: rows → staged transactional messages, one transaction per broker.

With ``endpoint`` every row goes to the broker's master (never a slave).
With ``namesrv`` rows are placed over the writable brokers' queues (see
:mod:`routing`), and a send that cannot reach its broker is handled so that
nothing is written twice::

    broker X does not answer the first send of this task to X (nothing of the
    task's is stored there, or only a half whose transaction id the task never
    learnt, which X's transaction timeout rolls back)
        rows with a key or queue_id  -> the task fails, naming X (per-key order)
        free rows                     -> sent to another broker, at most
                                         ``sendRetries`` more brokers
    broker X stops answering after it took some of this task's rows
        -> the task fails, naming X; its transactions are rolled back (X's by
           its timeout), so a retried task writes everything once

Brokers that failed are avoided for free rows by the task's later chunks
(a :class:`health.BrokerHealth` back-off shared by the task's clients).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import pyarrow as pa

from .client import BrokerClient
from .errors import BrokerUnavailableError, SinkError, SparkMQError
from .health import BrokerHealth
from .namesrv import BrokerRoute
from .options import ClientConfig, WriterOptions
from .routing import Placement, TopicRouter, free_rows, place
from .sink_commit import SinkCommitMessage

__all__ = ["SinkCommitMessage", "TaskSender", "produce_tables", "write_task"]

log = logging.getLogger("sparkmq.streaming")
_MASTER_POLL_S = 0.25


class TaskSender:
    """A task's open transactions: one per (broker address, topic); '' = the endpoint."""

    def __init__(self, opts: WriterOptions) -> None:
        self._opts = opts
        self.health = BrokerHealth()
        self._clients: dict[str, BrokerClient] = {}
        self.txids: dict[tuple[str, str], str] = {}
        self.names: dict[str, str] = {}
        self.rows = 0
        routed = opts.client.routed
        self.router = TopicRouter(opts.client.namesrv, opts.client.timeout_s, opts.client.trust) if routed else None

    def client(self, address: str) -> BrokerClient:
        if address not in self._clients:
            if not address:
                self._clients[address] = BrokerClient(self._opts.client)
            else:  # one pass: a broker that does not answer is routed around
                config = ClientConfig(endpoints=(address,), timeout_s=self._opts.client.timeout_s,
                                      broker=self.names.get(address, ""), trust=self._opts.client.trust)
                self._clients[address] = BrokerClient(config, health=self.health, rounds=1)
        return self._clients[address]

    def send(self, address: str, topic: str, table: pa.Table) -> None:
        answer = self.client(address).produce_arrow(
            topic, table, transactional=True, transaction_id=self.txids.get((address, topic)),
            staged=True)
        self.txids.setdefault((address, topic), str(answer["transaction_id"]))
        self.rows += table.num_rows

    def send_topic(self, topic: str, table: pa.Table, seed: int) -> None:
        """Send one produce body of ``topic``: to the endpoint, or routed over brokers."""
        if self.router is None:
            self.send("", topic, table)
            return
        brokers = self.router.writable(topic)
        down = frozenset(r.name for r in brokers if not r.has_master or not self.health.available(r.address))
        for name, p in place(table, brokers, seed, down).items():
            if not p.route.has_master:  # only keyed rows (or rows with a queue_id) are placed here
                p = self._await_master(topic, name, p)
            self.names[p.route.address] = name
            try:
                self.send(p.route.address, topic, p.body(table))
            except BrokerUnavailableError as exc:
                self._check_movable(p.route, topic, table.take(pa.array(p.rows)), exc)
                rest = table.take(pa.array(p.rows))
                self._send_elsewhere(topic, rest, brokers, seed, {name}, exc)

    def _await_master(self, topic: str, name: str, p: Placement) -> Placement:
        """``p`` sent to ``name``'s new (or returning) master; SinkError naming it after the timeout."""
        assert self.router is not None
        deadline = time.monotonic() + self._opts.client.timeout_s
        while time.monotonic() < deadline:
            time.sleep(_MASTER_POLL_S)
            route = next((r for r in self.router.writable(topic, refresh=True) if r.name == name), None)
            if route is not None and route.has_master:
                return Placement(route, p.rows, p.queues)
        raise SinkError(
            f"broker {name!r} has no live master for {self._opts.client.timeout_s:g} s and "
            f"{len(p.rows)} row(s) for topic {topic!r} must go to it: rows with a key keep "
            "per-key order on their broker name, so they are not sent to another one. The task "
            "fails and Spark retries it; the query resumes from its checkpoint"
        )

    def _check_movable(self, route: BrokerRoute, topic: str, rows: pa.Table,
                       exc: BrokerUnavailableError) -> None:
        """Raise unless the rows bound for ``route`` may go to another broker."""
        where = f"broker {route.name!r} ({route.address})"
        if (route.address, topic) in self.txids:
            raise SinkError(
                f"{where} stopped answering after it took some of this task's rows for topic "
                f"{topic!r}; the task fails and rolls its transactions back (that broker's by "
                f"its transaction timeout), so a retry writes every row once: {exc}"
            ) from exc
        pinned = int((~free_rows(rows)).sum())
        if pinned:
            raise SinkError(
                f"{where} does not answer, and {pinned} row(s) for topic {topic!r} must go to "
                "it: rows with a key keep per-key order on their broker (and rows with a "
                "queue_id keep their queue), so they are not sent elsewhere. Restart that "
                f"broker and the query (it resumes from its checkpoint): {exc}"
            ) from exc

    def _send_elsewhere(self, topic: str, rows: pa.Table, brokers: list[BrokerRoute],
                        seed: int, tried: set[str], exc: BrokerUnavailableError) -> None:
        """Free rows whose broker failed: the other brokers, at most sendRetries of them."""
        others = [r for r in brokers if r.name not in tried and r.has_master]
        if len(tried) > self._opts.send_retries or not others:
            raise SinkError(
                f"no broker took {rows.num_rows} row(s) for topic {topic!r} after trying "
                f"{sorted(tried)} (sendRetries={self._opts.send_retries}): {exc}"
            ) from exc
        target = next((r for r in others if self.health.available(r.address)), others[0])
        log.warning("broker %r does not answer; sending %d row(s) for %r to %r instead: %s",
                    exc.broker or sorted(tried)[-1], rows.num_rows, topic, target.name, exc)
        p = place(rows, [target], seed)[target.name]
        self.names[target.address] = target.name
        try:
            self.send(target.address, topic, p.body(rows))
        except BrokerUnavailableError as again:
            self._check_movable(target, topic, rows, again)
            self._send_elsewhere(topic, rows, brokers, seed, tried | {target.name}, again)

    def rollback(self) -> None:
        for (address, _topic), txid in self.txids.items():
            try:
                self.client(address).end_transaction(txid, "rollback")
            except SparkMQError as exc:
                log.warning("rollback of %s failed (the broker times it out): %s", txid, exc)

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        if self.router is not None:
            self.router.close()

    def message(self) -> SinkCommitMessage:
        if not self._opts.client.routed:
            return SinkCommitMessage(transaction_ids=sorted(self.txids.values()), rows=self.rows)
        per_broker: dict[str, list[str]] = {}
        for (address, _topic), txid in sorted(self.txids.items()):
            per_broker.setdefault(address, []).append(txid)
        return SinkCommitMessage(rows=self.rows, per_broker=per_broker,
                                 broker_names=dict(self.names))


def _key_strings(key: pa.Array) -> pa.Array:
    """A ``key`` column (string, or Kafka's binary) as strings; keys are UTF-8 text in sparkmq."""
    if not pa.types.is_binary(key.type) and not pa.types.is_large_binary(key.type):
        return key
    try:
        return key.cast(pa.string())
    except pa.ArrowInvalid as exc:
        raise SinkError("a binary 'key' is not UTF-8 text; sparkmq keys are strings (they are "
                        "indexed and hashed to pick the queue): decode or hex() it first") from exc


def _keys(batch: pa.RecordBatch) -> pa.Array | None:
    names = batch.schema.names
    if "keys" in names and "key" in names:
        keys = batch.column("keys").to_pylist()
        key = _key_strings(batch.column("key")).to_pylist()
        merged = [ks if ks else ([k] if k is not None else []) for ks, k in zip(keys, key)]
        return pa.array(merged, pa.list_(pa.string()))
    if "keys" in names:
        return batch.column("keys")
    if "key" in names:
        return _key_strings(batch.column("key"))  # the broker takes strings as one key per row
    return None


def _text(value: object, what: str) -> str:
    if isinstance(value, (bytes, bytearray)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            raise SinkError(f"header {what!r} has a value that is not UTF-8 text; sparkmq "
                            "properties are strings") from None
    return str(value)


def _from_headers(batch: pa.RecordBatch, columns: dict[str, pa.Array]) -> None:
    """Kafka ``headers`` → properties; ``TAGS``/``KEYS`` headers → tags/keys unless given.

    Header names starting with ``sparkmq.`` are the broker's own and are dropped.
    A repeated header name keeps its last value (properties are a map).
    """
    rows = batch.column("headers").to_pylist()
    props: list[list[tuple[str, str]] | None] = []
    tags: list[str | None] = []
    keys: list[list[str]] = []
    for row in rows:
        found: dict[str, str] = {}
        for h in row or ():
            if h is not None and h["key"] is not None and h["value"] is not None:
                found[h["key"]] = _text(h["value"], h["key"])
        tags.append(found.pop("TAGS", None))
        keys.append(found.pop("KEYS", "").split())
        props.append([(k, v) for k, v in found.items() if not k.startswith("sparkmq.")])
    if "properties" not in columns:
        columns["properties"] = pa.array(props, pa.map_(pa.string(), pa.string()))
    if "tags" not in columns and any(t is not None for t in tags):
        columns["tags"] = pa.array(tags, pa.string())
    if "keys" not in columns and any(keys):
        columns["keys"] = pa.array(keys, pa.list_(pa.string()))


def _produce_table(batch: pa.RecordBatch) -> pa.Table:
    value = batch.column("value")
    if value.null_count:
        raise SinkError(
            f"{value.null_count} row(s) have a null 'value': a sparkmq message always has a "
            "body (there are no tombstones). Filter them out (.where('value IS NOT NULL')) or "
            "give them a body (coalesce(value, ''))"
        )
    columns: dict[str, pa.Array] = {"body": value}
    keys = _keys(batch)
    if keys is not None:
        columns["keys"] = keys
    names = batch.schema.names
    for name in ("tags", "properties", "queue_id"):
        if name in names:
            columns[name] = batch.column(name)
    if "partition" in names:  # Kafka's column; the broker's queue id
        columns["queue_id"] = batch.column("partition")
    if "headers" in names:
        _from_headers(batch, columns)
    return pa.table(columns)


def produce_tables(batch: pa.RecordBatch, topic: str | None) -> dict[str, pa.Table]:
    """Rows of one Arrow batch → Arrow produce bodies, one per target topic.

    The ``topic`` option wins over a ``topic`` column (as in Spark's Kafka sink).
    """
    if topic is not None or "topic" not in batch.schema.names:
        assert topic is not None
        return {topic: _produce_table(batch)}
    import pyarrow.compute as pc  # only for a topic column: its import costs a Python worker ~0.2 s

    topics = batch.column("topic")
    if topics.null_count:
        raise SparkMQError("a row has a null 'topic' and there is no 'topic' option")
    return {
        str(t): _produce_table(batch.filter(pc.equal(topics, t)))
        for t in sorted(pc.unique(topics).to_pylist())
    }


def _partition_seed() -> int:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return ctx.partitionId() if ctx is not None else 0


def write_task(
    opts: WriterOptions,
    iterator: Iterator[pa.RecordBatch],
) -> SinkCommitMessage:
    """Send every row of a task's input; roll everything back if anything fails."""
    tx = TaskSender(opts)
    seed = _partition_seed() if tx.router is not None else 0
    try:
        for batch in iterator:
            for start in range(0, batch.num_rows, opts.chunk_rows):
                chunk = batch.slice(start, opts.chunk_rows)
                for topic, table in produce_tables(chunk, opts.topic).items():
                    tx.send_topic(topic, table, seed + start)
        return tx.message()
    except BaseException:
        tx.rollback()
        raise
    finally:
        tx.close()

