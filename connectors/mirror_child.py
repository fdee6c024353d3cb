"""The Delta mirror's writer as a child process (``[mirror] host = "process"``).

The child shares nothing with the broker but a few int64 slots and a pipe::

    broker (parent)                         child (``python -m connectors.mirror_entry SPEC``)
    --------------                          -------------------
    reput thread --dispatch()--> READABLE   reads the CommitLog files read-only
                                            (store.readonly) from NEXT up to READABLE,
                                            builds Arrow rows, commits to Delta
    lag(), /metrics  <-------  COMMITTED, OLDEST_MS, COMMITS, ROWS, READY
    stop()  --"s"--> control pipe           commits up to READABLE, exits
    (broker dies)    control pipe EOF --->  exits at once (the table resumes later)
    start() <--"ready\n" or the error-- status pipe

The slots are int64 words of a ``memfd`` both processes map (aligned 8-byte
stores: atomic on the platforms we run on); each is written by one side only.
The child is a fresh interpreter (not ``multiprocessing``: that would import
the broker's ``__main__`` again); its descriptors arrive with ``pass_fds``.

Exactly once is the table's business (:class:`.table.MirrorTable`): every
commit carries the app transaction ``(app_id, CommitLog end offset)`` and
drops rows below the version it re-reads, so a child killed at any point, or
a stale child still finishing a commit next to a new one, adds nothing twice.

Compaction, vacuum and checkpoints run on their own thread next to the writer
(:mod:`.upkeep_thread`), so they never hold commits back.

Commit size adapts: a commit holds ``batch_rows`` rows when the mirror keeps
up, and up to ``_MAX_SCALE`` times that while a backlog remains after a full
commit (fewer, larger commits: the per-commit cost of delta-rs is paid less
often); the scale halves again once commits are due by time.
"""

from __future__ import annotations

import json
import logging
import mmap
import os
import select
import signal
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from store.readonly import ReadOnlyCommitLog

from .config import MirrorConfig
from .rows import batch_to_table
from .table import MirrorTable
from .upkeep_thread import UpkeepService

__all__ = ["ChildSpec", "READABLE", "COMMITTED", "OLDEST_MS", "COMMITS", "ROWS", "READY", "SLOTS", "main"]

_log = logging.getLogger(__name__)

READABLE, COMMITTED, OLDEST_MS, COMMITS, ROWS, READY = range(6)
SLOTS = 8
_READ_BYTES = 8 << 20
_MAX_SCALE = 4
_IDLE_WAIT_S = 0.05
# Read once this much is waiting (or a commit is due): fewer, larger reads instead of spinning on every record.
_READ_MIN_BYTES = 1 << 20
_RETRY_S = 1.0
_STOP_CATCH_UP_BYTES = 64 << 20


@dataclass(frozen=True)
class ChildSpec:
    """What the child needs: the table, the CommitLog, and its three descriptors."""

    config: MirrorConfig
    commitlog_dir: str
    segment_bytes: int
    store_host: str
    slots_fd: int
    control_fd: int
    status_fd: int

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @staticmethod
    def from_json(text: str) -> ChildSpec:
        raw = json.loads(text)
        return ChildSpec(**{**raw, "config": MirrorConfig(**raw["config"])})


def map_slots(fd: int) -> tuple[mmap.mmap, np.ndarray]:
    """The shared int64 slots over the memfd ``fd``."""
    mm = mmap.mmap(fd, SLOTS * 8)
    return mm, np.frombuffer(mm, np.int64)


def main(argv: list[str]) -> int:
    """Entry point of the child process (:mod:`.mirror_entry`)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group; the broker stops us
    logging.basicConfig(level=logging.INFO, format="%(asctime)s mirror-child %(levelname)s %(name)s: %(message)s")
    spec = ChildSpec.from_json(argv[0])
    _mm, shared = map_slots(spec.slots_fd)
    try:
        writer = _Writer(spec, shared)
    except Exception as exc:  # noqa: BLE001 - reported to the parent (lag()["last_error"], its log)
        _tell(spec.status_fd, f"{type(exc).__name__}: {exc}")
        return 1
    _tell(spec.status_fd, "ready")
    try:
        writer.run(spec.control_fd)
    finally:
        writer.close()
    return 0


def _tell(fd: int, line: str) -> None:
    """Write the one status line; a parent that stopped listening (stop() before "ready") is fine."""
    try:
        os.write(fd, line.encode("utf-8", "replace") + b"\n")
    except OSError:
        pass
    os.close(fd)


class _Writer:
    def __init__(self, spec: ChildSpec, shared: Any) -> None:
        self._cfg = spec.config
        self._shared = shared
        self._table = MirrorTable(spec.config.table_uri, spec.config.app_id or "sparkmq")
        self._log = ReadOnlyCommitLog(Path(spec.commitlog_dir), spec.segment_bytes, spec.store_host)
        resume = self._table.committed_offset()
        self._next = self._committed = resume if resume is not None else 0
        self._buffer: list[pa.Table] = []
        self._rows = 0
        self._since: float | None = None  # when _next first moved past _committed
        self._scale = 1
        self._commits = 0
        self._upkeep = UpkeepService(spec.config)
        self._upkeep.start()
        shared[COMMITTED] = self._committed
        shared[OLDEST_MS] = -1
        shared[READY] = 1

    def run(self, control_fd: int) -> None:
        while True:
            ready, _, _ = select.select([control_fd], [], [], self._wait_time())
            if ready:
                message = os.read(control_fd, 64)
                if not message:
                    return  # the broker is gone: stop now, the next start resumes from the table
                if b"s" in message:
                    self._guarded(self._drain)
                    return
            self._guarded(self._step)

    def close(self) -> None:
        self._upkeep.stop()
        self._log.close()

    def _wait_time(self) -> float:
        """0 when enough is waiting to read or a commit is due, else how long to sleep."""
        waiting = int(self._shared[READABLE]) - self._next
        if waiting >= _READ_MIN_BYTES:
            return 0.0
        if self._since is None:
            return _IDLE_WAIT_S if waiting <= 0 else min(_IDLE_WAIT_S, self._cfg.batch_interval_s)
        return max(0.0, min(_IDLE_WAIT_S, self._since + self._cfg.batch_interval_s - time.monotonic()))

    def _guarded(self, step: Any) -> None:
        try:
            step()
        except Exception:  # noqa: BLE001 - the mirror outlives any one failure; the table dedups the retry
            _log.exception("delta mirror step failed; retrying in %.1f s", _RETRY_S)
            time.sleep(_RETRY_S)

    def _step(self) -> None:
        limit = int(self._shared[READABLE])
        target = self._cfg.batch_rows * self._scale
        self._read(limit, target)
        if self._rows >= target:
            self._flush()
            self._scale = min(_MAX_SCALE, self._scale * 2) if self._next < int(self._shared[READABLE]) else 1
        elif self._flush_due():
            self._flush()
            self._scale = max(1, self._scale // 2)

    def _drain(self) -> None:
        """Commit up to READABLE (what a clean stop leaves), or what is buffered when the rest is large."""
        limit = int(self._shared[READABLE])
        if limit - self._next <= _STOP_CATCH_UP_BYTES:
            self._read(limit, None)
        self._flush()

    def _read(self, limit: int, target: int | None) -> None:
        while self._next < limit and (target is None or self._rows < target):
            batch, nxt = self._log.read_batch(self._next, limit, _READ_BYTES)
            if batch is not None:
                rows = batch_to_table(batch, from_offset=self._next, bodies=self._cfg.bodies)
                if rows.num_rows:
                    if not self._rows:
                        self._shared[OLDEST_MS] = int(rows["store_timestamp"][0].value // 1000)
                    self._buffer.append(rows)
                    self._rows += rows.num_rows
            if nxt <= self._next:
                break  # the segment is not on disk yet
            if self._since is None:
                self._since = time.monotonic()
            self._next = nxt

    def _flush_due(self) -> bool:
        return self._since is not None and time.monotonic() - self._since >= self._cfg.batch_interval_s

    def _flush(self) -> None:
        if self._next <= self._committed:
            return
        end, committing = self._next, self._rows > 0
        if committing:
            written = self._table.append(pa.concat_tables(self._buffer), end)
            self._commits += 1
            self._shared[ROWS] += written
            self._shared[COMMITS] = self._commits
        self._buffer.clear()
        self._rows = 0
        self._since = None
        self._committed = end
        self._shared[COMMITTED] = end
        self._shared[OLDEST_MS] = -1
        self._log.forget_below(end)
        if committing:
            self._upkeep.after_commit(self._commits)
