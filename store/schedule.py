"""Delayed messages on the store's own topics (RocketMQ's ScheduleMessageService, store side).

A message with a delay level ``L`` (1-based) is not appended to its topic: it is
rewritten to the hidden topic :data:`SCHEDULE_TOPIC`, queue ``L - 1``, with its real
topic and queue in the properties :data:`REAL_TOPIC` / :data:`REAL_QID` and the level
in :data:`DELAY`.  A timer message (an absolute due time) goes to :data:`TIMER_TOPIC`,
queue 0, with :data:`TIMER_DELIVER_MS`.  Both are durable and acknowledged at once.

The ConsumeQueue unit's 8-byte tag code holds the **due time** (epoch ms) instead of a
tag hash for these two topics (:func:`install_due_time_codes`): for the schedule topic
``store_timestamp + levels[L - 1]``, computed at dispatch, so every per-level queue is
sorted by due time; for the timer topic the ``TIMER_DELIVER_MS`` property.

At the due time a deliverer rebuilds the message (:func:`restore`) and appends it to
its real topic with :data:`DELAY_ORIGIN` = the CommitLog offset of the scheduled copy.

Exactly once across SIGKILL: a deliverer appends first and records its progress
(:class:`ScheduleProgress`, replaced atomically) after, together with the CommitLog's
end at that moment.  A crash between the two leaves re-puts that the progress does not
cover; at start-up :func:`delivered_origins` scans the CommitLog written since the last
progress record (at most one interval of writes, since progress is also recorded when
idle) for :data:`DELAY_ORIGIN` and the deliverer skips those origins.  De-duplication by
the original offset was chosen over an idempotent put because the CommitLog has no
idempotent put: every append is a new record.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson

from .checkpoint import atomic_write
from .dispatch import DispatchBatch
from .errors import InvalidMessageError, StoreError
from .message import Message
from .schedule_names import (
    DEFAULT_LEVELS,
    DELAY,
    DELAY_ORIGIN,
    REAL_QID,
    REAL_TOPIC,
    SCHEDULE_TOPIC,
    TIMER_DELIVER_MS,
    TIMER_TOPIC,
    parse_levels,
)

if TYPE_CHECKING:
    from .message_store import MessageStore

__all__ = [
    "SCHEDULE_TOPIC", "TIMER_TOPIC", "REAL_TOPIC", "REAL_QID", "DELAY", "TIMER_DELIVER_MS", "DELAY_ORIGIN",
    "DEFAULT_LEVELS", "parse_levels", "to_schedule", "to_timer", "restore", "install_due_time_codes",
    "delivered_origins", "ScheduleProgress",
]

_log = logging.getLogger(__name__)

_DROPPED = (REAL_TOPIC, REAL_QID, DELAY, TIMER_DELIVER_MS, DELAY_ORIGIN)


def _with(m: Message, topic: str, queue_id: int, extra: Mapping[str, str]) -> Message:
    props = {**m.properties, REAL_TOPIC: m.topic, REAL_QID: str(m.queue_id), **extra}
    return Message(topic, m.body, queue_id, m.keys, m.tags, props, m.flag, m.sys_flag, m.born_timestamp,
                   m.born_host, m.reconsume_times, m.prepared_transaction_offset)


def to_schedule(m: Message, level: int, levels: int) -> Message:
    """``m`` rewritten for delay ``level`` (clamped to ``levels``, as RocketMQ); level < 1 is an error."""
    if level < 1:
        raise InvalidMessageError(f"delay level {level} must be 1..{levels}")
    level = min(level, levels)
    return _with(m, SCHEDULE_TOPIC, level - 1, {DELAY: str(level)})


def to_timer(m: Message, deliver_ms: int) -> Message:
    """``m`` rewritten as a timer message due at ``deliver_ms`` (epoch ms)."""
    return _with(m, TIMER_TOPIC, 0, {TIMER_DELIVER_MS: str(int(deliver_ms))})


def restore(batch: DispatchBatch, i: int) -> Message:
    """The real message of scheduled row ``i``, marked with its origin offset."""
    props = batch.properties(i)
    topic, qid = props[REAL_TOPIC], int(props[REAL_QID])
    for name in _DROPPED:
        props.pop(name, None)
    props[DELAY_ORIGIN] = str(int(batch.phy_offsets[i]))
    return Message(topic, batch.bodies[i], qid, batch.keys[i], batch.tags[i], props,
                   sys_flag=int(batch.sys_flags[i]), born_timestamp=int(batch.born_timestamps[i]))


TagCodeHook = Callable[[DispatchBatch, np.ndarray], np.ndarray]


def install_due_time_codes(store: MessageStore, levels_ms: list[int]) -> None:
    """Make the schedule and timer topics' ConsumeQueue units carry due times (before ``store.start()``)."""
    delays = np.asarray(levels_ms, np.int64)

    def schedule_codes(batch: DispatchBatch, idx: np.ndarray) -> np.ndarray:
        qids = np.minimum(batch.queue_ids[idx].astype(np.int64), len(delays) - 1)
        return batch.store_timestamps[idx] + delays[qids]

    def timer_codes(batch: DispatchBatch, idx: np.ndarray) -> np.ndarray:
        return np.fromiter((int(batch.properties(i).get(TIMER_DELIVER_MS) or 0) for i in idx.tolist()),
                           np.int64, len(idx))

    store.queues.tag_code_hooks[SCHEDULE_TOPIC] = schedule_codes
    store.queues.tag_code_hooks[TIMER_TOPIC] = timer_codes


def delivered_origins(store: MessageStore, from_offset: int) -> set[int]:
    """Origins (:data:`DELAY_ORIGIN`) of the messages appended from CommitLog ``from_offset`` on."""
    needle = DELAY_ORIGIN.encode()
    found: set[int] = set()
    try:
        for batch in _batches(store, max(from_offset, store.min_phy_offset())):
            for i, raw in enumerate(batch.properties_raw):
                if needle in raw:
                    origin = batch.properties(i).get(DELAY_ORIGIN)
                    if origin is not None:
                        found.add(int(origin))
    except StoreError as exc:
        _log.error("could not scan the CommitLog for delivered delayed messages from %d: %s", from_offset, exc)
    return found


def _batches(store: MessageStore, offset: int) -> Iterator[DispatchBatch]:
    return store.read_dispatch_batches(offset)


class ScheduleProgress:
    """A small JSON progress file, replaced atomically (temp, fsync, rename)::

        {"offsets": {"<name>": <int>, ...}, "commitlog_end": <int>, "extra": {...}}

    ``offsets`` are the deliverer's positions (queue offsets per level, the timer's
    read slot and enqueue offset); ``commitlog_end`` is the CommitLog's end when they
    were recorded: every re-put before it is covered by ``offsets``.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offsets: dict[str, int] = {}
        self.commitlog_end = 0

    def load(self) -> None:
        if not self.path.exists():
            return
        try:
            doc: dict[str, Any] = orjson.loads(self.path.read_bytes())
        except orjson.JSONDecodeError:
            aside = self.path.with_name(self.path.name + ".corrupt")
            _log.error("delay progress %s does not parse; moved to %s, delivery restarts from the queues' start "
                       "(de-duplicated by origin)", self.path, aside)
            self.path.replace(aside)
            return
        self.offsets = {str(k): int(v) for k, v in doc.get("offsets", {}).items()}
        self.commitlog_end = int(doc.get("commitlog_end", 0))

    def save(self, offsets: Mapping[str, int], commitlog_end: int) -> None:
        self.offsets, self.commitlog_end = dict(offsets), commitlog_end
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, orjson.dumps({"offsets": self.offsets, "commitlog_end": commitlog_end},
                                             option=orjson.OPT_SORT_KEYS))


def read_scheduled(store: MessageStore, phys: list[int]) -> DispatchBatch:
    """The scheduled records at CommitLog offsets ``phys``, in CommitLog order (gone ones left out)."""
    from .pull import read_records  # noqa: PLC0415 (pull imports the commitlog; kept out of module load)

    return read_records(store.commitlog, phys)


PutFn = Callable[[list[Message]], object]


class LevelDeliverer:
    """Delivers due messages of every delay level; :meth:`run_once` is one pass (no thread here).

    Per level it reads units of ``SCHEDULE_TOPIC`` queue ``L - 1`` from its offset; the
    leading units whose tag code (due time) has passed are read, restored and put to
    their real topics in one append, then the offset moves past them.  A failed put
    leaves the offset where it was, so the next pass retries the same units (not the
    next ones: RocketMQ #9248).  Progress is saved after a delivering pass and at least
    every ``progress_interval_ms`` (see the module docstring for exactly-once).
    """

    def __init__(self, store: MessageStore, levels_ms: list[int], progress: ScheduleProgress, put: PutFn,
                 batch: int = 1024) -> None:
        self._store, self.levels_ms, self.progress, self._put = store, levels_ms, progress, put
        self._batch = batch
        self.offsets: dict[str, int] = {}
        self._skip: set[int] = set()
        self.delivered = 0

    def load(self) -> None:
        """Read the progress, clamp it to the queues (RocketMQ's correctDelayOffset), find crash re-puts."""
        self.progress.load()
        self.offsets = {str(lv): self.progress.offsets.get(str(lv), 0) for lv in range(1, len(self.levels_ms) + 1)}
        for name in self.offsets:
            self.offsets[name] = self._clamp(int(name), self.offsets[name])
        self._skip = delivered_origins(self._store, self.progress.commitlog_end)

    def _clamp(self, level: int, offset: int) -> int:
        cq = self._store.queues.get(SCHEDULE_TOPIC, level - 1)
        if cq is None:
            return 0
        return min(max(offset, cq.min_offset()), cq.max_offset())

    def pending(self) -> dict[int, int]:
        """Messages waiting per level (queue max offset minus delivery offset)."""
        out = {}
        for name, off in self.offsets.items():
            cq = self._store.queues.get(SCHEDULE_TOPIC, int(name) - 1)
            out[int(name)] = max(0, cq.max_offset() - off) if cq is not None else 0
        return out

    def follow(self, offsets: Mapping[str, int]) -> None:
        """A slave takes its master's offsets (only forward) and records them."""
        for name, off in offsets.items():
            if name in self.offsets and int(off) > self.offsets[name]:
                self.offsets[name] = int(off)
        self.save()

    def save(self) -> None:
        self.progress.save(self.offsets, self._store.max_phy_offset())

    def run_once(self, now_ms: int) -> int:
        """Deliver what is due at ``now_ms``; returns how many queue units were passed."""
        moved = 0
        for name in list(self.offsets):
            moved += self._level(int(name), now_ms)
        if moved:
            self.save()
        return moved

    def _level(self, level: int, now_ms: int) -> int:
        name = str(level)
        cq = self._store.queues.get(SCHEDULE_TOPIC, level - 1)
        if cq is None:
            return 0
        start = self.offsets[name] = max(self.offsets[name], cq.min_offset())
        units = cq.read_units(start, self._batch)
        if not len(units):
            return 0
        due = units["tag"] <= now_ms
        n = len(units) if due.all() else int(np.argmin(due))
        if n == 0:
            return 0
        phys = units["phy"][:n]
        records = read_scheduled(self._store, [int(p) for p in phys[phys >= 0]])
        messages = [restore(records, i) for i in range(len(records))
                    if int(records.phy_offsets[i]) not in self._skip and _deliverable(records, i)]
        if messages:
            self._put(messages)
        self.offsets[name] = start + n
        self.delivered += len(messages)
        return n


def _deliverable(records: DispatchBatch, i: int) -> bool:
    props = records.properties(i)
    if REAL_TOPIC not in props or REAL_QID not in props:
        _log.error("scheduled message at CommitLog offset %d has no real topic; dropped",
                   int(records.phy_offsets[i]))
        return False
    return True
