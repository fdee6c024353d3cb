"""Group writes: concurrent produce requests share one store put.

Requests that reach the write path in the same event-loop iteration are
appended to the CommitLog with one ``put_messages`` call (and, with SYNC
flush, one fdatasync), so the per-put costs (locking, dispatch, flush
wake-ups) are paid per group instead of per request.  Under light load a
group is one request and the only cost is one loop iteration.

Results are handed back to each request in its own order.  If a group fails
validation (one request carried a malformed message), every request of the
group is retried alone, so only the faulty request sees the error; a put
that fails validation writes nothing, so the retry cannot duplicate.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable

from store import InvalidMessageError, Message, PutResult

from .fastfail import WriteGate

__all__ = ["ProduceBatcher"]

_Item = tuple[list[Message], "asyncio.Future[list[PutResult]]"]
_MAX_GROUP_MESSAGES = 4096


class ProduceBatcher:
    """Coalesces the produce requests of one loop iteration into one put."""

    def __init__(self, gate: WriteGate, put: Callable[[list[Message]], list[PutResult]]) -> None:
        self._gate = gate
        self._put = put
        self._pending: list[_Item] = []
        self._scheduled = False
        self.groups = 0
        self.grouped_requests = 0

    async def put(self, messages: list[Message]) -> list[PutResult]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[list[PutResult]] = loop.create_future()
        self._pending.append((messages, future))
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
        live = [(msgs, fut) for msgs, fut in group if not fut.done()]  # clients that left
        if not live:
            return
        combined = [m for msgs, _ in live for m in msgs] if len(live) > 1 else live[0][0]
        try:
            results = await self._gate.run(self._put, combined)
        except InvalidMessageError as exc:
            if len(live) == 1:
                _fail(live, exc)
                return
            for item in live:
                await self._write([item])
            return
        except BaseException as exc:  # every request of the group gets the store's answer
            _fail(live, exc)
            return
        start = 0
        for msgs, fut in live:
            if not fut.done():
                fut.set_result(results[start:start + len(msgs)])
            start += len(msgs)


def _fail(group: list[_Item], exc: BaseException) -> None:
    for _, fut in group:
        if not fut.done():
            fut.set_exception(exc)
