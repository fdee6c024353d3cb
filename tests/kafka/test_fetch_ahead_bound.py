"""FetchAhead's bound and its rule for serving a page (the listener's use: test_fetch_ahead.py)."""

from __future__ import annotations

import asyncio
import threading

from broker_api.kafka.fetch_ahead import FetchAhead

_MIB = 1 << 20


def _key(offset: int, limit: int = _MIB) -> tuple[str, int, int, int, bool]:
    return ("t", 0, offset, limit, False)


def test_the_pages_kept_never_exceed_the_bound_and_the_oldest_go_first() -> None:
    async def run() -> None:
        ahead, log = FetchAhead(3 * _MIB), object()
        try:
            for offset in range(5):
                ahead.start(_key(offset), log, lambda offset=offset: b"page %d" % offset)
                assert ahead.held_bytes <= 3 * _MIB and len(ahead) <= 3
            assert [await ahead.take(_key(o), log) for o in range(5)] == [None, None, b"page 2", b"page 3",
                                                                          b"page 4"]
            assert len(ahead) == 0 and ahead.held_bytes == 0 and ahead.served == 3
            ahead.start(_key(9, 4 * _MIB), log, lambda: b"too big")  # its limit alone exceeds the bound
            assert len(ahead) == 0 and await ahead.take(_key(9, 4 * _MIB), log) is None
        finally:
            ahead.close()

    asyncio.run(run())


def test_a_page_is_served_only_for_its_own_log_key_and_a_good_read() -> None:
    async def run() -> None:
        ahead, log = FetchAhead(8 * _MIB), object()
        try:
            ahead.start(_key(0), log, lambda: b"first log")
            assert await ahead.take(_key(0), object()) is None  # the queue was created again meanwhile
            ahead.start(_key(0), log, lambda: b"page")
            assert await ahead.take(_key(0, _MIB // 2), log) is None  # another limit: another page
            assert await ahead.take(_key(0), log) == b"page"
            assert await ahead.take(_key(0), log) is None  # taken once

            def fail() -> bytes:
                raise OSError("read failed")
            ahead.start(_key(1), log, fail)
            ahead.start(_key(2), log, lambda: None)  # a damaged record or an offset gone: nothing kept
            assert await ahead.take(_key(1), log) is None and await ahead.take(_key(2), log) is None
        finally:
            ahead.close()

    asyncio.run(run())


def test_a_page_still_being_built_is_awaited() -> None:
    async def run() -> None:
        ahead, log, gate = FetchAhead(_MIB), object(), threading.Event()
        try:
            ahead.start(_key(0), log, lambda: b"slow" if gate.wait(5) else b"")
            waiting = asyncio.ensure_future(ahead.take(_key(0), log))
            await asyncio.sleep(0.05)
            assert not waiting.done()
            gate.set()
            assert await waiting == b"slow"
        finally:
            ahead.close()

    asyncio.run(run())
