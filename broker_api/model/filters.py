"""Property filters: a RocketMQ SQL92 condition over message properties and tags, applied to a page.

The grammar and its compiler live in :mod:`.filter_sql` (lark); it is loaded the first time a filter is
compiled, so a broker that never sees a filter does not import the parser.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping

import numpy as np

from store import GetResult, GetStatus, PullBatch

__all__ = ["Predicate", "compile_filter", "apply_filter", "MAX_FILTER_CHARS"]

MAX_FILTER_CHARS = 4096
Predicate = Callable[[str | None, Mapping[str, str]], bool]


@functools.lru_cache(maxsize=256)
def compile_filter(expression: str) -> Predicate:
    """Parse ``expression`` once (see :mod:`.filter_sql`); the predicate is true only when the expression is."""
    from .filter_sql import compile_sql

    return compile_sql(expression)


_Page = GetResult | PullBatch


def apply_filter(page: _Page, predicate: Predicate, max_count: int) -> _Page:
    """The page's messages that match, at most ``max_count``; ``next_offset`` right after the last one
    kept when more matched, else where the page ended (units that did not match are passed over)."""
    if page.status != GetStatus.FOUND:
        return page
    if isinstance(page, PullBatch):
        b = page.batch
        keep = np.flatnonzero([predicate(b.tags[i], b.properties(i)) for i in range(len(b))])[:max_count]
        offsets = b.queue_offsets[keep].tolist()
        next_offset = offsets[-1] + 1 if len(keep) == max_count else page.next_offset
        status = GetStatus.FOUND if len(keep) else GetStatus.NO_MATCHED_MESSAGE
        return dataclasses.replace(page, status=status, batch=b.take(keep), next_offset=next_offset)
    kept = [m for m in page.messages if predicate(m.tags, m.properties)][:max_count]
    next_offset = kept[-1].queue_offset + 1 if len(kept) == max_count else page.next_offset
    status = GetStatus.FOUND if kept else GetStatus.NO_MATCHED_MESSAGE
    return dataclasses.replace(page, status=status, messages=kept, next_offset=next_offset)
