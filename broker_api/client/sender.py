"""Produce over a routed cluster: spread, retry elsewhere, and account for every message.

Placement (stable while brokers and queue counts stay the same)::

    keyed message           -> slots[crc32(first key) % len(slots)]   fixed: per-key order
    explicit queue_id       -> the broker picked for it first           fixed: the asked queue
    neither                 -> round robin over the healthy slots       free: may move

A fixed message whose broker fails (or is in its back-off) fails.  A free
message whose broker fails in a way that proves nothing was stored (refused
connection, 503 busy) is sent again to another broker, at most ``retries``
times; a failure that leaves the outcome unknown (a timeout after sending)
is never resent.  The caller gets every message's outcome, so nothing
stored is left unacknowledged.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ..errors import BrokerError
from .results import BrokerUnreachableError, SendError, SendResult, retryable
from .routing import FaultTracker, Route

__all__ = ["send_routed"]

Send = Callable[[str, str, list[dict[str, Any]]], list[SendResult]]
Slot = tuple[str, int]


def _first_key(m: Mapping[str, Any]) -> str | None:
    keys = m.get("keys") or []
    if isinstance(keys, str):
        keys = [keys]
    return str(keys[0]) if keys else None


def send_routed(send: Send, route: Route, faults: FaultTracker, wire: list[dict[str, Any]], rr: Iterator[int],
                retries: int) -> list[SendResult]:
    """Send ``wire`` over ``route``; returns results in order or raises :class:`SendError` with all outcomes."""
    slots = route.slots()
    results: list[SendResult | None] = [None] * len(wire)
    errors: list[BrokerError | None] = [None] * len(wire)
    fixed: dict[Slot | str, list[int]] = {}
    free: list[int] = []
    for i, m in enumerate(wire):
        key = _first_key(m)
        if key is not None:
            fixed.setdefault(slots[zlib.crc32(key.encode()) % len(slots)], []).append(i)
        elif "queue_id" in m:
            fixed.setdefault(_healthy(slots, route, faults)[next(rr) % len(slots)][0], []).append(i)
        else:
            free.append(i)
    by_broker: dict[str, list[tuple[int, int | None]]] = {}
    for target, indexes in fixed.items():
        broker, qid = target if isinstance(target, tuple) else (target, None)
        by_broker.setdefault(broker, []).extend((i, qid) for i in indexes)
    for broker, placed in sorted(by_broker.items()):
        _send_group(send, route, faults, broker, placed, wire, results, errors, fixed=True)
    _send_free(send, route, faults, free, wire, results, errors, rr, retries)
    failed = [i for i, r in enumerate(results) if r is None]
    if failed:
        raise SendError(_summary(failed, errors, len(wire)), results, errors)
    return [r for r in results if r is not None]


def _healthy(slots: list[Slot], route: Route, faults: FaultTracker, exclude: frozenset[str] = frozenset()
             ) -> list[Slot]:
    """Slots of brokers not excluded and not in back-off; all non-excluded ones when none is healthy."""
    masters = route.masters
    usable = [s for s in slots if s[0] not in exclude]
    healthy = [s for s in usable if faults.available(masters[s[0]])]
    return healthy or usable


def _send_free(send: Send, route: Route, faults: FaultTracker, pending: list[int], wire: list[dict[str, Any]],
               results: list[SendResult | None], errors: list[BrokerError | None], rr: Iterator[int],
               retries: int) -> None:
    excluded: set[str] = set()
    for _attempt in range(retries + 1):
        slots = _healthy(route.slots(), route, faults, frozenset(excluded))
        if not pending or not slots:
            return
        groups: dict[str, list[tuple[int, int | None]]] = {}
        for i in pending:
            broker, qid = slots[next(rr) % len(slots)]
            groups.setdefault(broker, []).append((i, qid))
        again: list[int] = []
        for broker, placed in sorted(groups.items()):
            if not _send_group(send, route, faults, broker, placed, wire, results, errors, fixed=False):
                excluded.add(broker)
                again.extend(i for i, _ in placed if (e := errors[i]) is not None and retryable(e))
        pending = sorted(again)


def _send_group(send: Send, route: Route, faults: FaultTracker, broker: str, placed: list[tuple[int, int | None]],
                wire: list[dict[str, Any]], results: list[SendResult | None],
                errors: list[BrokerError | None], *, fixed: bool) -> bool:
    """Send one broker's share; records outcomes; False if it failed.

    A fixed share for a broker in its back-off fails at once (when there are
    other brokers), instead of waiting on a broker that just failed.
    """
    url = route.masters[broker]
    body = [m if qid is None or "queue_id" in m else {**m, "queue_id": qid}
            for m, qid in ((wire[i], q) for i, q in placed)]
    try:
        if fixed and not faults.available(url) and len(route.masters) > 1:
            down = faults.down_for(url) or 0.0
            raise BrokerUnreachableError(
                f"broker {broker!r} at {url} failed {down:.0f} s ago ({faults.reason(url) or 'unreachable'}) "
                "and is in its back-off; its keyed messages wait for it", broker=broker, url=url)
        sent = send(broker, url, body)
    except BrokerError as exc:
        if isinstance(exc, BrokerUnreachableError) or retryable(exc):
            faults.failed(url, exc.message)
        for i, _ in placed:
            errors[i] = exc
        return False
    faults.succeeded(url)
    for (i, _), r in zip(placed, sent):
        results[i], errors[i] = r, None
    return True


def _summary(failed: list[int], errors: list[BrokerError | None], total: int) -> str:
    reasons = sorted({e.message for i in failed if (e := errors[i]) is not None})
    return (f"{len(failed)} of {total} message(s) were not stored ({'; '.join(reasons)}); the rest were: "
            "resend only the failed ones (SendError.failed)")
