"""Admission control: bounded requests and bytes in flight per request class.

RocketMQ gives sends, pulls, transaction ends and admin calls their own
thread pool and bounded queue, and its BrokerFastFailure answers
``SYSTEM_BUSY`` at once when a queue is full or a request has waited past
its class's limit.  Here every request class has a :class:`Lane`:

* up to ``inflight`` requests (and ``inflight_bytes`` of request bodies, by
  Content-Length) run at once;
* as many more may wait, in arrival order, for at most the class's wait
  limit (never more than ``[server] max_wait_ms``);
* anything past that is refused at once with :class:`OverloadedError`
  (``503 broker_busy`` + ``Retry-After``), before its body is read.

Everything runs on the broker's event loop, so lanes need no lock; the
control listener's thread only reads their counters.  HTTP/1.1 carries one
request at a time per connection, so a connection cannot hold more than one
slot: slots are shared fairly across connections by arrival order.
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from ..errors import BrokerBusyError
from ..metrics import Histogram
from ..settings.broker import ServerSection

__all__ = ["CLASSES", "TICKET_KEY", "Admission", "Lane", "OverloadedError", "Ticket"]

TICKET_KEY = "sparkmq.ticket"  # the ASGI scope key of an admitted request's Ticket
CLASSES = ("produce", "pull", "transaction", "admin")
_RECENT_S = 2.0  # a lane that refused within this long counts as overloaded for /readyz
_WAIT_BUCKETS = (0.0001, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class OverloadedError(BrokerBusyError):
    """Raised when a request is refused for load; ``reason`` labels the refusal metric."""

    def __init__(self, message: str, *, reason: str, retry_after_s: int) -> None:
        super().__init__(message, retry_after_s=retry_after_s)
        self.reason = reason


@dataclass
class Ticket:
    """One admitted request: its lane and the bytes it holds."""

    lane: Lane
    nbytes: int
    released: bool = False

    @contextmanager
    def parked(self) -> Iterator[None]:
        """Give the slot back while a long poll is parked; take it back (unconditionally) after."""
        if self.released:
            yield
            return
        self.lane.release(self)
        try:
            yield
        finally:
            self.lane.take(self)


class Lane:
    """The slots of one request class."""

    def __init__(self, name: str, inflight: int, inflight_bytes: int, wait_ms: int, retry_after_s: int,
                 waited: Histogram) -> None:
        self.name = name
        self.limit, self.limit_bytes, self.wait_s = inflight, inflight_bytes, wait_ms / 1000
        self.retry_after_s = retry_after_s
        self.inflight = 0
        self.inflight_bytes = 0
        self.refused = 0
        self.last_refused = 0.0
        self._waiting: collections.deque[tuple[asyncio.Future[None], int]] = collections.deque()
        self._waited = waited

    def _fits(self, nbytes: int) -> bool:
        if self.inflight >= self.limit:
            return False
        # A request larger than the whole byte bound is admitted alone, never starved.
        return self.inflight == 0 or self.inflight_bytes + nbytes <= self.limit_bytes

    def check(self, nbytes: int) -> None:
        """Raise :class:`OverloadedError` if a request of ``nbytes`` would be refused at once now; taken
        before a body is read (slow_clients.py), so a storm is refused as cheaply as before."""
        if not (not self._waiting and self._fits(nbytes)):
            self._check_queue()

    async def acquire(self, nbytes: int) -> Ticket:
        """A slot for a request of ``nbytes`` body bytes, or :class:`OverloadedError`."""
        if not self._waiting and self._fits(nbytes):
            ticket = Ticket(self, nbytes)
            self.take(ticket)
            self._waited.observe(0.0, route=self.name)
            return ticket
        self._check_queue()
        return await self._wait(nbytes)

    def _check_queue(self) -> None:
        if len(self._waiting) >= self.limit or self.wait_s <= 0:
            raise self._refuse("inflight", f"{self.inflight}/{self.limit} {self.name} requests in flight "
                               f"({self.inflight_bytes >> 20} MiB of {self.limit_bytes >> 20} MiB) and "
                               f"{len(self._waiting)} waiting")

    async def _wait(self, nbytes: int) -> Ticket:
        started = time.monotonic()
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (future, nbytes)
        self._waiting.append(entry)
        try:
            await asyncio.wait_for(future, self.wait_s)
        except TimeoutError:
            if future.done() and not future.cancelled():  # granted as the timer fired: keep it
                return self._granted(nbytes, started)
            raise self._refuse("wait_timeout", f"no {self.name} slot within {self.wait_s * 1000:.0f} ms") from None
        except BaseException:
            if future.done() and not future.cancelled():
                self._release_counts(nbytes)  # granted, but the client left: hand the slot on
            raise
        finally:
            if entry in self._waiting:
                self._waiting.remove(entry)
        return self._granted(nbytes, started)

    def _granted(self, nbytes: int, started: float) -> Ticket:
        self._waited.observe(time.monotonic() - started, route=self.name)
        return Ticket(self, nbytes)  # counts were taken by _wake

    def _refuse(self, reason: str, detail: str) -> OverloadedError:
        self.refused += 1
        self.last_refused = time.monotonic()
        return OverloadedError(f"the broker is busy: {detail} ([server] {self.name}_inflight); retry after "
                               f"{self.retry_after_s}s", reason=reason, retry_after_s=self.retry_after_s)

    def take(self, ticket: Ticket) -> None:
        self.inflight += 1
        self.inflight_bytes += ticket.nbytes
        ticket.released = False

    def release(self, ticket: Ticket) -> None:
        if ticket.released:
            return
        ticket.released = True
        self._release_counts(ticket.nbytes)

    def _release_counts(self, nbytes: int) -> None:
        self.inflight -= 1
        self.inflight_bytes -= nbytes
        self._wake()

    def _wake(self) -> None:
        while self._waiting:
            future, nbytes = self._waiting[0]
            if future.done():  # timed out or cancelled: drop it
                self._waiting.popleft()
                continue
            if not self._fits(nbytes):
                return
            self._waiting.popleft()
            self.inflight += 1
            self.inflight_bytes += nbytes
            future.set_result(None)

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def overloaded(self, now: float) -> str | None:
        """Why this lane counts as overloaded (for /readyz), or None."""
        if now - self.last_refused < _RECENT_S and self.refused:
            return f"{self.name} requests were refused within the last {_RECENT_S:.0f} s"
        if self.waiting:
            return f"{self.waiting} {self.name} requests wait for a slot ({self.inflight}/{self.limit} in flight)"
        return None


class Admission:
    """The broker's lanes, one per request class (see :data:`CLASSES`)."""

    def __init__(self, section: ServerSection, retry_after_s: int) -> None:
        self.waited = Histogram("sparkmq_admission_wait_seconds",
                                "Time a request waited for an admission slot, by route class.", _WAIT_BUCKETS)
        cap = section.max_wait_ms

        def lane(name: str, inflight: int, nbytes: int, wait_ms: int) -> Lane:
            return Lane(name, inflight, nbytes, min(wait_ms, cap), retry_after_s, self.waited)

        other = section.other_inflight_bytes
        self.lanes = {
            "produce": lane("produce", section.produce_inflight, section.produce_inflight_bytes,
                            section.produce_wait_ms),
            "pull": lane("pull", section.pull_inflight, other, section.pull_wait_ms),
            "transaction": lane("transaction", section.transaction_inflight, other, section.transaction_wait_ms),
            "admin": lane("admin", section.admin_inflight, other, section.admin_wait_ms),
        }

    async def admit(self, route: str, nbytes: int) -> Ticket:
        return await self.lanes[route].acquire(nbytes)

    def check(self, route: str, nbytes: int) -> None:
        """Raise :class:`OverloadedError` when ``route``'s lane would refuse a request at once now."""
        self.lanes[route].check(nbytes)

    def overload_reason(self) -> str | None:
        now = time.monotonic()
        reasons = [r for r in (lane.overloaded(now) for lane in self.lanes.values()) if r]
        return "; ".join(reasons) or None

    def snapshot(self) -> dict[str, dict[str, int]]:
        return {name: {"inflight": lane.inflight, "inflight_bytes": lane.inflight_bytes, "waiting": lane.waiting,
                       "limit": lane.limit, "limit_bytes": lane.limit_bytes, "refused": lane.refused}
                for name, lane in self.lanes.items()}
