"""Group writes: concurrent produce requests share one store put.

Requests that reach the write path in the same event-loop iteration are
appended to the CommitLog with one ``put_messages`` call (and, with SYNC
flush, one fdatasync), so the per-put costs (locking, dispatch, flush
wake-ups) are paid per group instead of per request.  Under light load a
group is one request and the only cost is one loop iteration.

A group larger than ``_INLINE_MAX_MESSAGES`` is written on the write pool
even with ASYNC flush, so a bulk request never stalls the event loop.  With
SYNC flush a group is appended the same way and then awaits the store's group
fdatasync (``MessageStore.wait_flushed``): no thread is held while the disk
works, so any number of groups share one fdatasync.

Results are handed back to each request in its own order.  If a group fails
validation (one request carried a malformed message), every request of the
group is retried alone, so only the faulty request sees the error; a put
that fails validation writes nothing, so the retry cannot duplicate.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Awaitable, Callable

from store import InvalidMessageError, Message, PutResult
from store.errors import FlushTimeoutError

from .protection.fastfail import WriteGate

__all__ = ["ProduceBatcher"]

_Item = tuple[list[Message], "asyncio.Future[list[PutResult]]", float]  # messages, answer, enqueued
_MAX_GROUP_MESSAGES = 4096
# A bigger put runs on the write pool even with ASYNC flush: 100,000 messages take about half a
# second, which on the event loop would stall every other request (health checks included).
_INLINE_MAX_MESSAGES = 2048


class ProduceBatcher:
    """Coalesces the produce requests of one loop iteration into one put."""

    def __init__(self, gate: WriteGate, put: Callable[[list[Message], bool], list[PutResult]],
                 wait_flushed: Callable[[list[PutResult]], Awaitable[None]] | None = None) -> None:
        self._gate = gate
        self._put = put  # (messages, wait for the SYNC fdatasync)
        self._wait_flushed = wait_flushed  # SYNC flush: awaited after the append, on the loop
        self._pending: list[_Item] = []
        self._scheduled = False
        self.groups = 0
        self.grouped_requests = 0

    async def put(self, messages: list[Message]) -> list[PutResult]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[list[PutResult]] = loop.create_future()
        self._pending.append((messages, future, time.monotonic()))
        if not self._scheduled:
            self._scheduled = True
            loop.call_soon(self._flush)
        return await future

    def _flush(self) -> None:
        self._scheduled = False
        group: list[Any] = []
        count = 0
        while self._pending and (not group or count + len(self._pending[0][0]) <= _MAX_GROUP_MESSAGES):
            item = self._pending.pop(0)
            group.append(item)
            count += len(item[0])
        if self._pending:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)
        self.groups += 1
        self.grouped_requests += len(group)
        asyncio.ensure_future(self._write(group))

    async def _write(self, group: list[_Item]) -> None:
        live = [item for item in group if not item[1].done()]  # clients that left
        if not live:
            return
        combined = [m for msgs, _, _ in live for m in msgs] if len(live) > 1 else live[0][0]
        try:
            # The group's wait for the store is its oldest request's.
            sync = self._wait_flushed is not None
            results = await self._gate.run(self._put, combined, not sync, enqueued=min(item[2] for item in live),
                                           offload=len(combined) > _INLINE_MAX_MESSAGES, inline=sync)
            if self._wait_flushed is not None:
                await self._wait_flushed(results)
        except InvalidMessageError as exc:
            if len(live) == 1:
                _fail(live, exc)
                return
            for item in live:
                await self._write([item])
            return
        except FlushTimeoutError as exc:  # stored, not confirmed on disk in time: each request its own part
            start = 0
            for msgs, fut, _ in live:
                if not fut.done():
                    fut.set_exception(FlushTimeoutError(str(exc), exc.results[start:start + len(msgs)]))
                start += len(msgs)
            return
        except BaseException as exc:  # every request of the group gets the store's answer
            _fail(live, exc)
            return
        start = 0
        for msgs, fut, _ in live:
            if not fut.done():
                fut.set_result(results[start:start + len(msgs)])
            start += len(msgs)


def _fail(group: list[_Item], exc: BaseException) -> None:
    for _, fut, _ in group:
        if not fut.done():
            fut.set_exception(exc)
