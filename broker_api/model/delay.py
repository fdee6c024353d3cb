"""DelayService: delay-level and timer messages (RocketMQ's ScheduleMessageService + TimerMessageStore).

The public face for other broker services (POP retry back-off) and the produce route::

    broker.delay.schedule(messages, delay_level=3)          # from any thread; returns PutResults
    broker.delay.schedule(messages, deliver_at_ms=ts_ms)
    broker.delay.transform(message, delay_level=3)          # the rewritten Message, to put yourself

A scheduled message is stored at once (durable and acknowledged) in a hidden topic and
appended to its real topic at its due time, exactly once, also across SIGKILL and
restarts.  Property names (see ``store.schedule``): ``REAL_TOPIC`` and ``REAL_QID`` hold
the real topic and queue while it waits, ``DELAY`` the level, ``TIMER_DELIVER_MS`` a
timer's due time; the delivered message carries ``sparkmq.delay_origin`` (the CommitLog
offset of the scheduled copy) and keeps keys, tags, body, born time and other properties.

Delay levels (``[delay] levels``) wait in ``SCHEDULE_TOPIC_XXXX``, one queue per level,
the due time in each unit's tag code.  Timer messages (``deliver_at_ms``) wait in
``rmq_sys_wheel_timer`` and are indexed by a timer wheel + timer log
(``store.timer``), so their cost grows with the number pending, not with the delay.

Two threads deliver (levels, timer); only a master delivers.  On a slave
:meth:`DelayService.follow` takes the master's progress (``GET /v1/admin/metadata``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from store.service_thread import ServiceThread
from store import Message, MessageStore, PutResult
from store.schedule import (
    TIMER_TOPIC,
    LevelDeliverer,
    ScheduleProgress,
    delivered_origins,
    install_due_time_codes,
    parse_levels,
    read_scheduled,
    restore,
    to_schedule,
    to_timer,
)
from store.timer import TimerStore

from ..errors import BadMessageError
from ..metrics import render_gauge
from ..settings.sections import DelaySection

__all__ = ["DelayService"]

log = logging.getLogger(__name__)


def _now_ms() -> int:
    return int(time.time() * 1000)


class _Loop:
    """One daemon thread calling ``step()`` every ``period_s`` (sooner while it finds work)."""

    def __init__(self, name: str, period_s: float, step: Callable[[], int]) -> None:
        self._name, self._period_s, self._step = name, period_s, step
        self._worker = ServiceThread(name, self._run, join_timeout_s=30)

    def start(self) -> None:
        self._worker.start()

    def stop(self) -> None:
        self._worker.stop()

    def _run(self) -> None:
        while not self._worker.stopping.is_set():
            try:
                busy = self._step()
            except Exception:  # RocketMQ: retry after DELAY_FOR_A_PERIOD
                log.exception("%s failed; retrying in 1 s", self._name)
                self._worker.wait(1.0)
                continue
            if not busy:
                self._worker.wait(self._period_s)


class DelayService:
    """Schedules delayed messages and delivers them when due (masters only)."""

    def __init__(self, store: MessageStore, section: DelaySection, meta_dir: Path) -> None:
        self._store = store
        self._cfg = section
        self.levels_ms = parse_levels(section.levels)
        install_due_time_codes(store, self.levels_ms)  # before the store recovers: re-dispatch needs it
        self.levels = LevelDeliverer(store, self.levels_ms, ScheduleProgress(meta_dir / "delay_offsets.json"),
                                     self._put)
        self.timer = TimerStore(Path(store.config.root) / "timer", section.timer_precision_ms,
                                section.max_delay_s * 1000)
        self._timer_skip: set[int] = set()
        self._loops: list[_Loop] = []
        self._last_save = self._timer_saved = 0.0
        self.timer_delivered = 0
        self.delivering = False

    # -- the API ---------------------------------------------------------

    def transform(self, message: Message, delay_level: int | None = None,
                  deliver_at_ms: int | None = None) -> Message:
        """``message`` rewritten to wait for ``delay_level`` (1..len(levels), higher is clamped) or until
        ``deliver_at_ms`` (epoch ms, at most ``[delay] max_delay_s`` ahead; a past time is delivered at once)."""
        if delay_level is not None and deliver_at_ms is not None:
            raise BadMessageError("give either delay_level or deliver_at_ms, not both")
        if delay_level is not None:
            if isinstance(delay_level, bool) or not isinstance(delay_level, int) or delay_level < 1:
                raise BadMessageError(f"delay_level {delay_level!r} must be an integer 1..{len(self.levels_ms)}")
            return to_schedule(message, delay_level, len(self.levels_ms))
        if deliver_at_ms is not None:
            if isinstance(deliver_at_ms, bool) or not isinstance(deliver_at_ms, int) or deliver_at_ms < 0:
                raise BadMessageError(f"deliver_at_ms {deliver_at_ms!r} must be epoch milliseconds")
            latest = _now_ms() + self._cfg.max_delay_s * 1000
            if deliver_at_ms > latest:
                raise BadMessageError(f"deliver_at_ms {deliver_at_ms} is more than {self._cfg.max_delay_s} s "
                                      "ahead ([delay] max_delay_s); deliver it later in steps")
            if deliver_at_ms <= _now_ms():  # already due: delivered as it is (as RocketMQ)
                return message
            return to_timer(message, deliver_at_ms)
        return message

    def schedule(self, messages: Sequence[Message], delay_level: int | None = None,
                 deliver_at_ms: int | None = None) -> list[PutResult]:
        """Store ``messages`` to be delivered after ``delay_level`` or at ``deliver_at_ms``; safe from any
        thread; returns the scheduled copies' put results (durable once returned)."""
        return self._store.put_messages([self.transform(m, delay_level, deliver_at_ms) for m in messages])

    # -- lifecycle -------------------------------------------------------

    def start(self, deliver: bool) -> None:
        """Load progress; with ``deliver`` (a master) start the delivering threads."""
        self.levels.load()
        self.timer.load(_now_ms())
        self._timer_skip = delivered_origins(self._store, self.timer.progress.commitlog_end)
        self.delivering = deliver
        if not deliver:
            return
        period = self._cfg.poll_interval_ms / 1000
        self._loops = [_Loop("sparkmq-delay-levels", period, self._levels_step),
                       _Loop("sparkmq-delay-timer", period, self._timer_step)]
        for loop in self._loops:
            loop.start()

    def stop(self) -> None:
        """Stop the threads and record progress; safe twice."""
        loops, self._loops = self._loops, []
        for loop in loops:
            loop.stop()
        if loops:
            self.levels.save()
            self.timer.save(self._store.max_phy_offset())
        self.timer.close()

    def _put(self, messages: list[Message]) -> None:
        self._store.put_messages(messages)

    def _levels_step(self) -> int:
        moved = self.levels.run_once(_now_ms())
        now = time.monotonic()
        if moved:
            self._last_save = now
        elif now - self._last_save >= self._cfg.progress_interval_s:
            self.levels.save()  # idle: move commitlog_end forward so a crash scans little
            self._last_save = now
        return moved

    def _timer_step(self) -> int:
        """One timer pass: deliver the due slots first (catch-up after downtime), then enqueue."""
        due = self.timer.due(_now_ms())
        moved = len(due.phys)
        if moved:
            records = read_scheduled(self._store, due.phys.tolist())
            messages = [restore(records, i) for i in range(len(records))
                        if int(records.phy_offsets[i]) not in self._timer_skip]
            if messages:
                self._put(messages)
            self.timer_delivered += len(messages)
        now = time.monotonic()
        if moved or now - self._timer_saved >= self._cfg.progress_interval_s:
            self.timer.commit(due.next_slot, self._store.max_phy_offset())
            self._timer_saved = now
        return moved + self._enqueue()

    def _enqueue(self, batch: int = 50_000) -> int:
        cq = self._store.queues.get(TIMER_TOPIC, 0)
        if cq is None:
            return 0
        start = max(self.timer.enqueue_offset, cq.min_offset())
        units = cq.read_units(start, batch)
        if not len(units):
            return 0
        keep = units["phy"] >= 0
        qoffs = start + np.flatnonzero(keep).astype(np.int64)
        u = units[keep]
        self.timer.enqueue(qoffs, u["phy"].astype(np.int64), u["size"].astype(np.int32), u["tag"].astype(np.int64))
        self.timer.enqueue_offset = start + len(units)
        return len(units)

    # -- progress, metrics, slaves ------------------------------------------

    def pending(self) -> dict[str, int]:
        """Messages waiting, per level (``"1"``..) and ``"timer"``."""
        out = {str(k): v for k, v in self.levels.pending().items()}
        cq = self._store.queues.get(TIMER_TOPIC, 0)
        backlog = max(0, cq.max_offset() - self.timer.enqueue_offset) if cq is not None else 0
        out["timer"] = self.timer.pending() + backlog
        return out

    def metric_lines(self) -> list[str]:
        pending = [({"level": k}, float(v)) for k, v in self.pending().items()]
        return (render_gauge("sparkmq_delay_pending_messages", "Delayed messages not yet delivered, per delay "
                             "level and \"timer\".", pending)
                + render_gauge("sparkmq_delay_delivered_messages", "Delayed messages delivered since start.",
                               [({}, float(self.delivered()))]))

    def delivered(self) -> int:
        return self.levels.delivered + self.timer_delivered

    def progress(self) -> dict[str, Any]:
        """What a slave copies: the level offsets."""
        return {"levels": dict(self.levels.offsets), "timer_read_slot": self.timer.read_slot}

    def follow(self, progress: dict[str, Any]) -> None:
        """Slave: take the master's progress (never backwards)."""
        levels = progress.get("levels")
        if isinstance(levels, dict):
            self.levels.follow({str(k): int(v) for k, v in levels.items()})
        slot = progress.get("timer_read_slot")
        if isinstance(slot, int):
            self.timer.follow(slot, self._store.max_phy_offset())
