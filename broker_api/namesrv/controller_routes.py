"""The controller's HTTP routes on the NameServer app (``sparkmq namesrv --controller``).

    POST /v1/controller/heartbeat              a broker's heartbeat (registers it); answers its role
    POST /v1/controller/alter-sync-state-set   the master shrinks or expands its in-sync set (409 if stale)
    POST /v1/controller/elect                  an operator's election (optionally of one replica)
    GET  /v1/controller/groups                 every broker name: master, epoch, in-sync set, last election
    GET  /v1/controller/groups/{broker_name}

Without ``controller_enabled`` every route answers 404 ``controller_disabled``.
The handlers are plain ``def``: a change is fsynced before the answer, in
FastAPI's thread pool, never on the event loop.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, FastAPI, Request
from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..cluster.controller_state import Heartbeat
from ..errors import ControllerDisabledError, NamesrvAddressError
from ..settings.addresses import ADDRESS_PATTERN, normalize_url
from .controller import ControllerService

__all__ = ["mount_controller"]

_Name = Field(min_length=1, max_length=127, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class HeartbeatBody(_Body):
    """A controller-mode broker's heartbeat (the first one registers the replica)."""

    cluster: str = _Name
    broker_name: str = _Name
    replica_id: str = Field(min_length=1, max_length=64)
    address: str = Field(description="The broker's HTTP base URL, e.g. http://127.0.0.1:8080",
                         json_schema_extra={"pattern": ADDRESS_PATTERN})
    ha_address: str | None = None
    ha_client_address: str | None = None
    max_offset: int = Field(default=0, ge=0)
    epoch: int = Field(default=0, ge=0)
    epoch_start: int | None = Field(default=None, ge=0)
    confirm_offset: int | None = Field(default=None, ge=0, description="a master: its in-sync set's lowest ack")

    @field_validator("address")
    @classmethod
    def _url(cls, value: str) -> str:
        try:
            return normalize_url(value)
        except NamesrvAddressError as exc:
            raise ValueError(str(exc)) from exc


class AlterBody(_Body):
    """The master's new in-sync set, fenced by its epoch and the set's epoch."""

    broker_name: str = _Name
    master: str = Field(min_length=1, max_length=64)
    master_epoch: int = Field(ge=0)
    sync_state_set_epoch: int = Field(ge=0)
    sync_state_set: list[str] = Field(min_length=1, max_length=64)


class ElectBody(_Body):
    broker_name: str = _Name
    replica_id: str | None = None


def mount_controller(app: FastAPI, controller: ControllerService | None) -> None:
    """Add the routes; ``controller`` None answers them all 404 controller_disabled."""
    router = APIRouter(prefix="/v1/controller", tags=["controller"])

    def ctl() -> ControllerService:
        if controller is None:
            raise ControllerDisabledError("this NameServer runs no controller; start it with "
                                          "`sparkmq namesrv --controller` (controller_enabled = true)")
        return controller

    @router.post("/heartbeat")
    def heartbeat(body: HeartbeatBody) -> dict[str, Any]:
        """Record a broker's heartbeat; answers its role, the master's addresses, epoch and in-sync set."""
        return ctl().heartbeat(Heartbeat(**body.model_dump()))

    @router.post("/alter-sync-state-set")
    def alter(body: AlterBody) -> dict[str, Any]:
        """Replace the in-sync set (the master only, at its epoch and the set's current epoch)."""
        return ctl().alter_sync_state_set(body.broker_name, body.master, body.master_epoch,
                                          body.sync_state_set_epoch, set(body.sync_state_set))

    @router.post("/elect")
    def elect(body: ElectBody) -> dict[str, Any]:
        """Elect a new master now from the live in-sync replicas (or the one named)."""
        return ctl().elect(body.broker_name, body.replica_id)

    @router.get("/groups")
    def groups(request: Request) -> dict[str, Any]:
        """Every broker name: master, epoch, in-sync set, replicas, last election (when, why, how long)."""
        return {"groups": ctl().groups()}

    @router.get("/groups/{broker_name}")
    def group(broker_name: str) -> dict[str, Any]:
        """One broker name as in /v1/controller/groups."""
        return ctl().group(broker_name)

    app.include_router(router)
