"""Fetch's next page, built while the consumer reads the one it was just sent.

A Kafka consumer reading a backlog sends its next Fetch for a partition only when it has used up
most of the records of the last one, and waits for the answer: the time the listener spends
reading, checking and writing a page (:mod:`.fetch`) would be on the consumer's path on every
Fetch. So once a Fetch answer carries a partition's page, the page that follows it (same topic,
partition, byte limit and timestamp type, from the offset after the last record sent) is built on
one worker thread, by the same code and with the same checks (the store's CRC read checks
included), and kept until the next Fetch for that offset takes it.

What is kept is bounded: ``[kafka] fetch_ahead_bytes`` is the sum of the byte limits of the pages
kept or being built (each page fits its limit), and the oldest are dropped first; 0 turns it off.
A page is only ever served to a Fetch for its exact offset and limit, after the same offset-range
check as any Fetch, and never across a change of the queue's log: it is dropped when the
partition's ConsumeQueue is not the one it was read from (the topic deleted and created again, the
store reopened). A running store only ever appends to a queue and drops its oldest records
(retention: the offset check answers those); a log is cut only while the store opens (recovery, a
slave's cut to its master's epochs), before the listener starts.
A page whose read failed (a damaged record, an offset gone) is not kept: the Fetch reads again
and answers the error itself.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

__all__ = ["AheadKey", "FetchAhead"]

log = logging.getLogger(__name__)

# (topic, partition, offset, byte limit, LOG_APPEND_TIME)
AheadKey = tuple[str, int, int, int, bool]


@dataclass(slots=True)
class _Page:
    log: Any  # the ConsumeQueue the page was read from (compared by identity)
    future: Future[bytes | None]


class FetchAhead:
    """The pages built ahead, at most ``max_bytes`` of byte limits in all (see the module docstring)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._pages: OrderedDict[AheadKey, _Page] = OrderedDict()
        self._held = 0  # the sum of the kept pages' limits
        self._pool: ThreadPoolExecutor | None = None
        self.served = 0  # Fetch answers that took a page built ahead
        self.ratios: dict[tuple[str, int], float] = {}  # see fetch.py: store bytes per wire byte, per partition

    def __len__(self) -> int:
        return len(self._pages)

    @property
    def held_bytes(self) -> int:
        return self._held

    def start(self, key: AheadKey, log_: Any, build: Callable[[], bytes | None]) -> None:
        """Build the page ``key`` on the worker thread (``build`` reads it from ``log_``), unless it is
        kept already or its limit alone exceeds the bound."""
        limit = key[3]
        if limit > self.max_bytes or key in self._pages:
            return
        while self._pages and self._held + limit > self.max_bytes:
            self._drop(next(iter(self._pages)))
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="kafka-fetch-ahead")
        self._pages[key] = _Page(log_, self._pool.submit(build))
        self._held += limit

    async def take(self, key: AheadKey, log_: Any) -> bytes | None:
        """The page ``key`` when one was built ahead from ``log_`` and read well (it leaves the set), else None."""
        page = self._pages.pop(key, None)
        if page is None:
            return None
        self._held -= key[3]
        if page.log is not log_:
            page.future.cancel()
            return None
        try:
            records = await asyncio.wrap_future(page.future)
        except Exception as exc:  # read again by the Fetch itself, which answers what went wrong
            log.debug("kafka: a page built ahead failed: %s", exc)
            return None
        if records:
            self.served += 1
        return records or None

    def clear(self) -> None:
        """Drop every page."""
        for key in list(self._pages):
            self._drop(key)

    def close(self) -> None:
        self.clear()
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)  # a build takes ms: no thread outlives us

    def _drop(self, key: AheadKey) -> None:
        page = self._pages.pop(key)
        self._held -= key[3]
        page.future.cancel()
