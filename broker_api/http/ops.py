"""Operations: broker info, health, readiness, Prometheus metrics, retention.

``control_router`` holds the four control routes (health, readiness, broker
info, metrics); they skip admission on the main port and are also served by
the control listener (:mod:`broker_api.http.control`) on a thread of its own.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import Response

from ..auth.needs import CONTROL, OPEN, Cluster
from ..broker import Broker
from ..errors import NotReadyError
from ..metrics import render_gauge
from .errors import error_response
from .guard import GuardedRoute, requires
from .schemas import JsonBool, RequestBody

__all__ = ["control_router", "router"]

router = APIRouter(tags=["operations"], route_class=GuardedRoute)
control_router = APIRouter(tags=["operations"], route_class=GuardedRoute)


class RetentionRequest(RequestBody):
    """Body of POST /v1/admin/retention."""

    force: JsonBool = False


def _broker(request: Request) -> Broker:
    return request.app.state.broker  # type: ignore[no-any-return]


@control_router.get("/healthz", summary="Liveness (200 while the process serves, even when overloaded)")
@requires(OPEN)
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@control_router.get("/readyz", summary="Readiness: store open, services running, not overloaded")
@requires(CONTROL)
async def readyz(request: Request) -> Any:
    broker = _broker(request)
    if not broker.ready:
        raise NotReadyError("the broker is starting or stopping; retry shortly")
    overload = broker.admission.overload_reason()
    if overload is not None:
        raise NotReadyError(f"overloaded: {overload}; send less or retry shortly",
                            retry_after_s=broker.settings.fast_failure.retry_after_s)
    full = broker.disk.reason()  # the same predicate as produce's 507 (protection/disk.py)
    if full is not None:
        return error_response(503, "disk_full", f"not ready: {full}; free disk space or run POST "
                              "/v1/admin/retention", {"Retry-After": "5"})
    return {"status": "ready"}


QUARANTINE_SHOWN = 100  # /v1/broker lists the first quarantined records; quarantined_count counts them all


@control_router.get("/v1/broker", summary="Broker identity and store statistics")
@requires(CONTROL)
def broker_info(request: Request) -> dict[str, Any]:
    broker = _broker(request)
    s = broker.settings
    stats = broker.store.stats()
    disk = broker.disk.snapshot()
    quarantined = broker.store.quarantined()
    stats.update(disk_full=disk["disk_full"], disk_used_ratio=disk["disk_used_ratio"])
    return {
        "name": s.broker.name,
        "cluster": s.broker.cluster,
        "broker_id": s.broker.broker_id,
        "role": s.broker.role,
        "address": broker.address,
        "namesrv_addr": s.broker.namesrv_addr,
        "data_dir": str(s.data_path.resolve()),
        "flush_mode": s.store.flush_mode,
        "store": stats,
        "disk_full": disk["disk_full"],
        "disk": disk,
        "dispatch_behind_bytes": stats.get("dispatch_behind_bytes"),
        "topics": len(broker.topics.list()),
        "groups": len(broker.groups.names()),
        "open_transactions": broker.transactions.open_count(),
        "parked_pulls": broker.waiters.parked() if broker.waiters else 0,
        "fast_failures": {"queue_wait": broker.gate.rejected_wait, "busy": broker.gate.rejected_busy},
        "last_recovery": stats.get("recovery"),
        "quarantined_count": len(quarantined),  # damaged records recovery kept (store verify names them all)
        "quarantined": [r.as_dict() for r in quarantined[:QUARANTINE_SHOWN]],
        "admission": broker.admission.snapshot(),
        "admin_address": broker.admin_address,
        "event_loop_lag_ms": round(broker.gate.loop_lag_ms, 3),
        "mirror": broker.mirror_lag(),
        "tiered": broker.tiered.stats() if broker.tiered else None,  # local vs remote bytes, upload lag, cache
        "tables": broker.tables.statuses(),  # per table topic: rows, dlq_rows, lag_bytes, lag_seconds, ...
        "namesrv": broker.registrar.status() if broker.registrar else None,
        "ha": {**broker.replication.status(),
               "metadata_sync": broker.slave_sync.status() if broker.slave_sync else None},
    }


@router.post("/v1/admin/retention", summary="Run CommitLog retention now")
@requires(Cluster("Admin"))
def run_retention(request: Request, body: RetentionRequest | None = None) -> dict[str, int]:
    """``force`` deletes every CommitLog segment but the active one, whatever its age."""
    force = body.force if body is not None else False
    return {"deleted_segments": _broker(request).store.run_retention(force=force)}


@control_router.get("/metrics", summary="Prometheus metrics", response_class=Response)
@requires(CONTROL)
def metrics(request: Request) -> Response:
    broker = _broker(request)
    lines = broker.metrics.render()
    lines += _admission_gauges(broker)
    lines += _queue_gauges(broker)
    lines += _store_gauges(broker)
    lines += _tiered_gauges(broker)
    lines += broker.replication.metric_lines()
    lines += broker.pop.metric_lines()
    lines += broker.delay.metric_lines()
    lines += list(broker.checkback.checks.render())
    lines += broker.tables.metric_lines()
    return Response("\n".join(lines) + "\n", media_type="text/plain; version=0.0.4")


def _admission_gauges(broker: Broker) -> list[str]:
    snap = broker.admission.snapshot()
    lines = render_gauge("sparkmq_requests_in_flight", "Requests admitted and not yet answered, by route class "
                         "(parked long polls excluded).", [({"route": k}, float(v["inflight"])) for k, v in snap.items()])
    lines += render_gauge("sparkmq_request_bytes_in_flight", "Request body bytes admitted, by route class.",
                          [({"route": k}, float(v["inflight_bytes"])) for k, v in snap.items()])
    lines += render_gauge("sparkmq_requests_waiting", "Requests waiting for an admission slot, by route class.",
                          [({"route": k}, float(v["waiting"])) for k, v in snap.items()])
    return lines + list(broker.admission.waited.render())


def _queue_gauges(broker: Broker) -> list[str]:
    depth, lag = [], []
    for cfg in broker.topics.list():
        for qid in range(cfg.queues):
            lo, hi = broker.queue_range(cfg.name, qid)
            depth.append(({"topic": cfg.name, "queue": str(qid)}, float(hi - lo)))
    for group in broker.groups.names():
        for row in broker.group_lag(group):
            labels = {"group": group, "topic": row["topic"], "queue": str(row["queue_id"])}
            lag.append((labels, float(row["lag"])))
    return (render_gauge("sparkmq_queue_depth_messages", "Readable messages per queue (max - min offset).", depth)
            + render_gauge("sparkmq_consumer_lag_messages", "Max offset minus committed offset.", lag))


def _store_gauges(broker: Broker) -> list[str]:
    lines: list[str] = []
    for key, value in sorted(broker.store.stats().items()):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            lines += render_gauge(f"sparkmq_store_{key}", f"Store statistic {key}.", [({}, float(value))])
    lines += [
        "# HELP sparkmq_fast_failures_total Writes answered 503 by fast failure, by reason.",
        "# TYPE sparkmq_fast_failures_total counter",
        f'sparkmq_fast_failures_total{{reason="queue_wait"}} {broker.gate.rejected_wait}',
        f'sparkmq_fast_failures_total{{reason="store_busy"}} {broker.gate.rejected_busy}',
    ]
    lines += render_gauge("sparkmq_event_loop_lag_seconds", "Event loop lag (50 ms heartbeat).",
                          [({}, broker.gate.loop_lag_ms / 1000)])
    lines += render_gauge("sparkmq_parked_pulls", "Long polls currently waiting.",
                          [({}, float(broker.waiters.parked() if broker.waiters else 0))])
    lines += render_gauge("sparkmq_open_transactions", "Transactions neither committed nor rolled back.",
                          [({}, float(broker.transactions.open_count()))])
    lag = broker.mirror_lag()
    if lag is not None:
        lines += render_gauge("sparkmq_mirror_lag_bytes", "CommitLog bytes not yet mirrored to Delta.",
                              [({}, float(lag.get("lag_bytes", 0)))])
        lines += render_gauge("sparkmq_mirror_lag_seconds", "Age of the oldest unmirrored message.",
                              [({}, float(lag.get("lag_seconds", 0)))])
    return lines


def _tiered_gauges(broker: Broker) -> list[str]:
    """The tiered CommitLog's numbers (local vs remote bytes, upload lag, cache hits) as sparkmq_tiered_*."""
    if broker.tiered is None:
        return []
    lines: list[str] = []
    for key, value in sorted(broker.tiered.stats().items()):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            lines += render_gauge(f"sparkmq_tiered_{key}", f"Tiered storage statistic {key}.", [({}, float(value))])
    return lines
