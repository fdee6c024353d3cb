"""CheckBackService: asks producers how their transactions ended (RocketMQ's TransactionalMessageCheckService).

A transactional produce may carry ``"check_url"``.  Such a transaction is not
rolled back at ``[transactions] timeout_s``; instead, once it is
``check_immunity_s`` old and then at most every ``check_interval_s``, the
broker POSTs ``{"transaction_id", "topic", "msg_ids"}`` to the URL and applies
the answer ``{"action": "commit" | "rollback" | "unknown"}``.  An ``unknown``
answer, an error status, a timeout (``check_timeout_s``) or an answer that is
not one of those counts as one check; after ``max_checks`` of them the half
messages are copied to ``TRANS_CHECK_MAX_TIME_TOPIC`` (one queue, readable by
pull, the real topic and queue in ``REAL_TOPIC``/``REAL_QID``) and the
transaction ends as ``discarded``: reported (log warning, metric, ``GET
/v1/transactions/{id}``), never committed.

Durability: the check count is journaled (``{"op": "checked", "tx", "n"}``)
before the next check, so a restart neither forgets nor repeats checks
beyond one.  The copy to TRANS_CHECK_MAX_TIME_TOPIC is appended before the
``discarded`` decision is journaled: a crash between the two copies again
(at least once), it never loses the halves.  A check is at least once as in
RocketMQ: a producer may be asked again after it answered, and must answer
the same.  Only a master checks.  The service shares the transaction table's
lock and journal (``TransactionService`` internals, this module is its friend).
"""

from __future__ import annotations

import logging
import time
from typing import Any

import httpx

from store import Message, MessageStore
from store.schedule import REAL_QID, REAL_TOPIC
from store.service_thread import ServiceThread

from ..errors import BrokerError
from ..metrics import Counter
from ..settings.sections import TransactionsSection
from .checkurl import CheckUrlRefusedError, check_url_allowed
from .service import TransactionService

__all__ = ["CheckBackService", "CHECK_MAX_TOPIC"]

log = logging.getLogger(__name__)

CHECK_MAX_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
_TICK_S = 1.0
_DISCARDED = "discarded"
_REAL_TOPIC, _REAL_QID = "sparkmq.real_topic", "sparkmq.real_queue_id"  # transactions.py's half properties


class CheckBackService:
    """``start()``/``stop()``; ``run_once()`` checks every transaction that is due."""

    def __init__(self, transactions: TransactionService, store: MessageStore, section: TransactionsSection,
                 ensure_topic: Any = None) -> None:
        self._tx, self._store, self._cfg = transactions, store, section
        self._ensure_topic = ensure_topic  # creates CHECK_MAX_TOPIC before the first copy
        self._last: dict[str, float] = {}  # tx id -> monotonic time of its last check
        self._worker = ServiceThread("sparkmq-tx-checkback", self._run,
                                     join_timeout_s=section.check_timeout_s + 5)
        self.checks = Counter("sparkmq_transaction_checks_total",
                              "Transaction check-backs, by outcome (commit, rollback, unknown, failed, refused, discarded, error).")

    def start(self) -> None:
        self._worker.start()

    def stop(self) -> None:
        """End the thread (a POST in flight ends within check_timeout_s); safe twice."""
        self._worker.stop()

    def _run(self) -> None:
        with httpx.Client(timeout=self._cfg.check_timeout_s) as client:
            while not self._worker.wait(_TICK_S):
                try:
                    self.run_once(client)
                except Exception:  # RocketMQ #9500: one failure must not stop later checks
                    self.checks.inc(outcome="error")
                    log.exception("transaction check-back pass failed; retrying next second")

    def _due(self) -> list[tuple[str, str, str, list[str], int]]:
        now_ms, now = time.time() * 1000, time.monotonic()
        immunity_ms = self._cfg.check_immunity_s * 1000
        with self._tx._lock:
            return [(t.tx_id, t.check_url, t.topic, list(t.halves), t.checks) for t in self._tx._txs.values()
                    if t.state == "open" and t.check_url and now_ms - t.created_ms >= immunity_ms
                    and now - self._last.get(t.tx_id, -1e18) >= self._cfg.check_interval_s]

    def run_once(self, client: httpx.Client) -> int:
        """Check every due transaction once; returns how many were checked."""
        due = self._due()
        for tx_id, url, topic, halves, checks in due:
            if self._worker.stopping.is_set():
                break
            self._last[tx_id] = time.monotonic()
            action = self._ask(client, url, {"transaction_id": tx_id, "topic": topic, "msg_ids": halves})
            self.checks.inc(outcome=action)
            try:
                if action == "commit":
                    self._tx.commit(tx_id)
                elif action == "rollback":
                    self._tx.rollback(tx_id)
                else:
                    self._unresolved(tx_id, halves, checks + 1)
            except BrokerError as exc:  # ended meanwhile by the producer itself
                log.info("check-back of transaction %s: %s", tx_id, exc)
            if action in ("commit", "rollback"):
                self._last.pop(tx_id, None)
        return len(due)

    def _ask(self, client: httpx.Client, url: str, body: dict[str, Any]) -> str:
        """The producer's answer; ``refused`` for a host check_url_allow no longer lists, ``failed`` for
        any error at all (an invalid host name, a refused connection, a bad answer): never raises."""
        try:
            check_url_allowed(url, self._cfg.check_url_allow)
        except CheckUrlRefusedError as exc:
            log.warning("check-back of transaction %s not sent: %s", body["transaction_id"], exc)
            return "refused"
        try:
            resp = client.post(url, json=body)
            resp.raise_for_status()
            action = resp.json().get("action")
        except Exception as exc:  # anything a URL, a resolver or a peer can raise counts as one failed check
            log.warning("check-back of transaction %s at %s failed: %s: %s", body["transaction_id"], url,
                        type(exc).__name__, exc)
            return "failed"
        return action if action in ("commit", "rollback", "unknown") else "unknown"

    def _unresolved(self, tx_id: str, halves: list[str], n: int) -> None:
        if n < self._cfg.max_checks:
            with self._tx._lock:
                self._tx._log({"op": "checked", "tx": tx_id, "n": n})
            return
        copied = self._park(halves)
        with self._tx._lock:
            tx = self._tx._txs.get(tx_id)
            if tx is None or tx.state != "open":
                return
            self._tx._decide([tx], _DISCARDED)
        self._last.pop(tx_id, None)
        self.checks.inc(outcome=_DISCARDED)
        log.warning("transaction %s was not resolved after %d checks: its %d half message(s) moved to %s, not "
                    "committed", tx_id, n, copied, CHECK_MAX_TOPIC)

    def _park(self, halves: list[str]) -> int:
        """Copy the half messages to CHECK_MAX_TOPIC as plain, readable messages."""
        if self._ensure_topic is not None:
            self._ensure_topic(CHECK_MAX_TOPIC)
        records = self._store.read_records(halves)
        messages = []
        for i in range(len(records)):
            props = records.properties(i)
            props[REAL_TOPIC] = props.pop(_REAL_TOPIC, "")
            props[REAL_QID] = props.pop(_REAL_QID, "0")
            messages.append(Message(CHECK_MAX_TOPIC, records.bodies[i], 0, records.keys[i], records.tags[i], props,
                                    born_timestamp=int(records.born_timestamps[i])))
        if messages:
            self._store.put_messages(messages)
        return len(messages)
