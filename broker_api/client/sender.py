"""Produce over a routed cluster: spread, wait or retry elsewhere, and account for every message.

Placement (client/placement.py keeps keys stable across route changes)::

    keyed message           -> known slots[crc32(first key) % len]     fixed: per-key order
    explicit queue_id       -> the broker picked for it first           fixed: the asked queue
    neither                 -> round robin over the healthy slots       free: may move

A fixed message whose broker name has no master, or whose master failed,
*waits* for it: the broker is tried again when its retry delay ends (a
cheap probe first), the route is looked up again for a new master, until
``send_timeout_s``; then it fails naming the broker.  It never goes to
another broker name unless ``move_keys`` (``keyed_failover="move"``), and
then with a warning.  A free message whose broker fails in a way that
proves nothing was stored (refused connection, 503 busy) is sent again to
another broker, at most ``retries`` times; a failure that leaves the
outcome unknown (a timeout after sending) is never resent.  The caller gets
every message's outcome, so nothing stored is left unacknowledged.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import BrokerError
from .placement import KnownBrokers, Slot, live_slot
from .results import BrokerUnreachableError, SendError, SendResult, retryable
from .routing import FaultTracker, Route, short_reason

__all__ = ["SendPlan", "first_key", "send_routed"]

log = logging.getLogger(__name__)

Send = Callable[[str, str, list[dict[str, Any]]], list[SendResult]]
Placed = list[tuple[int, int | None]]
_TICK_S = 0.05
_REFRESH_S = 0.5


@dataclass
class SendPlan:
    """What one produce call needs: how to send and probe, the topic's routes and the policies."""

    send: Send
    route: Callable[[bool], Route]  # the topic's route; True = ask the NameServers again
    probe: Callable[[str], bool]  # does the broker at this URL answer (cheap, short timeout)?
    faults: FaultTracker
    known: KnownBrokers
    topic: str
    rr: Iterator[int]
    retries: int
    timeout_s: float
    move_keys: bool = False


@dataclass
class _Outcomes:
    wire: list[dict[str, Any]]
    results: list[SendResult | None]
    errors: list[BrokerError | None]


def first_key(m: Mapping[str, Any]) -> str | None:
    keys = m.get("keys") or []
    if isinstance(keys, str):
        keys = [keys]
    return str(keys[0]) if keys else None


def send_routed(plan: SendPlan, wire: list[dict[str, Any]]) -> list[SendResult]:
    """Send ``wire``; returns results in order or raises :class:`SendError` with all outcomes."""
    route = plan.route(False)
    plan.known.learn(plan.topic, route)
    out = _Outcomes(wire, [None] * len(wire), [None] * len(wire))
    fixed: dict[str, Placed] = {}
    free: list[int] = []
    for i, m in enumerate(wire):
        key = first_key(m)
        if key is not None:
            broker, qid = plan.known.slot(plan.topic, key)
            fixed.setdefault(broker, []).append((i, qid))
        elif "queue_id" in m:
            slots = _healthy(route.slots(), route, plan.faults)
            fixed.setdefault(slots[next(plan.rr) % len(slots)][0], []).append((i, None))
        else:
            free.append(i)
    _send_fixed(plan, route, fixed, out)
    _send_free(plan, free, out)
    failed = [i for i, r in enumerate(out.results) if r is None]
    if failed:
        raise SendError(_summary(failed, out.errors, len(wire)), out.results, out.errors)
    return [r for r in out.results if r is not None]


def _healthy(slots: list[Slot], route: Route, faults: FaultTracker, exclude: frozenset[str] = frozenset()
             ) -> list[Slot]:
    """Slots of brokers not excluded and not in back-off; all non-excluded ones when none is healthy."""
    masters = route.masters
    usable = [s for s in slots if s[0] not in exclude]
    healthy = [s for s in usable if faults.available(masters[s[0]])]
    return healthy or usable


def _send_fixed(plan: SendPlan, route: Route, pending: dict[str, Placed], out: _Outcomes) -> None:
    """Each broker's fixed share, waiting (bounded) for a broker without a reachable master."""
    deadline = time.monotonic() + plan.timeout_s
    refreshed = time.monotonic()
    while pending:
        for broker in sorted(pending):
            url = route.masters.get(broker)
            if plan.move_keys and (url is None or not plan.faults.available(url)):
                _move(plan, route, broker, pending.pop(broker), out)
            elif url is not None and _ready(plan, url, broker):
                if _send_group(plan, route, broker, pending[broker], out) or not _waits(pending[broker], out):
                    del pending[broker]
        now = time.monotonic()
        if not pending or now >= deadline:
            break
        if now - refreshed >= _REFRESH_S:
            route, refreshed = _refresh(plan, route), now
        time.sleep(min(_TICK_S, max(0.0, deadline - now)))
    for broker, placed in pending.items():
        _gave_up(plan, route, broker, placed, out)


def _ready(plan: SendPlan, url: str, broker: str) -> bool:
    """May ``url`` be sent to now: healthy, or past its retry delay and answering a probe."""
    if not plan.faults.in_fault(url):
        return True
    if not plan.faults.available(url):
        return False
    if plan.probe(url):
        plan.faults.succeeded(url)
        return True
    plan.faults.failed(url, f"broker {broker!r} at {url} does not answer")
    return False


def _waits(placed: Placed, out: _Outcomes) -> bool:
    """True when every message of the share failed in a way that proves nothing was stored."""
    return all((e := out.errors[i]) is not None and retryable(e) for i, _ in placed)


def _refresh(plan: SendPlan, route: Route) -> Route:
    try:
        fresh = plan.route(True)
    except BrokerError:
        return route  # the NameServers are away or forgot the topic: keep waiting on what we know
    plan.known.learn(plan.topic, fresh)
    return fresh


def _move(plan: SendPlan, route: Route, broker: str, placed: Placed, out: _Outcomes) -> None:
    """``keyed_failover="move"``: send ``broker``'s keyed share to live brokers, with a warning."""
    groups: dict[str, Placed] = {}
    for i, qid in placed:
        key = first_key(out.wire[i])
        target = live_slot(route, key, plan.faults.available) if key is not None else None
        if target is None or target[0] == broker:
            out.errors[i] = BrokerUnreachableError(
                f"broker {broker!r} has no reachable master and no other broker takes writes", broker=broker)
            continue
        groups.setdefault(target[0], []).append((i, target[1]))
    if groups:
        log.warning("broker %r has no reachable master: moving %d keyed message(s) of %r to %s "
                    "(keyed_failover='move': per-key order across the move is not kept)",
                    broker, sum(len(p) for p in groups.values()), plan.topic, sorted(groups))
    for target, share in sorted(groups.items()):
        _send_group(plan, route, target, share, out)


def _gave_up(plan: SendPlan, route: Route, broker: str, placed: Placed, out: _Outcomes) -> None:
    url = route.masters.get(broker)
    last = plan.faults.reason(url) if url else "the NameServers route no master for it"
    error = BrokerUnreachableError(
        f"broker {broker!r} had no reachable master for {plan.timeout_s:g} s ({short_reason(last or 'unreachable')});"
        " its keyed messages were not sent to another broker name (keyed_failover='wait'): "
        "resend them when it is back", broker=broker, url=url)
    for i, _ in placed:
        if out.results[i] is None:
            out.errors[i] = error


def _send_free(plan: SendPlan, pending: list[int], out: _Outcomes) -> None:
    excluded: set[str] = set()
    route = plan.route(False)
    for _attempt in range(plan.retries + 1):
        slots = _healthy(route.slots(), route, plan.faults, frozenset(excluded))
        if not pending or not slots:
            return
        groups: dict[str, Placed] = {}
        for i in pending:
            broker, qid = slots[next(plan.rr) % len(slots)]
            groups.setdefault(broker, []).append((i, qid))
        again: list[int] = []
        for broker, placed in sorted(groups.items()):
            url = route.masters[broker]
            if not _ready(plan, url, broker):
                for i, _ in placed:
                    out.errors[i] = BrokerUnreachableError(
                        f"broker {broker!r} at {url} does not answer ({plan.faults.reason(url)})", broker=broker, url=url)
                excluded.add(broker)
                again.extend(i for i, _ in placed)
            elif not _send_group(plan, route, broker, placed, out):
                excluded.add(broker)
                again.extend(i for i, _ in placed if (e := out.errors[i]) is not None and retryable(e))
        pending = sorted(again)


def _send_group(plan: SendPlan, route: Route, broker: str, placed: Placed, out: _Outcomes) -> bool:
    """Send one broker's share once; records outcomes; False if it failed."""
    url = route.masters[broker]
    body = [m if qid is None or "queue_id" in m else {**m, "queue_id": qid}
            for m, qid in ((out.wire[i], q) for i, q in placed)]
    try:
        sent = plan.send(broker, url, body)
    except BrokerError as exc:
        if isinstance(exc, BrokerUnreachableError) or retryable(exc):
            plan.faults.failed(url, exc.message)  # a real attempt that failed
        for i, _ in placed:
            out.errors[i] = exc
        return False
    plan.faults.succeeded(url)
    for (i, _), r in zip(placed, sent):
        out.results[i], out.errors[i] = r, None
    return True


def _summary(failed: list[int], errors: list[BrokerError | None], total: int) -> str:
    reasons = sorted({short_reason(e.message) for i in failed if (e := errors[i]) is not None})
    return (f"{len(failed)} of {total} message(s) were not stored ({'; '.join(reasons)}); the rest were: "
            "resend only the failed ones (SendError.failed)")
