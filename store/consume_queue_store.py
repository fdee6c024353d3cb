"""The table of ConsumeQueues, and the dispatcher that fills them."""

from __future__ import annotations

import logging
import shutil
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np

from .consume_queue import ConsumeQueue, RemoteUnits
from .dispatch import DispatchBatch
from .message import SysFlag
from .quarantine import DAMAGED_TAG, QuarantinedRecord

__all__ = ["ConsumeQueueStore", "is_visible"]

_log = logging.getLogger(__name__)
_PREPARED = int(SysFlag.TRANSACTION_PREPARED)
_ROLLBACK = int(SysFlag.TRANSACTION_ROLLBACK)


def _units(qoffs: Iterable[int], recs: list[QuarantinedRecord]) -> tuple[np.ndarray, ...]:
    """put_units arguments for units that point at quarantined records."""
    return (np.fromiter(qoffs, np.int64), np.array([r.phy_offset for r in recs], np.int64),
            np.array([r.size for r in recs], np.int64), np.full(len(recs), DAMAGED_TAG, np.int64))


def is_visible(sys_flags: np.ndarray) -> np.ndarray:
    """Records consumers may see: not a prepared or rolled-back half message."""
    state = sys_flags & 0xC
    return (state != _PREPARED) & (state != _ROLLBACK)


class ConsumeQueueStore:
    def __init__(self, root: Path, segment_units: int) -> None:
        self.root = root
        self.segment_units = segment_units
        self._queues: dict[tuple[str, int], ConsumeQueue] = {}
        self._lock = threading.Lock()
        # topic -> (batch, row positions) -> tag codes: the schedule and timer topics keep due times there
        self.tag_code_hooks: dict[str, Callable[[DispatchBatch, np.ndarray], np.ndarray]] = {}
        # quarantined records whose header did not name their queue: they fill the gap they leave in it
        self._orphans: list[QuarantinedRecord] = []
        self.remote: RemoteUnits | None = None  # units of tiered segments (store.tiered), set before the start

    def load_and_recover(self, commitlog_max: int) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        for topic_dir in sorted(self.root.iterdir()):
            if not topic_dir.is_dir():
                continue
            for qdir in sorted(topic_dir.iterdir()):
                if qdir.name.isdigit():
                    cq = ConsumeQueue(qdir, topic_dir.name, int(qdir.name), self.segment_units, self.remote)
                    cq.recover(commitlog_max)
                    self._queues[(topic_dir.name, int(qdir.name))] = cq

    def is_empty(self) -> bool:
        return not self._queues

    def get(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        return self._queues.get((topic, queue_id))

    def get_or_create(self, topic: str, queue_id: int) -> ConsumeQueue:
        key = (topic, queue_id)
        cq = self._queues.get(key)
        if cq is None:
            with self._lock:
                cq = self._queues.get(key)
                if cq is None:
                    cq = ConsumeQueue(self.root / topic / str(queue_id), topic, queue_id, self.segment_units,
                                      self.remote)
                    cq.files.load()
                    self._queues = {**self._queues, key: cq}
        return cq

    def queues(self) -> dict[tuple[str, int], ConsumeQueue]:
        return dict(self._queues)

    def topics(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for topic, qid in sorted(self._queues):
            out.setdefault(topic, []).append(qid)
        return out

    def max_offsets(self) -> dict[tuple[str, int], int]:
        return {k: cq.max_offset() for k, cq in self._queues.items()}

    def delete_topic(self, topic: str) -> None:
        with self._lock:
            doomed = [cq for k, cq in self._queues.items() if k[0] == topic]
            self._queues = {k: v for k, v in self._queues.items() if k[0] != topic}
        for cq in doomed:
            cq.destroy()
        shutil.rmtree(self.root / topic, ignore_errors=True)

    def dispatch(self, batch: DispatchBatch) -> list[tuple[str, int, int]]:
        """Append units for visible records; returns (topic, queue, new max) per grown queue."""
        if not len(batch):
            return []
        visible = is_visible(batch.sys_flags)
        topics = batch.topics
        names = topics[:1] if topics.count(topics[0]) == len(topics) else list(dict.fromkeys(topics))
        code_of = {t: i for i, t in enumerate(names)}
        codes = np.fromiter(map(code_of.__getitem__, batch.topics), np.int64, len(batch)) if len(names) > 1 \
            else np.zeros(len(batch), np.int64)
        group = (codes << 32) | batch.queue_ids.astype(np.int64)
        grown: list[tuple[str, int, int]] = []
        for g in np.unique(group[visible]).tolist():
            idx = np.flatnonzero((group == g) & visible)
            topic, qid = names[g >> 32], g & 0xFFFFFFFF
            cq = self.get_or_create(topic, qid)
            if self._orphans and int(batch.queue_offsets[idx[0]]) > cq.max_offset():
                self._fill_gap(cq, int(batch.queue_offsets[idx[0]]), int(batch.phy_offsets[idx[0]]))
            hook = self.tag_code_hooks.get(topic)
            codes = batch.tag_codes[idx] if hook is None else hook(batch, idx)
            cq.put_units(batch.queue_offsets[idx], batch.phy_offsets[idx], batch.sizes[idx], codes)
            grown.append((topic, qid, cq.max_offset()))
        return grown

    def put_damaged(self, rec: QuarantinedRecord) -> None:
        """Give a quarantined record its unit (tag code DAMAGED_TAG: every read of it answers CORRUPT_MESSAGE)
        when its header names the next offset of an existing queue; else keep it for the gap it leaves."""
        cq = self.get(rec.topic, rec.queue_id) if rec.topic is not None and rec.queue_id is not None else None
        if cq is not None and rec.queue_offset == cq.max_offset():
            cq.put_units(*_units([rec.queue_offset], [rec]))
            return
        if cq is not None and rec.queue_offset is not None and rec.queue_offset < cq.max_offset():
            unit = cq.read_units(rec.queue_offset, 1)
            if len(unit) and int(unit["phy"][0]) == rec.phy_offset:
                return  # dispatched before the crash: its unit is there
        self._orphans.append(rec)

    def _fill_gap(self, cq: ConsumeQueue, first: int, first_phy: int) -> None:
        """Units ``cq.max_offset()..first`` are missing: point them at the orphans that lie between the
        queue's last record and ``first_phy`` (the last ones, those of this topic first)."""
        cur = cq.max_offset()
        lo = cq.max_phy_end() if cur else 0
        near = [o for o in self._orphans if lo <= o.phy_offset < first_phy]
        if not near:
            return  # lost to retention before dispatch: put_units marks them dead
        near.sort(key=lambda o: (o.topic in (None, cq.topic), o.phy_offset))
        gap = first - cur
        picks = sorted(near[-gap:], key=lambda o: o.phy_offset)
        picks = [picks[0]] * (gap - len(picks)) + picks
        for o in picks:
            if o in self._orphans:
                self._orphans.remove(o)
        _log.warning("%s/%d: units %d-%d point at quarantined records (%s): reads there answer CORRUPT_MESSAGE",
                     cq.topic, cq.queue_id, cur, first - 1, ", ".join(str(o.phy_offset) for o in picks))
        cq.put_units(*_units(range(cur, first), picks))

    def correct_min_offsets(self, commitlog_min: int) -> None:
        for cq in self._queues.values():
            cq.correct_min_offset(commitlog_min)

    def flush(self) -> None:
        for cq in self._queues.values():
            cq.flush()

    def close(self) -> None:
        for cq in self._queues.values():
            cq.close()
        self._queues = {}
