"""The exactly-once sink's side of :class:`transactions.TransactionService`.

A sink batch ``(sink id, batch id)`` commits all its transactions in one
journal line, and a replay of a recorded batch rolls its own transactions
back. The Spark sink stages its Arrow produce bodies unparsed
(``POST /v1/topics/{t}/messages?transactional=true&staging=raw``): staging
only writes bytes to the transaction's file, and the commit parses each
body once, writes the messages to the staged file (fsynced, renamed) and
journals ``parsed`` *before* deciding, so a body that does not parse fails
the commit with the transactions still open, and recovery after the
decision never parses again::

    stage   {"op": "add", "tx", "ts", "raw": rows}       <id>.arrow += (topic, body)
    commit  parse -> <id>.msgs (fsync, rename); {"op": "parsed", "tx"}; drop <id>.arrow
            {"op": "decide", ...}; append to the CommitLog; {"op": "published", ...}
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from store import DispatchBatch, InvalidMessageError, Message, MessageStore, SysFlag
from store.codec import prepare_batch
from store.columns import check_columns

from ..errors import BadRequestError, TransactionStateError
from .columns import ColumnParser, write_frames
from .spool import TxSpool

__all__ = ["SinkBatches", "Parser"]

Parser = Callable[[str, bytes], list[Message]]  # (topic, Arrow body) -> messages, queues chosen
TX_PROPERTY = "sparkmq.tx_id"  # also transactions.TX_PROPERTY
_COMMIT = int(SysFlag.TRANSACTION_COMMIT)


class _Host(Protocol):
    _lock: threading.RLock
    _parsed: dict[str, list[Message]]
    _sinks: dict[str, dict[int, dict[str, Any]]]
    _txs: dict[str, Any]
    _spool: TxSpool
    _store: MessageStore

    def _get(self, tx_id: str) -> Any: ...
    def _open_tx(self, tx_id: str) -> Any: ...
    def _log(self, record: dict[str, Any]) -> None: ...
    def _decide(self, txs: list[Any], state: str, sink: tuple[str, int] | None = None) -> None: ...
    def _publish(self, txs: list[Any], skip: dict[str, int] | None = None) -> int: ...
    def prepare_raw(self, txs: list[Any], parse: Parser | None, columns: ColumnParser | None = None) -> None: ...
    def check_staged(self, txs: list[Any]) -> None: ...
    @staticmethod
    def _real(halves: DispatchBatch, i: int) -> Message: ...
    def _rollback_open(self, tx_ids: Iterable[str]) -> int: ...


class SinkBatches:
    """Sink batch commits and raw Arrow staging (mixed into TransactionService)."""

    def stage_raw(self: _Host, topic: str, raw: bytes, rows: int, tx_id: str | None, owner: str = "") -> str:
        """Stage an unparsed Arrow body of ``rows`` messages for ``topic``; returns the tx id."""
        with self._lock:
            if tx_id is not None:
                tx = self._open_tx(tx_id)
                if not tx.raw and tx.messages:
                    raise TransactionStateError(f"transaction {tx_id} holds parsed messages; stage "
                                                "raw Arrow bodies in a transaction of their own")
            tx_id = tx_id or uuid.uuid4().hex
            self._spool.append_raw(tx_id, topic, raw)
            self._log({"op": "add", "tx": tx_id, "ts": int(time.time() * 1000), "raw": rows, "owner": owner})
            return tx_id

    def prepare_raw(self: _Host, txs: list[Any], parse: Parser | None, columns: ColumnParser | None = None) -> None:
        """Parse the raw bodies of ``txs`` into their staged files (before any decision): as
        columns when every body has the column put's shape (:mod:`tx_columns`), else as messages."""
        for tx in txs:
            if not tx.raw:
                continue
            if parse is None:
                raise BadRequestError(f"transaction {tx.tx_id} holds Arrow bodies; commit it "
                                      "through the broker's HTTP API")
            staged = self._spool.read_raw(tx.tx_id)
            frames = [columns(topic, body) for topic, body in staged] if columns is not None else [None]
            if all(f is not None for f in frames) and sum(len(f) for f in frames if f is not None) == tx.raw:
                ready = [f for f in frames if f is not None]
                for f in ready:  # what the store would refuse fails now, not after the decision
                    check_columns(f.topic, f.bodies, keys=f.keys, tags=f.tags, max_size=self._store.max_message_bytes,
                                  extra=({TX_PROPERTY: tx.tx_id}, _COMMIT))
                write_frames(self._spool.columns_path(tx.tx_id), ready)
                self._log({"op": "parsed", "tx": tx.tx_id})
                self._spool.drop_raw(tx.tx_id)
                continue
            messages = [m for topic, body in staged for m in parse(topic, body)]
            if len(messages) != tx.raw:
                raise BadRequestError(f"transaction {tx.tx_id}: staged {tx.raw} rows but "
                                      f"{len(messages)} parse; roll it back and send them again")
            marker = {TX_PROPERTY: tx.tx_id}  # shared: the store never mutates a message
            for m in messages:  # as the commit appends them (freshly parsed, ours to change)
                m.properties = {**m.properties, **marker} if m.properties else marker
                m.sys_flag = _COMMIT
            # what the store would refuse (a tag too long, a bad key) fails now, not after the decision
            prepare_batch(messages, 0, 0, self._store.max_message_bytes)
            self._spool.replace(tx.tx_id, messages, int(time.time() * 1000))
            self._log({"op": "parsed", "tx": tx.tx_id})
            self._spool.drop_raw(tx.tx_id)
            self._parsed[tx.tx_id] = messages  # published right after the decision

    def check_staged(self: _Host, txs: list[Any]) -> None:
        """Before a commit's decision: read the staged and half messages of ``txs`` as the publish will
        append them and check them under today's settings.  A message that no longer fits (a smaller
        ``max_message_bytes`` since it was staged) fails the commit now, with the transaction still
        open, not the publish after the decision.  The publish appends what was read here."""
        for tx in txs:
            if tx.tx_id in self._parsed or self._spool.columns_path(tx.tx_id).exists():
                continue  # parsed from raw bodies and checked by prepare_raw
            if tx.staged:
                messages = self._spool.read(tx.tx_id, tx.messages, {TX_PROPERTY: tx.tx_id}, _COMMIT)
            else:
                halves = self._store.read_records(tx.halves)
                messages = [self._real(halves, i) for i in range(len(halves))]
            if messages:
                try:
                    prepare_batch(messages, 0, 0, self._store.max_message_bytes)
                except InvalidMessageError as exc:
                    raise type(exc)(f"transaction {tx.tx_id} cannot be committed under the current settings: "
                                    f"{exc}; it is still open: roll it back") from exc
            self._parsed[tx.tx_id] = messages

    def sink_commit(self: _Host, sink_id: str, batch_id: int, tx_ids: list[str],
                    parse: Parser | None = None, columns: ColumnParser | None = None) -> dict[str, Any]:
        """Commit ``tx_ids`` and record (sink_id, batch_id) atomically; replays roll back."""
        with self._lock:
            if batch_id in self._sinks.get(sink_id, {}):
                self._rollback_open(tx_ids)
                return {"status": "already_committed"}
            txs = [self._get(t) for t in _unique(tx_ids)]
            for tx in txs:
                if tx.state != "open":
                    raise TransactionStateError(
                        f"transaction {tx.tx_id} is already {tx.state}; a sink batch can only commit open transactions"
                    )
            self.prepare_raw(txs, parse, columns)
            self.check_staged(txs)
            self._decide(txs, "committed", (sink_id, batch_id))
            n = self._publish(txs)
            return {"status": "committed", "messages": n}

    def sink_abort(self: _Host, sink_id: str, batch_id: int, tx_ids: list[str]) -> dict[str, Any]:
        with self._lock:
            n = self._rollback_open(tx_ids)
            return {"status": "aborted", "rolled_back": n}

    def _rollback_open(self: _Host, tx_ids: Iterable[str]) -> int:
        txs = [self._txs[t] for t in _unique(tx_ids) if t in self._txs and self._txs[t].state == "open"]
        if txs:
            self._decide(txs, "rolled_back")
        return len(txs)

    def sink_info(self: _Host, sink_id: str, last: int = 10) -> dict[str, Any]:
        with self._lock:
            batches = self._sinks.get(sink_id, {})
            ids = sorted(batches)
            return {"sink_id": sink_id, "last_batch_id": ids[-1] if ids else None,
                    "batches": [batches[b] for b in ids[-last:]]}


def _unique(ids: Iterable[str]) -> list[str]:
    out = list(dict.fromkeys(ids))
    if not all(isinstance(i, str) for i in out):
        raise BadRequestError("transaction_ids must be a list of strings")
    return out
