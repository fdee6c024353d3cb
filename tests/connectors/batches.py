"""Hand-built DispatchBatch objects for tests that need exact control."""

from __future__ import annotations

import time

import numpy as np

from store import DispatchBatch


def encode_properties(props: dict[str, str]) -> bytes:
    return "".join(f"{k}\x01{v}\x02" for k, v in props.items()).encode()


def make_batch(
    start: int,
    n: int,
    *,
    size: int = 100,
    topic: str = "t",
    sys_flags: list[int] | None = None,
    topics: list[str] | None = None,
    props: list[dict[str, str]] | None = None,
    store_ms: int | None = None,
) -> DispatchBatch:
    """``n`` records of ``size`` bytes each, the first at CommitLog offset ``start``."""
    phy = np.arange(start, start + n * size, size, dtype=np.int64)
    now = int(time.time() * 1000) if store_ms is None else store_ms
    return DispatchBatch(
        topics=topics if topics is not None else [topic] * n,
        queue_ids=np.zeros(n, np.int32),
        queue_offsets=np.arange(n, dtype=np.int64),
        phy_offsets=phy,
        sizes=np.full(n, size, np.int32),
        tag_codes=np.zeros(n, np.int64),
        store_timestamps=np.full(n, now, np.int64),
        born_timestamps=np.full(n, now - 5, np.int64),
        sys_flags=np.asarray(sys_flags if sys_flags is not None else [0] * n, np.int32),
        keys=[(f"k{i}",) for i in range(n)],
        tags=[None if i % 2 else "A" for i in range(n)],
        properties_raw=[encode_properties(p) for p in props] if props is not None else [b""] * n,
        bodies=[f"body-{start}-{i}".encode() for i in range(n)],
        msg_ids=[f"{p:032X}" for p in phy],
        end_offset=int(start + n * size),
    )
