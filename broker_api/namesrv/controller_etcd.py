"""The controller's state in etcd (``controller_etcd_endpoints``): a quorum instead of one local file.

etcd (Raft, three or five members) keeps two keys under ``controller_etcd_prefix``:

    <prefix>/state    the whole :meth:`ControllerState.to_dict` document (JSON)
    <prefix>/leader   the id of the controller that may change it, held by an etcd lease

Only the controller holding ``leader`` answers brokers; another one started
on the same prefix waits as a standby and takes over when the leader's lease
(``controller_master_timeout_s``) expires, reading the state first.  Every
change is a compare-and-swap transaction: it succeeds only if ``state`` is
still at the revision this controller last read or wrote *and* ``leader`` is
still this controller, so a deposed or paused controller can never overwrite
an election made by its successor (it reloads instead).

The client is ``etcd3gw`` (etcd's HTTP/JSON gateway, no gRPC build): each
call goes to the endpoint that answered last and moves on to the next one
when it cannot connect, so losing an etcd member, its Raft leader included,
costs one retry.
"""

from __future__ import annotations

import base64
import json
import logging
import math
import secrets
import time
from collections.abc import Callable
from typing import Any, TypeVar

from etcd3gw.client import Etcd3Client
from etcd3gw.exceptions import Etcd3Exception

from ..errors import ControllerFencedError, ControllerUnavailableError

__all__ = ["EtcdStateStore"]

log = logging.getLogger(__name__)
T = TypeVar("T")


def _b64(value: str) -> str:
    return base64.b64encode(value.encode()).decode()


class EtcdStateStore:
    """Load and compare-and-swap the controller's state; hold the leader key."""

    def __init__(self, endpoints: str, prefix: str, lease_s: float, timeout_s: float = 2.0) -> None:
        hosts = [e.strip().removeprefix("http://") for e in endpoints.split(",") if e.strip()]
        self._clients = [Etcd3Client(h.rsplit(":", 1)[0], int(h.rsplit(":", 1)[1]), timeout=timeout_s)
                         for h in hosts]
        self._good = 0
        self.prefix = prefix.rstrip("/")
        self.id = secrets.token_hex(6)
        self._ttl = max(2, math.ceil(lease_s))
        self._lease: int | None = None  # the leader lease's id
        self.renewed = 0.0
        self.revision = 0  # mod revision of <prefix>/state as last read or written (0: absent)

    @property
    def state_key(self) -> str:
        return f"{self.prefix}/state"

    @property
    def leader_key(self) -> str:
        return f"{self.prefix}/leader"

    # -- calls with endpoint failover ----------------------------------------

    def _call(self, fn: Callable[[Etcd3Client], T]) -> T:
        errors = []
        n = len(self._clients)
        for i in range(n):
            k = (self._good + i) % n
            client = self._clients[k]
            try:
                out = fn(client)
            except Etcd3Exception as exc:
                errors.append(f"{client.host}:{client.port}: {type(exc).__name__} {str(exc)[:120]}")
                continue
            self._good = k
            return out
        raise ControllerUnavailableError("no etcd endpoint answered (" + "; ".join(errors) + "); the controller "
                                         "changes nothing until a quorum of etcd members is back")

    # -- state -----------------------------------------------------------------

    def load(self) -> dict[str, Any]:
        """The stored state (empty when none), remembering its revision for the next swap."""
        rows = self._call(lambda c: c.get(self.state_key, metadata=True))
        if not rows:
            self.revision = 0
            return {"groups": {}}
        value, meta = rows[0]
        self.revision = int(meta["mod_revision"])
        return dict(json.loads(value))

    def save(self, data: dict[str, Any]) -> None:
        """Swap in ``data``; raises ControllerFencedError when another controller changed it or leads now."""
        compare = [{"key": _b64(self.state_key), "target": "MOD", "result": "EQUAL",
                    "mod_revision": self.revision},
                   {"key": _b64(self.leader_key), "target": "VALUE", "result": "EQUAL", "value": _b64(self.id)}]
        put = {"request_put": {"key": _b64(self.state_key), "value": _b64(json.dumps(data))}}
        answer = self._call(lambda c: c.transaction({"compare": compare, "success": [put], "failure": []}))
        if not answer.get("succeeded"):
            raise ControllerFencedError("the controller state in etcd was changed by another controller (or this "
                                        "one no longer leads): reloading it")
        self.revision = int(answer["header"]["revision"])

    # -- leadership --------------------------------------------------------------

    def lead(self) -> bool:
        """Take or keep the leader key; True while this controller holds it."""
        now = time.monotonic()
        lease = self._lease
        if lease is not None and now - self.renewed < self._ttl / 3:
            return True
        if lease is not None:
            ttl = self._call(lambda c: c.post(c.get_url("/lease/keepalive"), json={"ID": lease}))
            if int(ttl.get("result", {}).get("TTL", -1)) > 0:
                self.renewed = now
                return True
            log.warning("controller: the etcd leader lease expired; standing by")
            self._lease = None
        return self._campaign(now)

    def _campaign(self, now: float) -> bool:
        lease = int(self._call(lambda c: c.post(c.get_url("/lease/grant"), json={"TTL": self._ttl}))["ID"])
        key = _b64(self.leader_key)
        txn = {"compare": [{"key": key, "target": "CREATE", "result": "EQUAL", "create_revision": 0}],
               "success": [{"request_put": {"key": key, "value": _b64(self.id), "lease": lease}}],
               "failure": []}
        if self._call(lambda c: c.transaction(txn)).get("succeeded"):
            self._lease, self.renewed = lease, now
            log.warning("controller: %s leads through etcd (lease %d s)", self.id, self._ttl)
            return True
        self._revoke(lease)
        return False

    def _revoke(self, lease: int) -> None:
        self._call(lambda c: c.post(c.get_url("/kv/lease/revoke"), json={"ID": lease}))

    def resign(self) -> None:
        """Give the leader key up at once (a clean stop): a standby takes over without waiting."""
        lease, self._lease = self._lease, None
        if lease is not None:
            try:
                self._revoke(lease)
            except ControllerUnavailableError as exc:
                log.warning("controller: could not resign: %s", exc)
