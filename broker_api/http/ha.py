"""Replication routes and the slave's write guard.

    GET /v1/admin/metadata   topics, consumer offsets, subscription groups and delay progress in one answer,
                             what a slave copies from its master (RocketMQ SlaveSynchronize)

:class:`SlaveGuardMiddleware` sits in front of everything else: on a slave
every write (produce, topic create/delete, offset commits, group switches,
transactions and sink commits) is answered ``403 slave_read_only`` naming
the master, before admission or body reading; with ``[ha] slave_read_enable
= false`` reads are refused the same way.  Health, readiness, metrics,
``/v1/broker``, read-only SQL and this route are always served.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from starlette.types import ASGIApp, Receive, Scope, Send

from ..auth.needs import Cluster
from ..broker import Broker
from ..errors import BrokerError
from .errors import response_for
from .guard import GuardedRoute, requires

__all__ = ["SlaveGuardMiddleware", "metadata_snapshot", "router"]

router = APIRouter(tags=["replication"], route_class=GuardedRoute)

_READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_ALWAYS = frozenset({"/healthz", "/readyz", "/metrics", "/v1/broker", "/v1/admin/metadata", "/v1/sql",
                     "/openapi.json", "/docs"})


def metadata_snapshot(broker: Broker) -> dict[str, Any]:
    """What a slave copies: client topics, every group's committed offsets and switches."""
    max_phy_offset = broker.store.max_phy_offset()  # first: every topic with bytes below it is listed
    offsets = broker.groups.all_offsets()
    return {
        "max_phy_offset": max_phy_offset,
        "broker": broker.settings.broker.name,
        "role": broker.replication.role,
        "topics": [c.to_json() for c in broker.topics.list()],  # with "table" for a table topic
        "offsets": {g: {t: {str(q): o for q, o in sorted(qs.items())} for t, qs in ts.items()}
                    for g, ts in offsets.items()},
        "subscription_groups": broker.groups.all_configs(),
        "delay_progress": broker.delay.progress(),
    }


@router.get("/v1/admin/metadata", summary="Topics, consumer offsets and groups, as a slave copies them")
@requires(Cluster("Admin"))
def metadata(request: Request) -> dict[str, Any]:
    return metadata_snapshot(request.app.state.broker)


class SlaveGuardMiddleware:
    """Refuses writes on a slave (and reads when slave reads are off) before anything else runs."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] not in _ALWAYS:
            broker: Broker = scope["app"].state.broker
            if broker.replication.is_slave:
                try:
                    if scope["method"] in _READ_METHODS:
                        broker.replication.check_readable()
                    else:
                        broker.replication.check_writable()
                except BrokerError as exc:
                    await response_for(exc)(scope, receive, send)
                    return
        await self.app(scope, receive, send)
