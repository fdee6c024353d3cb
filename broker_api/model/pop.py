"""PopService: RocketMQ 5 POP consumption, retry topics and the dead-letter queue.

    pop(group, topic, n, invisible_ms)   messages of any queue of the topic (and of the
                                         group's %RETRY% topic), each with a receipt
    ack(group, receipts)                 finished; never delivered again
    change_invisible(group, receipt, ms) a new invisible time from now (a new receipt)
    retry(group, msg_id, level)          a pull consumer's send-back (consumerSendMsgBack)

The broker balances queues: a pop walks the topic's queues from a rotating start
and skips a queue another pop of the group holds (RocketMQ's QueueLockManager).
The group's committed offset of a queue means "popped up to"; what is in flight
lives in checkpoints in the revive topic (see :mod:`broker_api.pop_records`),
rebuilt from the store at start-up, so a SIGKILL loses no popped message.

The revive thread finds messages whose invisible time has passed and puts them,
with ``reconsume_times + 1``, to ``%RETRY%{group}`` after a back-off of delay
level ``3 + reconsume_times`` (RocketMQ's retry back-off: the message waits in
the delay service, ``transform``; without one the due time is computed here);
a message already reconsumed ``max_reconsume_times`` goes to ``%DLQ%{group}``.
Each move is one atomic put with its "done" record: it happens exactly once.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from store.service_thread import ServiceThread
from store import GetStatus, Message, MessageStore, PutResult, StoredMessage

from .filters import Predicate, apply_filter
from .groups import GroupManager
from ..metrics import Counter, render_gauge
from .pop_records import (
    DLQ_PREFIX,
    RETRY_PREFIX,
    REVIVE_TOPIC,
    Checkpoint,
    ck_message,
    dlq_message,
    done_message,
    parse_receipt,
    reconsume_times,
    replay,
    retry_message,
)
from ..settings.pop import PopSection
from .topics import TopicManager

__all__ = ["PopService", "REVIVE_GROUP"]

log = logging.getLogger(__name__)

REVIVE_GROUP = "CID_RMQ_SYS_REVIVE_GROUP"  # its offset on the revive topic: where start-up replay begins
Transform = Callable[[Message, int], Message]  # (message, delay level) -> the message to put
_FILTER_SCAN = 1024


def _now_ms() -> int:
    return int(time.time() * 1000)


class PopService:
    """POP state (in-flight checkpoints) and the revive thread; masters only."""

    def __init__(self, store: MessageStore, topics: TopicManager, groups: GroupManager, section: PopSection,
                 levels_ms: list[int], transform: Transform | None = None) -> None:
        self._store, self._topics, self._groups, self._cfg = store, topics, groups, section
        self._levels_ms, self._transform = levels_ms, transform
        self.popped = Counter("sparkmq_pop_messages_total", "Messages handed out by POP, by group.")
        self.acked = Counter("sparkmq_pop_acks_total", "POP messages acked, by group.")
        self.retried = Counter("sparkmq_retry_messages_total",
                               "Messages put to %RETRY%{group} (POP timeouts and POST /retry), by group.")
        self.dead = Counter("sparkmq_dlq_messages_total", "Messages moved to %DLQ%{group}, by group.")
        self._cks: dict[int, Checkpoint] = {}
        self._pending: dict[int, int] = {}  # put in progress -> revive offset it will land at or after
        self._tokens = itertools.count()
        self._lock = threading.Lock()
        self._queue_locks: dict[tuple[str, str, int], threading.Lock] = {}
        self._rotation = itertools.count()
        self._worker = ServiceThread("sparkmq-pop-revive", self._run, join_timeout_s=30)
        self._saved_progress = -1

    # -- lifecycle ---------------------------------------------------------

    def start(self) -> None:
        self._topics.ensure_system(REVIVE_TOPIC)
        self._recover()
        self._worker.start()

    def stop(self) -> None:
        """Stop the revive thread and record progress; safe twice."""
        if self._worker.stop():
            self._save_progress()

    def _recover(self) -> None:
        start = max(self._groups.offsets(REVIVE_GROUP, REVIVE_TOPIC).get(0, 0),
                    self._store.min_offset(REVIVE_TOPIC, 0))
        popped: dict[tuple[str, str, int], int] = {}
        for tag, offset, body in replay(self._store, start):
            if tag == "ck":
                ck = Checkpoint.from_body(offset, body)
                self._cks[offset] = ck
                key = (ck.group, ck.topic, ck.queue_id)
                popped[key] = max(popped.get(key, 0), ck.next_offset)
            elif tag == "done" and (ck_done := self._cks.get(int(body["ck"]))) is not None:
                for i in body["i"]:
                    ck_done.done[i] = str(body.get("why", "ack"))
                if ck_done.finished:
                    del self._cks[ck_done.offset]
        for (group, topic, qid), offset in popped.items():
            if offset > self._groups.offsets(group, topic).get(qid, 0):
                self._groups.commit(group, topic, {qid: offset})
        log.info("POP recovered from revive offset %d: %d checkpoints in flight", start, len(self._cks))

    # -- pop -----------------------------------------------------------------

    def pop(self, group: str, topic: str, n: int, invisible_ms: int, predicate: Predicate | None = None
            ) -> list[tuple[Checkpoint, int, StoredMessage]]:
        """Up to ``n`` messages of ``topic`` (or the group's retry topic), each (checkpoint, index, message)."""
        cfg = self._topics.for_pull(topic)
        self._groups.check_enabled(group)
        turn = next(self._rotation)
        sources = [(topic, (turn + k) % cfg.queues) for k in range(cfg.queues)]
        if self._topics.exists(RETRY_PREFIX + group):  # the group reads its retry topic too
            sources.insert(0 if turn % 5 == 0 else len(sources), (RETRY_PREFIX + group, 0))
        held: list[threading.Lock] = []
        cks: list[tuple[Checkpoint, list[StoredMessage]]] = []
        skipped: dict[tuple[str, int], int] = {}
        now = _now_ms()
        try:
            for t, q in sources:
                want = n - sum(len(c.msgs) for c, _ in cks)
                if want <= 0:
                    break
                lock = self._queue_locks.setdefault((group, t, q), threading.Lock())
                if not lock.acquire(blocking=False):
                    continue  # another consumer of the group is popping this queue
                held.append(lock)
                start, msgs, nxt = self._read(group, t, q, want, predicate)
                if msgs:
                    ck = Checkpoint(-1, group, t, q, now, invisible_ms, nxt,
                                    [(m.queue_offset, m.msg_id, reconsume_times(m)) for m in msgs])
                    cks.append((ck, msgs))
                elif nxt != start:
                    skipped[(t, q)] = nxt
            self._register([c for c, _ in cks])
            for (t, q), offset in skipped.items():
                self._groups.commit(group, t, {q: offset})
        finally:
            for lock in held:
                lock.release()
        self.popped.inc(sum(len(m) for _, m in cks), group=group)
        return [(ck, i, m) for ck, msgs in cks for i, m in enumerate(msgs)]

    def _read(self, group: str, topic: str, qid: int, want: int, predicate: Predicate | None
              ) -> tuple[int, list[StoredMessage], int]:
        """(start offset, messages, next offset) of one queue for ``group``."""
        start = self._groups.offsets(group, topic).get(qid)
        lo = self._store.min_offset(topic, qid)
        start = lo if start is None else max(start, lo)
        page = self._store.get_messages(topic, qid, start, want if predicate is None else _FILTER_SCAN)
        if page.status == GetStatus.OFFSET_OVERFLOW:  # offsets reset past the end: start at the end
            return start, [], page.next_offset
        if predicate is not None:
            page = apply_filter(page, predicate, want)  # type: ignore[assignment]
        if page.status == GetStatus.FOUND:
            return start, page.messages, page.next_offset
        return start, [], max(start, page.next_offset) if page.status == GetStatus.NO_MATCHED_MESSAGE else start

    def _register(self, cks: list[Checkpoint]) -> None:
        """Put the checkpoints (one atomic batch), move the pop offsets, then track them."""
        if cks:
            self._put_tracked([ck_message(c) for c in cks], cks)

    def _put_tracked(self, messages: list[Message], cks: list[Checkpoint] | None = None) -> list[PutResult]:
        """Put ``messages`` (the records of ``cks`` first) and track ``cks``; until then the revive
        progress stays at or before where the records can land."""
        token = next(self._tokens)
        with self._lock:
            self._pending[token] = self._store.max_offset(REVIVE_TOPIC, 0)
        try:
            results = self._store.put_messages(messages)
            for ck, r in zip(cks or [], results):
                ck.offset = r.queue_offset
                if ck.next_offset >= 0:  # the pop offset moves before the checkpoint can finish
                    self._groups.commit(ck.group, ck.topic, {ck.queue_id: ck.next_offset})
            with self._lock:
                self._cks.update((ck.offset, ck) for ck in cks or [])
            return results
        finally:
            with self._lock:
                self._pending.pop(token, None)

    # -- ack, invisible time, send-back ---------------------------------------

    def _claim(self, group: str, receipt: str, why: str) -> tuple[Checkpoint | None, int, str]:
        """Under the lock: mark the receipt's message done; (checkpoint, index, status)."""
        off, i, pt = parse_receipt(receipt)
        ck = self._cks.get(off)
        if ck is None or ck.pop_time != pt or not 0 <= i < len(ck.msgs) or ck.group != group:
            return None, i, "EXPIRED"  # finished (acked or revived), or never this group's
        if ck.done[i]:
            return None, i, "ALREADY_ACKED" if ck.done[i] == "ack" else "EXPIRED"
        ck.done[i] = why
        return ck, i, "OK"

    def _unclaim(self, claims: list[tuple[Checkpoint, int]]) -> None:
        with self._lock:
            for ck, i in claims:
                ck.done[i] = ""

    def _forget_finished(self, cks: list[Checkpoint]) -> None:
        with self._lock:
            for ck in cks:
                if ck.finished:
                    self._cks.pop(ck.offset, None)

    def receipt_topics(self, group: str, receipts: list[str]) -> list[str]:
        """The topics of the popped messages ``receipts`` name (unknown or other groups' ones: none)."""
        with self._lock:
            cks = [self._cks.get(parse_receipt(r)[0]) for r in receipts]
            return sorted({ck.topic for ck in cks if ck is not None and ck.group == group})

    def ack(self, group: str, receipts: list[str]) -> list[str]:
        """Per receipt: OK, ALREADY_ACKED or EXPIRED (redelivered, or not a receipt of this group)."""
        for r in receipts:
            parse_receipt(r)  # all well-formed, or none is applied
        claims: list[tuple[Checkpoint, int]] = []
        statuses = []
        with self._lock:
            for r in receipts:
                ck, i, status = self._claim(group, r, "ack")
                statuses.append(status)
                if ck is not None:
                    claims.append((ck, i))
        by_ck: dict[int, list[int]] = {}
        for ck, i in claims:
            by_ck.setdefault(ck.offset, []).append(i)
        try:
            if by_ck:
                self._put_tracked([done_message(off, idx, "ack") for off, idx in by_ck.items()])
        except BaseException:
            self._unclaim(claims)
            raise
        self._forget_finished([ck for ck, _ in claims])
        self.acked.inc(len(claims), group=group)
        return statuses

    def change_invisible(self, group: str, receipt: str, invisible_ms: int) -> tuple[str, str]:
        """(status, new receipt): the message stays invisible ``invisible_ms`` from now."""
        with self._lock:
            ck, i, status = self._claim(group, receipt, "invisible")
        if ck is None:
            return status, receipt
        new = Checkpoint(-1, group, ck.topic, ck.queue_id, _now_ms(), invisible_ms, -1, [ck.msgs[i]], ck.level)
        try:
            self._put_tracked([ck_message(new), done_message(ck.offset, [i], "invisible")], [new])
        except BaseException:
            self._unclaim([(ck, i)])
            raise
        self._forget_finished([ck])
        return "OK", new.receipt(0)

    def max_reconsume_times(self, group: str) -> int:
        value = self._groups.config(group).get("max_reconsume_times")
        return self._cfg.max_reconsume_times if value is None else int(value)

    def retry(self, group: str, msg_id: str, delay_level: int | None) -> str:
        """Send a pulled message back (RocketMQ consumerSendMsgBack): RETRY, or DLQ when it was reconsumed
        ``max_reconsume_times`` or ``delay_level`` < 0."""
        m = self._store.get_message(msg_id)
        rc = reconsume_times(m)
        if (delay_level is not None and delay_level < 0) or rc >= self.max_reconsume_times(group):
            self._ensure_topic(DLQ_PREFIX + group)
            self._store.put_messages([dlq_message(m, group, rc)])
            self.dead.inc(group=group)
            return "DLQ"
        level = delay_level or 3 + rc
        self._ensure_topic(RETRY_PREFIX + group)
        if self._transform is not None:
            self._store.put_messages([self._transform(retry_message(m, group, rc + 1), level)])
        else:  # the revive thread puts it when the back-off has passed
            self._register([Checkpoint(-1, group, m.topic, m.queue_id, _now_ms(), 0, -1,
                                       [(m.queue_offset, m.msg_id, rc)], level)])
        self.retried.inc(group=group)
        return "RETRY"

    def _ensure_topic(self, name: str) -> None:
        if not self._topics.exists(name):
            self._topics.ensure_group_topic(name)

    # -- revive ------------------------------------------------------------

    def _run(self) -> None:
        period = self._cfg.revive_interval_ms / 1000
        while not self._worker.wait(period):
            try:
                self.revive_once(_now_ms())
                self._save_progress()
            except Exception:  # a failed put is retried on the next round
                log.exception("POP revive failed; retrying in %.1f s", period)

    def _level(self, ck: Checkpoint, i: int) -> int:
        return ck.level if ck.level is not None else 3 + ck.msgs[i][2]

    def _due(self, ck: Checkpoint, i: int) -> int:
        due = ck.pop_time + ck.invisible_ms
        if self._transform is None or ck.level is not None:
            due += self._levels_ms[min(self._level(ck, i), len(self._levels_ms)) - 1]
        return due

    def revive_once(self, now_ms: int) -> int:
        """Move every message past its invisible time (and back-off) to the retry topic or the DLQ."""
        with self._lock:
            claims = []
            for ck in list(self._cks.values()):
                idx = [i for i in range(len(ck.msgs)) if not ck.done[i] and self._due(ck, i) <= now_ms]
                for i in idx:
                    ck.done[i] = "revive"
                if idx:
                    claims.append((ck, idx))
        moved = 0
        for ck, idx in claims:
            try:
                moved += self._revive(ck, idx)
            except BaseException:
                self._unclaim([(ck, i) for i in idx])
                raise
        self._forget_finished([ck for ck, _ in claims])
        return moved

    def _revive(self, ck: Checkpoint, idx: list[int]) -> int:
        out: list[Message] = []
        retries = dlq = 0
        limit = self.max_reconsume_times(ck.group)
        for i in idx:
            _, msg_id, rc = ck.msgs[i]
            try:
                m = self._store.get_message(msg_id)
            except Exception:  # gone (retention): nothing left to deliver
                log.warning("POP revive: message %s of group %s is gone", msg_id, ck.group)
                continue
            if rc >= limit:
                self._ensure_topic(DLQ_PREFIX + ck.group)
                out.append(dlq_message(m, ck.group, rc))
                dlq += 1
            else:
                self._ensure_topic(RETRY_PREFIX + ck.group)
                msg = retry_message(m, ck.group, rc + 1)
                if self._transform is not None and ck.level is None:
                    msg = self._transform(msg, self._level(ck, i))
                out.append(msg)
                retries += 1
        self._put_tracked([*out, done_message(ck.offset, idx, "revive")])
        self.retried.inc(retries, group=ck.group)
        self.dead.inc(dlq, group=ck.group)
        return len(out)

    def _save_progress(self) -> None:
        """Record where start-up replay may begin: the first checkpoint still in flight."""
        with self._lock:
            lows = [*self._cks.keys(), *self._pending.values()]
            progress = min(lows) if lows else self._store.max_offset(REVIVE_TOPIC, 0)
        if progress != self._saved_progress:
            self._groups.commit(REVIVE_GROUP, REVIVE_TOPIC, {0: progress})
            self._saved_progress = progress

    # -- figures -----------------------------------------------------------

    def inflight(self) -> dict[str, int]:
        """Messages popped and neither acked nor revived yet, per group."""
        out: dict[str, int] = {}
        with self._lock:
            for ck in self._cks.values():
                out[ck.group] = out.get(ck.group, 0) + sum(1 for d in ck.done if not d)
        return out

    def metric_lines(self) -> list[str]:
        lines = render_gauge("sparkmq_pop_inflight_messages", "Popped messages neither acked nor revived, by group.",
                             [({"group": g}, float(n)) for g, n in sorted(self.inflight().items())])
        for counter in (self.popped, self.acked, self.retried, self.dead):
            lines.extend(counter.render())
        return lines

    def describe(self) -> dict[str, Any]:
        return {"inflight": self.inflight(), "checkpoints": len(self._cks)}
