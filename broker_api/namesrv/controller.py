"""The controller embedded in the NameServer (``sparkmq namesrv --controller``).

It wraps the pure :class:`~broker_api.cluster.controller_state.ControllerState`
with a lock, a local state file and a scan thread:

* every change (a new replica, an election, an in-sync set change, a new
  epoch) is written to ``controller_state_file`` before the request is
  answered (temp file, fsync, rename: :func:`broker_api.jsonfile.write_json_atomic`),
  so a controller restart loses nothing it acknowledged;
* the scan thread checks masters every ``controller_scan_interval_s`` and
  elects when one is silent for ``controller_master_timeout_s``; the
  NameServer's route table then names the new master at once
  (:meth:`RouteTable.set_master`), before the new master even re-registers.

With ``controller_etcd_endpoints`` the state lives in etcd instead
(:mod:`.controller_etcd`): controllers on one prefix elect a leader through
an etcd lease, the others answer 503 ``controller_unavailable`` (brokers move
on to the next address) and take over when the lease expires; every change
is a compare-and-swap.  No answer leaves a controller before the change it
carries is stored: a failed store marks the state dirty and every request
retries it first.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..cluster.controller_state import ControllerState, Election, Heartbeat
from ..errors import ControllerFencedError, ControllerUnavailableError
from ..jsonfile import read_json, write_json_atomic
from ..settings.namesrv import NamesrvSettings

if TYPE_CHECKING:
    from .controller_etcd import EtcdStateStore

__all__ = ["ControllerService"]

log = logging.getLogger(__name__)

MasterChanged = Callable[[str, str], None]  # (broker name, new master's HTTP address)


class ControllerService:
    """Thread-safe controller: heartbeats, in-sync set changes, elections, a persisted state."""

    def __init__(self, settings: NamesrvSettings, on_master_change: MasterChanged | None = None) -> None:
        self.state = ControllerState(settings.controller_master_timeout_s,
                                     settings.controller_allow_unclean_election)
        self.path = Path(settings.controller_state_file)
        self._interval = settings.controller_scan_interval_s
        self._on_master_change = on_master_change
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.etcd: EtcdStateStore | None = None
        if settings.controller_etcd_endpoints:
            from .controller_etcd import EtcdStateStore  # etcd3gw only when etcd is asked for

            self.etcd = EtcdStateStore(settings.controller_etcd_endpoints, settings.controller_etcd_prefix,
                                       settings.controller_master_timeout_s)
        self.leading = self.etcd is None
        self._dirty = False

    # -- lifecycle ---------------------------------------------------------

    def start(self) -> None:
        """Load the state file and start the scan thread."""
        if self._thread is not None:
            return
        if self.etcd is None:
            with self._lock:
                self.state.load(read_json(self.path, {"groups": {}}), time.monotonic())
            log.info("controller: %d broker name(s) loaded from %s", len(self.state.groups), self.path)
        else:
            self._lead()
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="sparkmq-controller-scan", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the scan thread; safe twice."""
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join(timeout=5)
        self._thread = None
        if self.etcd is not None:
            self.etcd.resign()
            self.leading = False

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                if self.etcd is not None:
                    self._lead()
                if self.leading:
                    self.scan()
            except Exception:  # noqa: BLE001 - one bad round must not end the thread
                log.exception("controller: scan failed")

    # -- requests ----------------------------------------------------------

    def heartbeat(self, hb: Heartbeat) -> dict[str, Any]:
        """Record a broker's heartbeat (it registers on the first) and answer its role."""
        with self._lock:
            self._ready()
            now = time.monotonic()
            before = self.state.groups.get(hb.broker_name)
            old_master = before.master if before else None
            if self.state.heartbeat(hb, now):
                self._save()
            group = self.state.group(hb.broker_name)
            answer = self.state.answer(hb.broker_name, hb.replica_id, now)
        if group.master != old_master and answer["master_address"]:
            self._master_changed(hb.broker_name, answer["master_address"])
        return answer

    def alter_sync_state_set(self, name: str, master: str, master_epoch: int, sss_epoch: int,
                             new_set: set[str]) -> dict[str, Any]:
        """The master's shrink or expand; raises ControllerFencedError on a stale request."""
        with self._lock:
            self._ready()
            group = self.state.alter_sync_state_set(name, master, master_epoch, sss_epoch, new_set)
            self._save()
            log.info("controller: %s in-sync set is now %s (set epoch %d)", name, sorted(group.sync_state_set),
                     group.sync_state_set_epoch)
            return self.state.answer(name, master, time.monotonic())

    def elect(self, name: str, preferred: str | None = None) -> dict[str, Any]:
        """An operator's election (``POST /v1/controller/elect``)."""
        with self._lock:
            self._ready()
            election = self.state.elect(name, time.monotonic(), "requested by an operator", preferred)
            if election.new_master is not None:
                self._save()
            view = self.state.view(self.state.group(name), time.monotonic())
        self._announce(name, election)
        return view

    def scan(self) -> list[Election]:
        """Elect for every silent master; called by the thread (and tests)."""
        with self._lock:
            self._ready()
            before = {n: g.failed_election for n, g in self.state.groups.items()}
            elections = self.state.scan(time.monotonic())
            failed = [g for n, g in self.state.groups.items()
                      if g.failed_election is not None and g.failed_election is not before[n]]
            if elections or failed:
                self._save()
            names = [(g.name, g.last_election) for g in self.state.groups.values() if g.last_election in elections]
        for group in failed:
            log.error("controller: %s: %s", group.name, group.failed_election.reason if group.failed_election else "")
        for name, election in names:
            if election is not None:
                self._announce(name, election)
        return elections

    def groups(self) -> list[dict[str, Any]]:
        with self._lock:
            self._ready()
            now = time.monotonic()
            return [self.state.view(g, now) for _, g in sorted(self.state.groups.items())]

    def group(self, name: str) -> dict[str, Any]:
        with self._lock:
            self._ready()
            return self.state.view(self.state.group(name), time.monotonic())

    # -- internals ---------------------------------------------------------

    def _save(self) -> None:
        if self.etcd is None:
            write_json_atomic(self.path, self.state.to_dict())
            return
        self._dirty = True
        try:
            self.etcd.save(self.state.to_dict())
        except ControllerFencedError as exc:
            self.leading = False
            raise ControllerUnavailableError(f"{exc}; this controller stands by") from exc
        self._dirty = False

    def _ready(self) -> None:
        """Called under the lock before a request: a standby refuses; a dirty state is stored first."""
        if not self.leading:
            raise ControllerUnavailableError("this controller stands by: another one leads through etcd "
                                             "(or etcd has no quorum); ask the next --controller address")
        if self._dirty:
            self._save()

    def _lead(self) -> None:
        """etcd only: take, keep or lose the leader key; a new leader reads the state first."""
        assert self.etcd is not None
        try:
            leads = self.etcd.lead()
        except ControllerUnavailableError as exc:
            log.warning("controller: %s", exc)
            leads = self.leading and time.monotonic() - self.etcd.renewed < self.state.master_timeout_s / 2
        with self._lock:
            if leads and not self.leading:
                self.state.load(self.etcd.load(), time.monotonic())
                self._dirty = False
                log.warning("controller: leading; %d broker name(s) read from etcd", len(self.state.groups))
            self.leading = leads

    def _announce(self, name: str, election: Election) -> None:
        if election.new_master is None:
            return
        with self._lock:
            rep = self.state.group(name).replicas.get(election.new_master)
            address = rep.address if rep else None
        log.warning("controller: %s elected %s (%s) as master at epoch %d (%s; old master %s silent %d ms)",
                    name, election.new_master, address, election.epoch, election.reason, election.old_master,
                    election.master_silent_ms)
        if address:
            self._master_changed(name, address)

    def _master_changed(self, name: str, address: str) -> None:
        if self._on_master_change is not None:
            self._on_master_change(name, address)
