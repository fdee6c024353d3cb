"""The controller-mode master's in-sync set (SyncStateSet) and its SYNC waits.

Membership, checked at every controller heartbeat (``update``)::

    stays    a member whose HA connection is up and at most max_time_slave_not_catchup_s behind
    joins    a connected replica whose ack reached the confirm offset (the lowest ack of the
             current members; the master's max offset at the previous check when it is alone)
    leaves   anything else

A change goes to the controller (``alter-sync-state-set``), which fences stale
ones; only its answer changes the set.  While an expand is in flight the
waits use the union of the old and new sets, so a write is never confirmed by
fewer replicas than the controller may already count (RocketMQ #5663).

A SYNC write (``confirm``) is SEND_OK once every other member acknowledged its
end offset; SLAVE_NOT_AVAILABLE when the master is alone in the set (stored on
the master only); FLUSH_SLAVE_TIMEOUT when a member did not ack within
``slave_timeout_ms``.  Members' HA connections are matched by the address each
slave reports (``ha_client_address``, see :mod:`.ha_peer`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from store import PutResult

from ..errors import ControllerFencedError, NamesrvError
from .replication import FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT, SEND_OK, SLAVE_NOT_AVAILABLE, end_offset

if TYPE_CHECKING:
    from .roles import ControllerReplication

__all__ = ["InSyncSet"]

log = logging.getLogger(__name__)
_POLL_S = 0.005


class InSyncSet:
    """Kept by the master's heartbeat thread; read by the produce path."""

    def __init__(self, owner: ControllerReplication, min_in_sync: int, max_lag_s: float) -> None:
        self._owner, self._min, self._max_lag = owner, min_in_sync, max_lag_s
        self.accepted: set[str] = set()
        self._pending: set[str] = set()
        self._addresses: dict[str, str | None] = {}  # replica id -> its HA connection's address
        self._last_max: int | None = None  # the master's max offset at the previous check

    def members(self) -> set[str]:
        return self.accepted | self._pending

    def refusal(self) -> str | None:
        n = len(self.accepted)
        if self.accepted and n < self._min:
            return (f"the in-sync set has {n} replica(s), fewer than [ha] min_in_sync_replicas = {self._min} "
                    "(IN_SYNC_REPLICAS_NOT_ENOUGH)")
        return None

    # -- membership --------------------------------------------------------

    def update(self, answer: dict[str, Any]) -> None:
        """Take the controller's set, then shrink or expand it by what the HA connections show."""
        self.accepted = set(answer.get("sync_state_set") or [])
        self._addresses = {r["replica_id"]: r.get("ha_client_address") for r in answer.get("replicas") or []}
        desired = self._desired(answer)
        if desired == self.accepted:
            return
        self._pending = desired - self.accepted
        body = {"broker_name": answer["broker_name"], "master": answer["master"],
                "master_epoch": answer["master_epoch"], "sync_state_set_epoch": answer["sync_state_set_epoch"],
                "sync_state_set": sorted(desired)}
        try:
            new = self._owner.ctl.alter_sync_state_set(body)
            self.accepted = set(new.get("sync_state_set") or [])
            log.info("in-sync set %s -> %s", sorted(answer["sync_state_set"]), sorted(self.accepted))
        except ControllerFencedError as exc:
            log.warning("in-sync set change refused: %s", exc)
        except NamesrvError as exc:
            log.warning("in-sync set change not sent: %s", exc)
        finally:
            self._pending = set()

    def _desired(self, answer: dict[str, Any]) -> set[str]:
        service, me = self._owner.service, answer["master"]
        if service is None:
            return self.accepted
        st = service.status()
        conns = {s.address: s for s in st.slaves}
        others = self.accepted - {me}
        acks = [self._ack_of(r, conns) for r in others]
        confirm = min(acks) if acks else (st.max_offset if self._last_max is None else self._last_max)
        self._last_max = st.max_offset
        out = {me}
        for rid in self._addresses:
            if rid == me:
                continue
            conn = conns.get(self._addresses.get(rid) or "") or _sole(conns, len(self._addresses) == 2)
            if conn is None:
                continue
            if rid in others and conn.lag_seconds <= self._max_lag:
                out.add(rid)
            elif rid not in others and conn.ack_offset >= confirm:
                out.add(rid)
        return out

    def lowest_ack(self, members: set[str], service: Any) -> int:
        """The lowest CommitLog offset ``members`` acknowledged (-1 when one has no connection)."""
        conns = {s.address: s for s in service.status().slaves}
        return min(self._ack_of(r, conns) for r in members)

    def _ack_of(self, rid: str, conns: dict[str, Any]) -> int:
        conn = conns.get(self._addresses.get(rid) or "") or _sole(conns, len(self._addresses) == 2)
        return int(conn.ack_offset) if conn is not None else -1

    # -- SYNC waits --------------------------------------------------------

    async def confirm(self, results: list[PutResult], flushed: bool, waiter: Any) -> str:
        status = SEND_OK if flushed else FLUSH_DISK_TIMEOUT
        owner = self._owner
        service = owner.service
        if owner.role != "sync_master" or not results or service is None:
            return status
        others = self.members() - {str(owner.answer.get("master"))}
        if not others:
            return SLAVE_NOT_AVAILABLE
        end = end_offset(results)
        timeout_s = owner.config.slave_timeout_ms / 1000
        deadline = time.monotonic() + timeout_s
        if waiter is not None and service.transfer.push_to_slave_offset < end:
            if not await waiter.wait(end, timeout_s):
                return FLUSH_SLAVE_TIMEOUT
        while True:
            conns = {s.address: s for s in service.status().slaves}
            if min(self._ack_of(r, conns) for r in others) >= end:
                return status
            if time.monotonic() > deadline:
                return FLUSH_SLAVE_TIMEOUT
            await asyncio.sleep(_POLL_S)


def _sole(conns: dict[str, Any], one_slave: bool) -> Any:
    """Without a reported address (no /proc), a group of one master and one slave uses its only connection."""
    return next(iter(conns.values())) if one_slave and len(conns) == 1 else None
