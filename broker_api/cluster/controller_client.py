"""The broker's client of the controller (``[ha] controller``, ``--controller ADDR[,ADDR...]``).

It asks the addresses in turn, starting with the last one that answered
(only NameServers started with ``--controller`` run one; the others answer
404 ``controller_disabled`` and are skipped).  A broker's replica id is a
random hex string kept in ``<meta>/controller-replica-id``: it names this
data directory to the controller across restarts and address changes.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import httpx

from ..errors import ControllerFencedError, NamesrvUnavailableError
from ..settings.addresses import parse_namesrv_addrs

__all__ = ["ControllerClient", "replica_id"]


def replica_id(meta_dir: Path) -> str:
    """This data directory's replica id, created on first use."""
    path = meta_dir / "controller-replica-id"
    if path.exists():
        value = path.read_text().strip()
        if value:
            return value
    meta_dir.mkdir(parents=True, exist_ok=True)
    value = secrets.token_hex(8)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(value + "\n")
    tmp.replace(path)
    return value


class ControllerClient:
    """POSTs to ``/v1/controller/...`` on the first controller that answers."""

    def __init__(self, addrs: str, timeout_s: float = 2.0, **http_options: Any) -> None:
        self.addrs = parse_namesrv_addrs(addrs.replace(",", ";"))
        self._http = httpx.Client(timeout=timeout_s, **http_options)
        self._good = 0

    def close(self) -> None:
        self._http.close()

    def heartbeat(self, body: dict[str, Any]) -> dict[str, Any]:
        """Report this broker; its answer says the role, the master, the epoch and the in-sync set."""
        return self._post("/v1/controller/heartbeat", body)

    def alter_sync_state_set(self, body: dict[str, Any]) -> dict[str, Any]:
        """Raises ControllerFencedError when this broker is no longer the master or its set epoch is stale."""
        return self._post("/v1/controller/alter-sync-state-set", body)

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        errors = []
        n = len(self.addrs)
        for i in range(n):
            k = (self._good + i) % n
            url = self.addrs[k] + path
            try:
                r = self._http.post(url, json=body)
            except httpx.HTTPError as exc:
                errors.append(f"{self.addrs[k]}: {type(exc).__name__}")
                continue
            if r.status_code == 409:
                raise ControllerFencedError(_message(r))
            if r.status_code != 200:
                errors.append(f"{self.addrs[k]}: {r.status_code} {_message(r)}")
                continue
            self._good = k
            return dict(r.json())
        raise NamesrvUnavailableError("no controller answered (" + "; ".join(errors) + "); start one with "
                                      "`sparkmq namesrv --controller` and list it in --controller")


def _message(r: httpx.Response) -> str:
    try:
        return str(r.json().get("message", r.text))
    except ValueError:
        return r.text[:200]
