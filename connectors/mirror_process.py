"""MirrorProcess: the broker's side of the Delta mirror hosted in a child process.

Same face as :class:`.mirror.DeltaMirror` (``start``/``stop``/``lag``/``stats``,
``table_uri``, ``config``), so the broker and ``/metrics`` do not care which
host runs.  The broker keeps only cheap work: as a store dispatcher it writes
the end offset of every dispatched batch into a shared slot (READABLE); the
child (:mod:`.mirror_child`) reads the CommitLog files itself, builds the rows
and commits, off the broker's GIL.

The child is ``python -m connectors.mirror_entry`` (a fresh interpreter: not
``multiprocessing``, which would import the broker's ``__main__`` again); the
slots are a shared ``memfd`` and two pipes carry "stop", "ready" and a start-up
error (see :mod:`.mirror_child`).

``start()`` does not wait for the child to open the table; a child that cannot
(or that dies) is reported in ``lag()["last_error"]`` and the log, and a watch
thread starts a new one (back-off 1 s, doubling to 30 s while children fail to
start); the new child resumes from the table's app-transaction version.  ``stop()`` lets
the reput thread settle, tells the child to commit up to it and waits; a
child that does not exit is terminated, then killed.  If the broker dies, the
child sees its pipe close and exits.
"""

from __future__ import annotations

import logging
import os
import select
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from store import DispatchBatch, MessageStore, codec
from store.service_thread import ServiceThread

from .config import MirrorConfig
from .errors import MirrorError
from .mirror import DeltaMirror
from .mirror_child import COMMITS, COMMITTED, OLDEST_MS, READABLE, ROWS, SLOTS, ChildSpec, map_slots

__all__ = ["MirrorProcess", "open_mirror"]

_log = logging.getLogger(__name__)
_START_WAIT_S = 120.0
_STOP_WAIT_S = 120.0
_SETTLE_S = 5.0
_WATCH_S = 0.25
_BACKOFF_MAX_S = 30.0


class MirrorProcess:
    """Mirrors every user message of ``store`` into one Delta table from a child process."""

    def __init__(self, store: MessageStore, config: MirrorConfig) -> None:
        if not config.table_uri:
            raise MirrorError("mirror table_uri is empty; set [mirror] table_uri or let the broker fill it")
        self._store = store
        self._config = config
        self._slots_fd = -1
        self._mm: Any = None
        self._shared: Any = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._control = -1
        self._status = -1  # the child's status pipe until it said "ready" (or failed)
        self._status_text = b""
        self._spawned_at = 0.0
        self._ready = False
        self._last_error: str | None = None
        self._watch = ServiceThread("sparkmq-mirror-watch", self._run_watch, join_timeout_s=30.0)
        self._restarts = 0
        self._lock = threading.Lock()

    # -- lifecycle ---------------------------------------------------------

    def start(self) -> None:
        """Spawn the child and start watching it; returns at once (the child opens the table on its own).

        A child that cannot start is reported in ``lag()["last_error"]`` and the log, and started again
        with back-off."""
        if self._watch.running:
            return
        self._slots_fd = os.memfd_create("sparkmq-mirror-slots", os.MFD_CLOEXEC)
        os.ftruncate(self._slots_fd, SLOTS * 8)
        self._mm, self._shared = map_slots(self._slots_fd)
        self._shared[READABLE] = self._reput_offset()
        try:
            self._spawn()
        except BaseException:
            self._release_slots()
            raise
        self._store.add_dispatcher(self)
        self._watch.start()

    def stop(self) -> None:
        """Commit what the CommitLog holds (up to its settled end), stop the child. Safe to call twice."""
        if not self._watch.running:
            return
        self._store.remove_dispatcher(self)
        self._watch.stop()
        with self._lock:
            self._shared[READABLE] = max(int(self._shared[READABLE]), self._store.settled_reput_offset(_SETTLE_S))
            self._end_child(graceful=True)
        self._release_slots()

    def _release_slots(self) -> None:
        self._shared = self._shared.copy()  # lag() and stats() keep the last values
        try:
            self._mm.close()
        except BufferError:  # a dispatch() still holds the old view: the mapping goes when it is collected
            pass
        os.close(self._slots_fd)

    # -- Dispatcher --------------------------------------------------------

    def dispatch(self, batch: DispatchBatch) -> None:
        """Tell the child the CommitLog is readable up to this batch's end; never blocks."""
        shared = self._shared
        if batch.end_offset > shared[READABLE]:
            shared[READABLE] = batch.end_offset

    # -- observability -----------------------------------------------------

    def lag(self) -> dict[str, Any]:
        """How far the table is behind the CommitLog, in bytes and seconds; the child's pid and restarts."""
        committed = int(self._shared[COMMITTED])
        commitlog = max(int(self._store.stats()["commitlog_max_offset"]), committed)  # type: ignore[call-overload]
        lag_bytes = commitlog - committed
        seconds = 0.0
        if lag_bytes > 0:
            oldest = int(self._shared[OLDEST_MS])
            oldest = oldest if oldest >= 0 else self._store_time_at(committed)
            if oldest > 0:
                seconds = max(0.0, time.time() - oldest / 1000.0)
        proc = self._proc
        return {"mirrored_offset": committed, "commitlog_offset": commitlog, "lag_bytes": lag_bytes,
                "lag_seconds": round(seconds, 3), "host": "process",
                "pid": proc.pid if proc is not None and proc.poll() is None else None, "restarts": self._restarts,
                "last_error": self._last_error}

    def stats(self) -> dict[str, int]:
        """Counters for logs and benchmarks (rows and commits of the current child)."""
        return {"commits": int(self._shared[COMMITS]), "rows": int(self._shared[ROWS]), "dropped_batches": 0,
                "restarts": self._restarts}

    @property
    def table_uri(self) -> str:
        return self._config.table_uri

    @property
    def config(self) -> MirrorConfig:
        return self._config

    # -- child -------------------------------------------------------------

    def _spawn(self) -> None:
        cfg = self._store.config
        control_r, control_w = os.pipe()
        status_r, status_w = os.pipe()
        spec = ChildSpec(self._config, str(cfg.root / "commitlog"), cfg.commitlog_segment_bytes, cfg.store_host,
                         self._slots_fd, control_r, status_w)
        for slot in (COMMITS, ROWS):
            self._shared[slot] = 0
        self._shared[OLDEST_MS] = -1
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([_ROOT, *filter(None, [os.environ.get("PYTHONPATH")])])}
        try:
            proc = subprocess.Popen([sys.executable, "-m", "connectors.mirror_entry", spec.to_json()], env=env,
                                    pass_fds=(self._slots_fd, control_r, status_w), stdin=subprocess.DEVNULL)
        finally:
            os.close(control_r)
            os.close(status_w)
        self._proc, self._control, self._status = proc, control_w, status_r
        self._status_text, self._spawned_at, self._ready = b"", time.monotonic(), False

    def _poll_status(self) -> None:
        """Read the child's "ready" or start-up error, if it came; end a child that never answers."""
        if self._status < 0 or self._proc is None:
            return
        while select.select([self._status], [], [], 0)[0]:
            chunk = os.read(self._status, 4096)
            self._status_text += chunk
            if not chunk or b"\n" in self._status_text:
                break
        answer = self._status_text.decode("utf-8", "replace").strip()
        if answer == "ready":
            self._ready, self._last_error = True, None
        elif answer or (b"\n" in self._status_text) or self._proc.poll() is not None:
            self._last_error = (f"the mirror process could not open {self._config.table_uri}: "
                                f"{answer or f'it exited with code {self._proc.returncode}'}")
            _log.error("%s", self._last_error)
        elif time.monotonic() - self._spawned_at > _START_WAIT_S:
            self._last_error = f"the mirror process did not open {self._config.table_uri} in {_START_WAIT_S:g} s"
            _log.error("%s; ending it", self._last_error)
            _finish(self._proc)
        else:
            return
        os.close(self._status)
        self._status = -1

    def _end_child(self, *, graceful: bool) -> None:
        proc, control = self._proc, self._control
        self._proc, self._control = None, -1
        status, self._status = self._status, -1
        if proc is None:
            return
        if graceful and proc.poll() is None:
            try:
                os.write(control, b"s")
                proc.wait(_STOP_WAIT_S)
            except (OSError, subprocess.TimeoutExpired):
                _log.error("delta mirror process %d did not stop in %g s; ending it", proc.pid, _STOP_WAIT_S)
        os.close(control)
        if status >= 0:
            os.close(status)
        _finish(proc)

    def _run_watch(self) -> None:
        backoff = 1.0
        while not self._watch.wait(_WATCH_S):  # (Popen.wait(timeout) would poll every few ms)
            self._shared[READABLE] = max(int(self._shared[READABLE]), self._reput_offset())
            with self._lock:
                self._poll_status()
                if self._watch.stopping.is_set() or (self._proc is not None and self._proc.poll() is None):
                    continue
                backoff = self._respawn(1.0 if self._ready else backoff)

    def _respawn(self, backoff: float) -> float:
        """Start a new child after ``backoff`` seconds; returns the next back-off."""
        if self._proc is not None:
            _log.error("delta mirror process %d exited with code %s; starting a new one in %.0f s",
                       self._proc.pid, self._proc.returncode, backoff)
            self._end_child(graceful=False)
        if self._watch.wait(backoff):
            return backoff
        self._spawn()
        self._restarts += 1
        return min(_BACKOFF_MAX_S, backoff * 2)

    # -- store -------------------------------------------------------------

    def _reput_offset(self) -> int:
        return int(self._store.stats()["reput_offset"])  # type: ignore[call-overload]

    def _store_time_at(self, offset: int) -> int:
        """STORE_TIMESTAMP (ms) of the record at ``offset``; 0 when none is there."""
        try:
            head = self._store.read_commitlog(offset, codec.HEADER_SIZE)
        except Exception:  # noqa: BLE001 - deleted or not a record: no age to report
            return 0
        if len(head) < codec.HEADER_SIZE or int.from_bytes(head[4:8], "big") != codec.MESSAGE_MAGIC:
            return 0
        return int.from_bytes(head[56:64], "big")


_ROOT = str(Path(__file__).resolve().parents[1])


def _finish(proc: subprocess.Popen[bytes]) -> None:
    """Make sure ``proc`` is gone: terminate, then kill."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def open_mirror(store: MessageStore, config: MirrorConfig) -> DeltaMirror | MirrorProcess:
    """The mirror for ``config.host``, started."""
    mirror: DeltaMirror | MirrorProcess = (MirrorProcess(store, config) if config.host == "process"
                                           else DeltaMirror(store, config))
    mirror.start()
    return mirror
