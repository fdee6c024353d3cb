"""Controller mode on the broker (RocketMQ 5's ReplicasManager): the controller assigns the role.

``sparkmq serve --broker-name bk --controller ADDR`` gives no role and no
broker id.  :class:`ControllerReplication` replaces the classic
:class:`Replication`:

* ``prepare()``, before the store opens: heartbeat until a controller
  answers.  A slave compares its epoch file with the group's epochs and cuts
  its CommitLog at the consistent point (``store.ha.epoch_file``,
  ``store.ha.truncate``): a returning old master loses only what it alone had.
* a thread heartbeats every ``controller_heartbeat_interval_s`` with the
  store's max offset and epoch, and applies the answer: a slave follows the
  master's HA address; a slave named master is promoted in place (HA client
  stopped, HA port opened, ``<epoch, max offset>`` appended to the epoch
  file); a master told of a newer master is fenced and, when its log is a
  prefix of the new master's, becomes its slave in place.
* fencing: a master refuses writes (503 ``master_fenced``) when a newer epoch
  exists and when its in-sync set is smaller than ``min_in_sync_replicas``.
  An async_master also stops when it has not heard from the controller for
  its lease (the controller's master timeout minus one heartbeat: it stops
  before anyone can be elected).  A sync_master needs no lease: its in-sync
  set changes only through the controller, so a master cut off from it keeps
  waiting for its old slaves (FLUSH_SLAVE_TIMEOUT, never SEND_OK) and a
  controller restart costs no write.
* the in-sync set: the master keeps it by its HA connections (a slave caught
  up joins, one silent or more than ``max_time_slave_not_catchup_s`` behind
  leaves) through the controller, which fences stale changes; while an expand
  is in flight waits use the union (RocketMQ #5663).  :mod:`.in_sync` holds
  that logic and the SYNC waits.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from store import MessageStore, PutResult
from store.ha.epoch_file import EpochFile, truncate_point
from store.ha.truncate import truncate_commitlog

from ..errors import MasterFencedError, NamesrvError, NotReadyError
from ..settings.broker import BrokerSettings
from .controller_client import ControllerClient, replica_id
from .ha_peer import local_ha_address
from .in_sync import InSyncSet
from .replication import Replication

__all__ = ["ControllerReplication"]

log = logging.getLogger(__name__)

RoleListener = Callable[[str, int], None]  # (new role, broker id)
_FIRST_ANSWER_S = 60.0


class ControllerReplication(Replication):
    """Replication whose role the controller decides; see the module docstring."""

    def __init__(self, settings: BrokerSettings, store: MessageStore) -> None:
        ha = settings.ha
        self.flavour = ha.role if ha.role in ("async_master", "sync_master") else "sync_master"
        super().__init__(settings, store)
        self.role = "pending"
        self._settings, self._interval = settings, ha.controller_heartbeat_interval_s
        self.ctl = ControllerClient(ha.controller)
        self.replica_id = replica_id(settings.meta_path)
        self.epochs = EpochFile(settings.store_config().root / "epochs")
        self.address = f"{settings.scheme}://{settings.advertised_host()}:{settings.broker.port}"
        self.answer: dict[str, Any] = {}
        self.broker_id = -1
        self.in_sync = InSyncSet(self, ha.min_in_sync_replicas, ha.max_time_slave_not_catchup_s)
        self.fenced: str | None = None
        self.on_role_change: RoleListener | None = None
        self._last_ok = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._switch = threading.Lock()
        self._stop_hb = threading.Event()
        self._thread: threading.Thread | None = None

    # -- roles ---------------------------------------------------------------

    @property
    def is_master(self) -> bool:
        return self.role == self.flavour

    @property
    def is_slave(self) -> bool:
        """True when this broker refuses writes (a slave, pending, or a fenced master): the HTTP guard asks
        :meth:`check_writable` then.  During ``start()`` of a master (no HA service yet) only the role counts."""
        if not self.is_master:
            return True
        return getattr(self, "service", None) is not None and self.write_refusal() is not None

    def write_refusal(self) -> str | None:
        """Why this master may not take a write now, or None."""
        if self.fenced:
            return self.fenced
        lease = max(0.5, float(self.answer.get("master_timeout_s", 3.0)) - self._interval)
        silent = time.monotonic() - self._last_ok
        if self.flavour == "async_master" and silent > lease:
            return (f"this master has not reached its controller for {silent:.1f} s (lease {lease:.1f} s): "
                    "another broker may have been elected")
        return self.in_sync.refusal()

    def check_writable(self) -> None:
        if self.role == "pending":
            raise NotReadyError("this broker waits for its controller to assign its role")
        if self.is_master:
            why = self.write_refusal()
            if why:
                raise MasterFencedError(f"writes refused: {why}; retry at the master the NameServer names")
            return
        super().check_writable()

    def follow(self, registrar: Any) -> None:
        """The controller names the master, not the NameServer's registration answer."""

    # -- before the store opens ----------------------------------------------

    def prepare(self) -> None:
        """Learn the role; a slave cuts what only it has.  Raises NamesrvUnavailableError after a minute."""
        self.epochs.load()
        deadline = time.monotonic() + _FIRST_ANSWER_S
        while True:
            try:
                answer = self._heartbeat(max_offset=0)
                if answer["role"] == "master" or self._master_epoch_known(answer):
                    break
            except NamesrvError as exc:
                if time.monotonic() > deadline:
                    raise
                log.warning("controller: %s; retrying", exc)
            if time.monotonic() > deadline:
                raise NotReadyError("the new master has not reported its epoch to the controller in time")
            time.sleep(self._interval)
        if answer["role"] == "slave":
            self._cut_to_master(answer)
        self.role = self.flavour if answer["role"] == "master" else "slave"
        self._apply_addresses(answer)
        log.info("controller: starting as %s of %s (id %d, epoch %d)", self.role, self.answer.get("broker_name"),
                 self.broker_id, answer["master_epoch"])

    def _master_epoch_known(self, answer: dict[str, Any]) -> bool:
        epochs = answer.get("epochs") or []
        return bool(epochs) and epochs[-1][0] == answer["master_epoch"]

    def _cut_to_master(self, answer: dict[str, Any]) -> None:
        master = [(int(e), int(s)) for e, s in answer.get("epochs") or []]
        point = truncate_point(self.epochs.entries, master)
        if point is None:
            return
        cfg = self._settings.store_config()
        cut = truncate_commitlog(cfg.root, cfg.commitlog_segment_bytes, point)
        self.epochs.cut(point)
        if cut:
            log.warning("controller: this broker's log diverged from the master's after offset %d (epochs %s vs "
                        "%s): cut there; what was past it was never acknowledged by the in-sync set",
                        point, self.epochs.entries, master)

    # -- lifecycle -------------------------------------------------------------

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        super().start(loop)
        if self.is_master:
            self._open_epoch()
        self._store.limit_to_confirm_offset(self.confirm_offset)
        self._last_ok = time.monotonic()
        self._stop_hb.clear()
        self._thread = threading.Thread(target=self._run, name="sparkmq-controller-heartbeat", daemon=True)
        self._thread.start()

    def confirm_offset(self) -> int:
        """Where consumers must stop reading (the store's dispatch stops there): a master, the lowest ack of
        its in-sync set (its own end when alone); a slave, the master's as the controller relays it."""
        if not self.is_master and self.role != "slave":
            return 0
        if self.role == "slave":
            return int(self.answer.get("confirm_offset") or 0)
        top = self._store.max_phy_offset()
        service = self.service
        others = self.in_sync.members() - {str(self.answer.get("master"))}
        if service is None or not others:
            return top
        return max(0, min(top, self.in_sync.lowest_ack(others, service)))  # -1: a member not connected

    def stop(self) -> None:
        self._store.limit_to_confirm_offset(None)
        self._stop_hb.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        self._thread = None
        super().stop()

    def _run(self) -> None:
        while not self._stop_hb.wait(self._interval):
            try:
                self.tick()
            except Exception:  # noqa: BLE001 - one bad round must not end the heartbeat
                log.exception("controller: heartbeat round failed")

    def tick(self) -> None:
        """One heartbeat and what its answer asks (also called right after a role change)."""
        sent = time.monotonic()
        try:
            answer = self._heartbeat(self._store.max_phy_offset())
        except NamesrvError as exc:
            log.warning("controller: heartbeat failed: %s", exc)
            return
        with self._switch:
            self._apply(answer)
            if answer["role"] == "master":
                # the lease runs from when the heartbeat left, and is renewed only once the answer is applied:
                # an answer naming another master fences this one before any write can see a fresh lease
                self._last_ok = sent
        if self.role == "slave":
            self._store.reput.notify()  # the master's confirm offset may have moved

    def _heartbeat(self, max_offset: int) -> dict[str, Any]:
        s = self._settings
        master = self.is_master
        body = {"cluster": s.broker.cluster, "broker_name": s.broker.name, "replica_id": self.replica_id,
                "address": self.address, "ha_address": self.ha_address(s.advertised_host()),
                "ha_client_address": None if master else local_ha_address(self.answer.get("master_ha_address")),
                "max_offset": max_offset, "epoch": self.epochs.last_epoch,
                "epoch_start": self.epochs.start_of(self.epochs.last_epoch) if master else None,
                "confirm_offset": self.confirm_offset() if master and self.role != "pending" else None}
        answer = self.ctl.heartbeat(body)
        self.answer = answer
        return answer

    # -- applying an answer ------------------------------------------------------

    def _apply(self, answer: dict[str, Any]) -> None:
        epoch = int(answer["master_epoch"])
        if answer["role"] == "master":
            if self.role == "slave":
                self._promote(epoch)
            if self.fenced and self.epochs.last_epoch == epoch:
                self.fenced = None
            self.in_sync.update(answer)
        elif self.is_master:
            self._demote(answer)
        else:
            self._follow(answer)
        self._apply_addresses(answer)

    def _apply_addresses(self, answer: dict[str, Any]) -> None:
        self.master_url = (answer.get("master_address") or "").rstrip("/") or None
        broker_id = int(answer.get("broker_id", -1))
        if broker_id != self.broker_id:
            self.broker_id = broker_id
            if self.on_role_change is not None and self.role != "pending":
                self.on_role_change(self.role, broker_id)

    def _follow(self, answer: dict[str, Any]) -> None:
        client = self.client
        ha = answer.get("master_ha_address")
        if client is not None and ha and ha != client.master_address:
            client.update_master_address(str(ha))
        if client is not None and client.connected and client.error is None and self._master_epoch_known(answer):
            self.epochs.adopt(answer["epochs"], self._store.max_phy_offset())

    def _promote(self, epoch: int) -> None:
        self._restart_as(self.flavour, epoch)
        log.warning("controller: promoted to master at epoch %d at offset %d", epoch, self._store.max_phy_offset())

    def _open_epoch(self, epoch: int | None = None) -> None:
        epoch = int(self.answer.get("master_epoch", 0)) if epoch is None else epoch
        if epoch > self.epochs.last_epoch:
            self.epochs.append(epoch, self._store.max_phy_offset())

    def _demote(self, answer: dict[str, Any]) -> None:
        """A newer master exists: stop writing at once; become its slave when our log is a prefix of its."""
        epoch = int(answer["master_epoch"])
        self.fenced = f"the controller elected another master at epoch {epoch} (this one wrote epoch " \
                      f"{self.epochs.last_epoch})"
        if not self._master_epoch_known(answer):
            return
        master = [(int(e), int(s)) for e, s in answer["epochs"]]
        try:
            point = truncate_point(self.epochs.entries, master)
        except Exception as exc:  # noqa: BLE001 - EpochMismatchError: stay fenced, say why
            log.error("controller: fenced and cannot rejoin: %s", exc)
            return
        if point is not None and point < self._store.max_phy_offset():
            log.error("controller: fenced; this log holds %d bytes past offset %d the new master does not have: "
                      "restart the broker to cut them and rejoin as a slave", self._store.max_phy_offset() - point,
                      point)
            return
        log.warning("controller: demoted to slave of epoch %d", epoch)
        self._restart_as("slave")
        self.fenced = None

    def _restart_as(self, role: str, epoch: int | None = None) -> None:
        """Stop the old role's HA part, then (a master) open the epoch at the log's end before any write."""
        assert self._loop is not None
        Replication.stop(self)
        self.service = self.client = None
        if epoch is not None:
            self._open_epoch(epoch)  # nothing is appended before this: the HA client is stopped, writes closed
        self.role = role
        Replication.start(self, self._loop)
        if self.client is not None and self.answer.get("master_ha_address"):
            self.client.update_master_address(str(self.answer["master_ha_address"]))

    # -- produce ---------------------------------------------------------------

    async def confirm(self, results: list[PutResult], flushed: bool = True) -> str:
        """SYNC: every in-sync replica holds it (SEND_OK), the master alone (SLAVE_NOT_AVAILABLE), or a member
        did not ack in time (FLUSH_SLAVE_TIMEOUT).  ASYNC: SEND_OK."""
        status = await self.in_sync.confirm(results, flushed, self._waiter)
        self.statuses.inc(status=status)
        return status

    def status(self) -> dict[str, Any]:
        out = super().status()
        a = self.answer
        out["controller"] = {"replica_id": self.replica_id, "broker_id": self.broker_id,
                             "master_epoch": a.get("master_epoch"), "master": a.get("master"),
                             "sync_state_set": sorted(self.in_sync.members()), "epochs": self.epochs.entries,
                             "fenced": self.write_refusal() if self.is_master else None,
                             "last_election": a.get("last_election")}
        return out

