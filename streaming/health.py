"""A back-off for broker addresses that just failed (RocketMQ's LatencyFaultTolerance).

One :class:`BrokerHealth` is shared by every :class:`client.BrokerClient` a
routing layer opens (the driver's broker view, or one sink task), so a
broker that refused one request is not asked again by the next one until
its back-off has passed::

    failure n of an address   ->  not tried before now + min(cap, base * 2**(n-1))
    a success                 ->  forgotten (the next request tries it first)

:meth:`BrokerHealth.order` puts addresses that may be tried first, in the
order given (a broker's master, then its slaves), and the backed-off ones
after them, soonest retry first. So reads go to a slave while the master
backs off, and back to the master as soon as it answers again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

__all__ = ["BrokerHealth", "Failure"]

Clock = Callable[[], float]


@dataclass(frozen=True)
class Failure:
    """What is known about an address that keeps failing."""

    failures: int
    since: float
    retry_at: float
    error: str


class BrokerHealth:
    """Per-address failure counts and back-off deadlines (thread-unsafe, one owner)."""

    def __init__(
        self,
        base_s: float = 0.5,
        cap_s: float = 10.0,
        clock: Clock = time.monotonic,
        wall: Clock = time.time,
    ) -> None:
        self._base_s = base_s
        self._cap_s = cap_s
        self._clock = clock
        self._wall = wall
        self._failed: dict[str, Failure] = {}

    def failed(self, address: str, error: str) -> None:
        """Record a failure: the back-off doubles (up to the cap) with each one in a row."""
        old = self._failed.get(address)
        n = old.failures + 1 if old else 1
        wait = min(self._cap_s, self._base_s * 2 ** min(n - 1, 30))  # no OverflowError after 1,024
        since = old.since if old else self._wall()
        self._failed[address] = Failure(n, since, self._clock() + wait, error)

    def succeeded(self, address: str) -> None:
        """Forget past failures of ``address``."""
        self._failed.pop(address, None)

    def available(self, address: str) -> bool:
        """True unless ``address`` failed and its back-off has not passed yet."""
        f = self._failed.get(address)
        return f is None or self._clock() >= f.retry_at

    def failure(self, address: str) -> Failure | None:
        """The failure record of ``address``, or None if it answered last time."""
        return self._failed.get(address)

    def retry_in(self, address: str) -> float:
        """Seconds until ``address`` may be tried again (0 if it may now)."""
        f = self._failed.get(address)
        return 0.0 if f is None else max(0.0, f.retry_at - self._clock())

    def order(self, addresses: Iterable[str]) -> list[str]:
        """Addresses that may be tried (in the given order), then the others by retry time."""
        given = list(addresses)
        ready = [a for a in given if self.available(a)]
        waiting = sorted((a for a in given if not self.available(a)), key=self.retry_in)
        return ready + waiting

    def all_backing_off(self, addresses: Iterable[str]) -> bool:
        """True when no address in ``addresses`` may be tried now."""
        return not any(self.available(a) for a in addresses)
