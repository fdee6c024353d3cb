"""Anonymous memory that follows the admission bounds, and returns after a storm.

glibc's malloc raises its mmap threshold each time a large block is freed
(up to 32 MiB), so after a burst of 10 MB request bodies later bodies come
from the heap, which fragments and is rarely given back: memory "follows
request size" and stays.  :func:`tune_allocator` pins the threshold (large
blocks are always mapped, and unmapped on free) and caps malloc arenas;
:func:`trim` hands freed heap pages back, and runs periodically.

:func:`memory_bound_bytes` is the figure printed at start-up: what the
in-flight bounds let requests hold, on top of the broker's baseline.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from typing import Any

from ..settings.broker import BrokerSettings

__all__ = ["anon_memory_bytes", "memory_bound_bytes", "trim", "tune_allocator"]

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_ARENA_MAX = -1, -3, -8
_MMAP_THRESHOLD = 256 << 10
_TRIM_THRESHOLD = 4 << 20
_ARENAS = 2
# A produce request of 100-byte messages, the costly case, holds about this many
# bytes per body byte while it runs: per message a bytes object, a Draft, a
# Message, the encoded record, a PutResult with its id, and the answer's dict
# and JSON (measured by benchmarks/bench_storm.py).
PRODUCE_EXPANSION = 16
OTHER_EXPANSION = 2
BASELINE_BYTES = 128 << 20  # interpreter, FastAPI, pyarrow, store maps' page tables
CONNECTION_BYTES = 64 << 10  # what uvicorn buffers per connection before it stops reading


def _libc() -> Any:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
        libc.mallopt  # noqa: B018  (glibc only)
        libc.malloc_trim  # noqa: B018
    except (OSError, AttributeError):
        return None
    return libc


_LIBC = _libc()


def tune_allocator() -> bool:
    """Pin glibc's mmap and trim thresholds and cap its arenas; False where there is no glibc."""
    if _LIBC is None:
        return False
    ok = _LIBC.mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD) == 1
    ok &= _LIBC.mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD) == 1
    ok &= _LIBC.mallopt(_M_ARENA_MAX, _ARENAS) == 1
    return bool(ok)


def trim() -> None:
    """Give freed heap memory back to the system (glibc ``malloc_trim``)."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


def memory_bound_bytes(settings: BrokerSettings, connections: int = 1000) -> int:
    """Anonymous memory the broker stays under: baseline, admitted requests, and ``connections`` buffers."""
    s = settings.server
    return (BASELINE_BYTES + PRODUCE_EXPANSION * s.produce_inflight_bytes
            + OTHER_EXPANSION * 3 * s.other_inflight_bytes + connections * CONNECTION_BYTES)


def anon_memory_bytes(pid: int | None = None) -> int:
    """RssAnon of a process (Linux), 0 where /proc is not there."""
    try:
        with open(f"/proc/{pid or os.getpid()}/status") as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0
