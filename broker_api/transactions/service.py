"""Transactions and the exactly-once sink commit, durable across crashes.

A transaction's messages (RocketMQ's half messages) are staged outside the
CommitLog, in one file per transaction (:mod:`txspool`), so consumers never
see them and a commit appends each of them to the CommitLog exactly once; a
rollback deletes the file.  Transactions with a ``check_url`` (and those
journaled by older versions) keep their halves in the internal topic
``RMQ_SYS_TRANS_HALF_TOPIC`` with ``sys_flag=TRANSACTION_PREPARED`` and the
real topic and queue in their properties, where check-back reads them;
commit copies them to the real topic.

State lives in ``<data>/config/transactions.json`` (snapshot, written
atomically, with the sequence number of the last record it covers) plus
``transactions.jsonl`` (journal, one fsynced JSON line per change, numbered
by ``seq`` so a crash between writing a snapshot and emptying the journal
never applies a record twice)::

    {"op": "add", "tx": ID, "ts": MS, "staged": N | "raw": N}   (older: "halves": [MSG_ID, ...])
    {"op": "parsed", "tx": ID}                          (raw Arrow bodies parsed, see tx_sinks)
    {"op": "decide", "txs": [ID, ...], "state": "committed" | "rolled_back",
     "ts": MS, "from": COMMITLOG_OFFSET, "sink": SINK_ID?, "batch": BATCH_ID?}
    {"op": "published", "txs": [ID, ...]}

Guarantee: a commit answers only after its staged files and its ``decide``
line are fsynced and the real messages are appended.  A crash between the
two leaves a decided but unpublished transaction; on start-up the CommitLog
is scanned from the recorded ``from`` offset for messages carrying the
transaction id (property ``sparkmq.tx_id``) and only the staged messages not
yet published are appended, so a decided commit is published exactly once.  A sink batch's record and the
commit of all its transactions are one journal line, hence atomic.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from store import (
    DispatchBatch,
    Message,
    MessageStore,
    PutResult,
    StoreError,
    SysFlag,
)
from store.codec import prepare_batch
from store.schedule import REAL_TOPIC

from .checkurl import check_url_allowed
from ..errors import TransactionNotFoundError, TransactionStateError
from ..jsonfile import Journal, read_json, write_json_atomic
from ..settings.sections import TransactionsSection
from .columns import ColumnParser, publish_frames, read_frames
from .sinks import SinkBatches, Parser
from .spool import TxSpool

__all__ = ["TransactionService", "HALF_TOPIC", "TX_PROPERTY"]

log = logging.getLogger(__name__)

HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
TX_PROPERTY = "sparkmq.tx_id"
_REAL_TOPIC = "sparkmq.real_topic"
_REAL_QID = "sparkmq.real_queue_id"
_OPEN, _COMMITTED, _ROLLED_BACK = "open", "committed", "rolled_back"
_COMPACT_EVERY = 5000
_PUBLISH_CHUNK = 10_000  # messages per store append when a commit publishes


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class _Tx:
    tx_id: str
    created_ms: int
    halves: list[str] = field(default_factory=list)  # emptied once no longer needed
    messages: int = 0
    state: str = _OPEN
    published: bool = False
    decided_ms: int = 0
    from_offset: int = 0
    check_url: str = ""  # the producer's check-back URL (checkback.py), "" = time out and roll back
    topic: str = ""
    checks: int = 0  # check-backs answered unknown or failed
    staged: bool = False  # messages in the spool (else: half messages in the CommitLog)
    raw: int = 0  # rows staged as Arrow bodies, parsed at commit
    owner: str = ""  # the user who opened it ("" with [auth] off): only they (or a super user) use it


class TransactionService(SinkBatches):
    """Half messages, commit/rollback, timeouts and sink batch records (:mod:`tx_sinks`)."""

    def __init__(self, store: MessageStore, meta_dir: Path, section: TransactionsSection) -> None:
        self._store = store
        self._cfg = section
        self._snapshot = meta_dir / "transactions.json"
        self._journal = Journal(meta_dir / "transactions.jsonl")
        self._spool = TxSpool(meta_dir / "tx-spool")
        self._parsed: dict[str, list[Message]] = {}  # raw bodies parsed by a commit in progress
        self._txs: dict[str, _Tx] = {}
        self._sinks: dict[str, dict[int, dict[str, Any]]] = {}
        self._lock = threading.RLock()
        self._journal_lines = 0
        self._seq = 0  # sequence number of the last journal record applied
        self.committed = self.rolled_back = self.expired = 0

    # -- lifecycle -------------------------------------------------------

    def start(self) -> None:
        """Load snapshot + journal, finish decided-but-unpublished commits, compact."""
        raw = read_json(self._snapshot, {"txs": {}, "sinks": {}})
        self._txs = {k: _Tx(**v) for k, v in raw["txs"].items()}
        self._sinks = {s: {int(b): r for b, r in bs.items()} for s, bs in raw["sinks"].items()}
        self._seq = int(raw.get("seq", 0))
        for record in self._journal.records():
            if record.get("seq", self._seq + 1) > self._seq:  # else already in the snapshot
                self._seq = record.get("seq", self._seq + 1)
                self._apply(record)
        self._journal.open()
        pending = [t for t in self._txs.values() if t.state == _COMMITTED and not t.published]
        for tx in pending:
            self._recover_publish(tx)
        for tx_id in self._spool.ids():  # left by rollbacks, publishes or forgotten ids
            if tx_id not in self._txs or self._txs[tx_id].state != _OPEN:
                self._spool.drop(tx_id)
        self.compact()

    def stop(self) -> None:
        with self._lock:
            self.compact()
            self._journal.close()

    def compact(self) -> None:
        """Write the snapshot (forgetting old decisions) and empty the journal."""
        with self._lock:
            decided = [t for t in self._txs.values() if t.state != _OPEN and (t.published or t.state == _ROLLED_BACK)]
            decided.sort(key=lambda t: t.decided_ms)
            for tx in decided[: max(0, len(decided) - self._cfg.keep_decisions)]:
                del self._txs[tx.tx_id]
            for tx in decided:
                tx.halves = []  # published or dropped: only the count is still needed
            write_json_atomic(
                self._snapshot,
                {
                    "seq": self._seq,
                    "txs": {k: asdict(v) for k, v in self._txs.items()},
                    "sinks": {s: {str(b): r for b, r in bs.items()} for s, bs in self._sinks.items()},
                },
            )
            self._journal.reset()
            self._journal_lines = 0

    # -- journal ---------------------------------------------------------

    def _log(self, record: dict[str, Any]) -> None:
        record["seq"] = self._seq + 1
        self._journal.append(record)
        self._seq += 1
        self._apply(record)
        self._journal_lines += 1
        if self._journal_lines >= _COMPACT_EVERY:
            self.compact()

    def _apply(self, r: dict[str, Any]) -> None:
        op = r["op"]
        if op == "add":
            tx = self._txs.setdefault(r["tx"], _Tx(r["tx"], r["ts"]))
            tx.halves.extend(r.get("halves", ()))
            tx.messages += len(r.get("halves", ())) + int(r.get("staged", 0)) + int(r.get("raw", 0))
            tx.raw += int(r.get("raw", 0))
            tx.staged = tx.staged or "staged" in r or "raw" in r
            tx.check_url, tx.topic = r.get("check_url") or tx.check_url, r.get("topic") or tx.topic
            tx.owner = tx.owner or r.get("owner", "")
        elif op == "parsed":
            if r["tx"] in self._txs:
                self._txs[r["tx"]].raw = 0
        elif op == "checked":
            if r["tx"] in self._txs:
                self._txs[r["tx"]].checks = r["n"]
        elif op == "decide":
            for tx_id in r["txs"]:
                tx = self._txs.setdefault(tx_id, _Tx(tx_id, r["ts"]))
                tx.state, tx.decided_ms, tx.from_offset = r["state"], r["ts"], r.get("from", 0)
            if "sink" in r:
                self._record_batch(r["sink"], r["batch"], r["txs"], r["ts"])
        elif op == "published":
            for tx_id in r["txs"]:
                if tx_id in self._txs:
                    self._txs[tx_id].published = True

    def _record_batch(self, sink_id: str, batch_id: int, tx_ids: list[str], ts: int) -> None:
        batches = self._sinks.setdefault(sink_id, {})
        n = sum(self._txs[t].messages for t in tx_ids if t in self._txs)
        batches[batch_id] = {"batch_id": batch_id, "committed_ms": ts, "transactions": len(tx_ids), "messages": n}
        for old in sorted(batches)[: max(0, len(batches) - self._cfg.keep_sink_batches)]:
            del batches[old]
        if len(self._sinks) > self._cfg.keep_sinks:
            stalest = min(self._sinks, key=lambda s: max(b["committed_ms"] for b in self._sinks[s].values()))
            del self._sinks[stalest]

    # -- half messages ---------------------------------------------------

    def add_halves(self, messages: list[Message], tx_id: str | None,
                   check_url: str | None = None, owner: str = "") -> tuple[str, list[PutResult]]:
        """Stage ``messages`` in a new (or the given open) transaction. With a ``check_url``
        an unended transaction is checked back (checkback.py) instead of timing out, and
        its messages are half messages in the CommitLog, where check-back reads them."""
        if check_url:
            check_url_allowed(check_url, self._cfg.check_url_allow)  # 400 naming the setting
        with self._lock:
            tx = self._open_tx(tx_id) if tx_id is not None else None
            tx_id = tx_id or uuid.uuid4().hex
            now = _now_ms()
            record: dict[str, Any] = {"op": "add", "tx": tx_id, "ts": now, "owner": owner}
            if (tx.staged if tx is not None else not check_url):
                done = tx.messages if tx is not None else 0
                marker = {TX_PROPERTY: tx_id}  # refused now what the commit could not append later
                prepare_batch([replace(m, properties={**m.properties, **marker}) for m in messages], now, 0,
                              self._store.max_message_bytes)
                self._spool.append(tx_id, messages, now)
                record["staged"] = len(messages)
                results = [PutResult(f"{tx_id}-{done + i}", m.topic, m.queue_id, -1, 0, 0, now)
                           for i, m in enumerate(messages)]
            else:
                results = self._store.put_messages([self._as_half(m, tx_id) for m in messages])
                record["halves"] = [r.msg_id for r in results]
            if check_url:
                record["check_url"] = check_url
                record["topic"] = messages[0].properties.get(REAL_TOPIC, messages[0].topic) if messages else ""
            self._log(record)
            return tx_id, results

    @staticmethod
    def _as_half(m: Message, tx_id: str) -> Message:
        props = {**m.properties, TX_PROPERTY: tx_id, _REAL_TOPIC: m.topic, _REAL_QID: str(m.queue_id)}
        return Message(
            topic=HALF_TOPIC, body=m.body, queue_id=0, keys=m.keys, tags=m.tags, properties=props,
            sys_flag=int(SysFlag.TRANSACTION_PREPARED), born_timestamp=m.born_timestamp,
        )

    def _open_tx(self, tx_id: str) -> _Tx:
        tx = self._get(tx_id)
        if tx.state != _OPEN:
            raise TransactionStateError(f"transaction {tx_id} is already {tx.state}; start a new transaction")
        return tx

    def _get(self, tx_id: str) -> _Tx:
        tx = self._txs.get(tx_id)
        if tx is None:
            raise TransactionNotFoundError(
                f"transaction {tx_id!r} is unknown; it was never opened or was forgotten long ago"
            )
        return tx

    def owner(self, tx_id: str) -> str:
        """Who opened ``tx_id`` ("" when unknown or opened with [auth] off)."""
        with self._lock:
            tx = self._txs.get(tx_id)
            return tx.owner if tx is not None else ""

    def describe(self, tx_id: str) -> dict[str, Any]:
        with self._lock:
            tx = self._get(tx_id)
            return {"transaction_id": tx_id, "state": tx.state, "messages": tx.messages,
                    "created_ms": tx.created_ms, "published": tx.published}

    # -- decisions -------------------------------------------------------

    def commit(self, tx_id: str, parse: Parser | None = None, columns: ColumnParser | None = None) -> dict[str, Any]:
        """Make the halves visible; committing a committed id again is a no-op."""
        with self._lock:
            tx = self._get(tx_id)
            if tx.state not in (_OPEN, _COMMITTED):  # rolled back, or discarded after its checks
                raise TransactionStateError(
                    f"transaction {tx_id} was {tx.state} (by a client, its checks or after {self._cfg.timeout_s:g}s); "
                    "produce the messages again in a new transaction"
                )
            if tx.state == _COMMITTED:
                return {"transaction_id": tx_id, "state": _COMMITTED, "messages": tx.messages, "already": True}
            self.prepare_raw([tx], parse, columns)
            self.check_staged([tx])
            self._decide([tx], _COMMITTED)
            n = self._publish([tx])
            return {"transaction_id": tx_id, "state": _COMMITTED, "messages": n, "already": False}

    def rollback(self, tx_id: str) -> dict[str, Any]:
        with self._lock:
            tx = self._get(tx_id)
            if tx.state == _COMMITTED:
                raise TransactionStateError(f"transaction {tx_id} is already committed and cannot be rolled back")
            if tx.state == _OPEN:
                self._decide([tx], _ROLLED_BACK)
            return {"transaction_id": tx_id, "state": _ROLLED_BACK, "messages": tx.messages}

    def _decide(self, txs: list[_Tx], state: str, sink: tuple[str, int] | None = None) -> None:
        if state == _COMMITTED:  # the staged messages are on disk before the decision is
            self._spool.sync(t.tx_id for t in txs if t.staged)
        record: dict[str, Any] = {"op": "decide", "txs": [t.tx_id for t in txs], "state": state,
                                  "ts": _now_ms(), "from": self._commitlog_end()}
        if sink is not None:
            record["sink"], record["batch"] = sink
        self._log(record)
        if state == _COMMITTED:
            self.committed += len(txs)
        else:
            self.rolled_back += len(txs)
            for tx in txs:
                self._spool.drop(tx.tx_id)
                self._parsed.pop(tx.tx_id, None)

    def _commitlog_end(self) -> int:
        return int(self._store.stats().get("commitlog_max_offset", 0))  # type: ignore[call-overload]

    def _publish(self, txs: list[_Tx], skip: dict[str, int] | None = None) -> int:
        """Append the messages of decided ``txs`` (``skip``: how many a crash already did)."""
        messages: list[Message] = []
        wanted = by_columns = 0
        for tx in txs:
            done = (skip or {}).get(tx.tx_id, 0)
            if done >= tx.messages:
                continue
            parsed = self._parsed.pop(tx.tx_id, None)
            cols = self._spool.columns_path(tx.tx_id)
            if parsed is not None:
                messages.extend(parsed[done:])
            elif tx.staged and cols.exists():  # by columns, in the order the commit decided
                n = publish_frames(self._store, read_frames(cols), {TX_PROPERTY: tx.tx_id}, done)
                by_columns += n
                wanted -= n
            elif tx.staged:
                messages.extend(self._spool.read(tx.tx_id, tx.messages, {TX_PROPERTY: tx.tx_id},
                                                 int(SysFlag.TRANSACTION_COMMIT))[done:])
            else:
                halves = self._store.read_records(tx.halves[done:])
                messages.extend(self._real(halves, i) for i in range(len(halves)))
            wanted += tx.messages - done
        if len(messages) < wanted:
            log.error("%d message(s) of transactions %s are gone", wanted - len(messages), [t.tx_id for t in txs])
        for lo in range(0, len(messages), _PUBLISH_CHUNK):
            self._store.put_messages(messages[lo:lo + _PUBLISH_CHUNK])
        self._log({"op": "published", "txs": [t.tx_id for t in txs]})
        for tx in txs:
            self._spool.drop(tx.tx_id)
        return len(messages) + by_columns

    @staticmethod
    def _real(halves: DispatchBatch, i: int) -> Message:
        props = halves.properties(i)
        topic = props.pop(_REAL_TOPIC)
        queue_id = int(props.pop(_REAL_QID))
        return Message(
            topic=topic, body=halves.bodies[i], queue_id=queue_id, keys=halves.keys[i], tags=halves.tags[i],
            properties=props, sys_flag=int(SysFlag.TRANSACTION_COMMIT),
            born_timestamp=int(halves.born_timestamps[i]), prepared_transaction_offset=int(halves.phy_offsets[i]),
        )

    def _recover_publish(self, tx: _Tx) -> None:
        """Publish what a crash left unpublished, counting what already made it."""
        done = 0
        needle = tx.tx_id.encode()
        try:
            for batch in self._store.read_dispatch_batches(tx.from_offset):
                for i, raw in enumerate(batch.properties_raw):
                    if needle in raw and batch.topics[i] != HALF_TOPIC and batch.properties(i).get(TX_PROPERTY) == tx.tx_id:
                        done += 1
        except StoreError as exc:
            log.error("could not scan the CommitLog for transaction %s: %s", tx.tx_id, exc)
        log.warning("finishing committed transaction %s: %d of %d already published", tx.tx_id, done, tx.messages)
        self._publish([tx], {tx.tx_id: done})

    # -- timeouts --------------------------------------------------------

    def expire(self) -> int:
        """Roll back open transactions older than the timeout; returns how many."""
        deadline = _now_ms() - int(self._cfg.timeout_s * 1000)
        with self._lock:
            stale = [t for t in self._txs.values() if t.state == _OPEN and t.created_ms < deadline and not t.check_url]
            if stale:
                self._decide(stale, _ROLLED_BACK)
                self.expired += len(stale)
            return len(stale)

    def open_count(self) -> int:
        with self._lock:
            return sum(1 for t in self._txs.values() if t.state == _OPEN)
