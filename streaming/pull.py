"""Executor side: pull one partition's range [start, end) from its broker.

``read_partition`` builds its own HTTP client from the partition's broker
addresses (master first, or whichever the driver saw answer last; never the
NameServer) and yields Arrow batches in the Spark schema. A broker that
stops answering mid-read is waited for, up to ``brokerDownTimeoutMs``: the
range was planned and will be committed as read, so skipping it would lose
messages. The rest of the micro-batch waits with it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from .client import BrokerClient, Page
from .errors import BrokerUnavailableError, DataLossError, SparkMQError
from .options import ClientConfig, ReaderOptions
from .schema import page_to_batch

__all__ = ["QueuePartition", "read_partition"]

log = logging.getLogger("sparkmq.streaming")

_WAIT_STEP_S = 2.0
_SLAVE_GRACE_S = 30.0
_READABLE = ("FOUND", "NO_MATCHED_MESSAGE", "OFFSET_TOO_SMALL")


@dataclass(frozen=True)
class QueuePartition(InputPartition):
    """Offsets [start, end) of one consume queue; ``new_queue`` if first seen this batch."""

    topic: str
    queue_id: int
    start: int
    end: int
    new_queue: bool = False
    broker: str = ""
    addresses: tuple[str, ...] = ()

    @property
    def where(self) -> str:
        if self.broker:
            return f"{self.topic}@{self.broker}/{self.queue_id}"
        return f"{self.topic}/{self.queue_id}"


def _next_offset(page: Page, part: QueuePartition, cur: int, fail: bool) -> int:
    where = part.where
    if page.status in ("FOUND", "NO_MATCHED_MESSAGE"):
        return page.next_offset
    if page.status == "OFFSET_TOO_SMALL":
        if fail and not part.new_queue:
            raise DataLossError(
                f"{where}: offsets [{cur}, {page.min_offset}) were deleted by retention before "
                "Spark read them. Set .option('failOnDataLoss', 'false') to skip them."
            )
        log.warning("%s: offsets [%d, %d) are gone, skipping ahead", where, cur, page.min_offset)
        return max(page.min_offset, page.next_offset)
    if page.status == "CORRUPT_MESSAGE":
        return _damaged(page, part, cur, fail)
    if fail:
        raise DataLossError(
            f"{where}: planned to read up to offset {part.end} but the broker answered "
            f"{page.status} at offset {cur} (queue holds [{page.min_offset}, "
            f"{page.max_offset})); the queue was reset or deleted. Set "
            ".option('failOnDataLoss', 'false') to skip."
        )
    log.warning("%s: %s at offset %d, skipping to %d", where, page.status, cur, part.end)
    return part.end


def _damaged(page: Page, part: QueuePartition, cur: int, fail: bool) -> int:
    """A record whose bytes changed on disk (it failed its CRC): fail the query, or skip it with a warning."""
    what = page.damaged or f"damaged record in topic {part.topic!r} queue {part.queue_id} at queue offset {cur}"
    if fail:
        raise DataLossError(
            f"{part.where}: {what}. The broker cannot serve it; set .option('failOnDataLoss', 'false') "
            "to skip damaged records with a warning."
        )
    log.warning("%s: skipping %s (failOnDataLoss=false)", part.where, what)
    return page.next_offset


def _trim(batch: pa.RecordBatch, end: int) -> pa.RecordBatch:
    offsets = batch.column("offset").to_numpy()
    keep = int(np.searchsorted(offsets, end, side="left"))
    return batch if keep == batch.num_rows else batch.slice(0, keep)


def _config(opts: ReaderOptions, part: QueuePartition) -> ClientConfig:
    if not part.addresses:
        return opts.client
    return ClientConfig(endpoints=part.addresses, timeout_s=opts.client.timeout_s,
                        broker=part.broker, trust=opts.client.trust)


def _behind(page: Page, part: QueuePartition) -> bool:
    """A slave of an HA broker that has not caught up with what the master showed the driver."""
    return (len(part.addresses) > 1 and page.status not in _READABLE
            and page.max_offset < part.end)


def _fields(opts: ReaderOptions) -> str:
    """The broker columns this query's schema shows (topic and queue id are the partition's)."""
    names = ["offset", "keys", "body", "born_timestamp"]
    if opts.columns.headers:
        names += ["tags", "properties"]
    if opts.columns.sparkmq:
        names += ["msg_id", "tags", "store_timestamp"]
    return ",".join(dict.fromkeys(names))


def _pull(
    client: BrokerClient, opts: ReaderOptions, part: QueuePartition, cur: int, deadline: float
) -> Page:
    """One page at ``cur``, waiting (bounded by ``deadline``) while the broker is down."""
    behind_until = time.monotonic() + _SLAVE_GRACE_S
    while True:
        want = min(opts.page_size, part.end - cur)
        try:
            page = client.pull_arrow(part.topic, part.queue_id, cur, want, opts.tags, opts.filter,
                                     _fields(opts))
            if not _behind(page, part) or time.monotonic() > min(deadline, behind_until):
                return page
            log.warning("%s: the broker answering holds up to offset %d, %d was planned "
                        "(a slave catching up?); asking again", part.where, page.max_offset,
                        part.end)
            time.sleep(1.0)
        except BrokerUnavailableError as exc:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrokerUnavailableError(
                    f"{part.where}: offsets [{cur}, {part.end}) were planned but the broker "
                    f"stayed down for brokerDownTimeoutMs={opts.broker_down_timeout_ms}: {exc}",
                    broker=exc.broker, address=exc.address,
                ) from exc
            log.warning("%s: waiting for the broker to read [%d, %d) (%.0f s left): %s",
                        part.where, cur, part.end, left, exc)
            time.sleep(min(_WAIT_STEP_S, left))


def _fetch(client: BrokerClient, opts: ReaderOptions, part: QueuePartition, cur: int) -> tuple[Page, int]:
    """The page at ``cur`` and the offset after it (checked to move forward)."""
    page = _pull(client, opts, part, cur, time.monotonic() + opts.broker_down_timeout_ms / 1000.0)
    nxt = _next_offset(page, part, cur, opts.fail_on_data_loss)
    if nxt <= cur:
        raise SparkMQError(
            f"{part.where}: broker did not advance past offset {cur} (status {page.status}, next {nxt})"
        )
    return page, nxt


def read_partition(opts: ReaderOptions, part: QueuePartition) -> Iterator[pa.RecordBatch]:
    """Pull [start, end) of one queue in Arrow pages; yield Spark-ready batches.

    The next page is asked for while Spark takes the current one (one request in flight,
    from one helper thread that ends with the partition), so the broker and Spark work
    at the same time instead of in turns.
    """
    with BrokerClient(_config(opts, part)) as client, \
            ThreadPoolExecutor(1, thread_name_prefix="sparkmq-pull") as pool:
        pending = pool.submit(_fetch, client, opts, part, part.start) if part.start < part.end else None
        while pending is not None:
            page, nxt = pending.result()
            pending = pool.submit(_fetch, client, opts, part, nxt) if nxt < part.end else None
            if page.table.num_rows:
                batch = _trim(page_to_batch(page.table, opts.columns, part.broker,
                                            (part.topic, part.queue_id)), part.end)
                if batch.num_rows:
                    yield batch
