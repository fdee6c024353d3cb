"""The stream and batch readers: consume queues as Spark partitions.

Driver side, per micro-batch::

    initialOffset()                  -> {"orders": {"0": 0, "1": 0, ...}}
    latestOffset(start, limit)       -> end: queue windows, data-loss check,
                                        AvailableNow target, maxOffsetsPerTrigger
    partitions(start, end)           -> one QueuePartition per queue with end > start
    commit(end)                      -> group offsets to the broker (option 'group')

Executor side, ``read(partition)`` pulls [start, end) in Arrow pages with its
own HTTP client and yields ``pyarrow.RecordBatch`` in the Spark schema. The
reader objects are pickled to executors, so they hold options, never clients.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from .client import BrokerClient, Page
from .discovery import check_data_loss, discover, starting_offsets
from .errors import BrokerRequestError, BrokerUnavailableError, DataLossError, SparkMQError
from .offsets import QueueKey, from_json, plan_end, plan_ranges, to_json
from .options import LATEST, ReaderOptions
from .schema import page_to_batch

__all__ = ["QueuePartition", "read_partition", "SparkMQStreamReader", "SparkMQBatchReader"]

log = logging.getLogger("sparkmq.streaming")


@dataclass(frozen=True)
class QueuePartition(InputPartition):
    """Offsets [start, end) of one consume queue; ``new_queue`` if first seen this batch."""

    topic: str
    queue_id: int
    start: int
    end: int
    new_queue: bool = False


def _next_offset(page: Page, part: QueuePartition, cur: int, fail: bool) -> int:
    where = f"{part.topic}/{part.queue_id}"
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
    if fail:
        raise DataLossError(
            f"{where}: planned to read up to offset {part.end} but the broker answered "
            f"{page.status} at offset {cur} (queue holds [{page.min_offset}, "
            f"{page.max_offset})); the queue was reset or deleted. Set "
            ".option('failOnDataLoss', 'false') to skip."
        )
    log.warning("%s: %s at offset %d, skipping to %d", where, page.status, cur, part.end)
    return part.end


def _trim(batch: pa.RecordBatch, end: int) -> pa.RecordBatch:
    offsets = batch.column("offset").to_numpy()
    keep = int(np.searchsorted(offsets, end, side="left"))
    return batch if keep == batch.num_rows else batch.slice(0, keep)


def read_partition(opts: ReaderOptions, part: QueuePartition) -> Iterator[pa.RecordBatch]:
    """Pull [start, end) of one queue in Arrow pages; yield Spark-ready batches."""
    with BrokerClient(opts.client) as client:
        cur = part.start
        while cur < part.end:
            want = min(opts.page_size, part.end - cur)
            page = client.pull_arrow(part.topic, part.queue_id, cur, want, opts.tags)
            nxt = _next_offset(page, part, cur, opts.fail_on_data_loss)
            if page.table.num_rows:
                batch = _trim(page_to_batch(page.table), part.end)
                if batch.num_rows:
                    yield batch
            if nxt <= cur:
                raise SparkMQError(
                    f"{part.topic}/{part.queue_id}: broker did not advance past offset {cur} "
                    f"(status {page.status}, next {nxt})"
                )
            cur = nxt


class _ClientHolder:
    """Lazily builds a driver-side client; drops it when pickled."""

    _opts: ReaderOptions
    _client: BrokerClient | None = None

    @property
    def client(self) -> BrokerClient:
        if self._client is None:
            self._client = BrokerClient(self._opts.client)
        return self._client

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_client"] = None
        return state


class SparkMQStreamReader(_ClientHolder, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """readStream: one partition per (topic, queue) per micro-batch."""

    def __init__(self, opts: ReaderOptions) -> None:
        self._opts = opts
        self._client = None
        self._target: dict[QueueKey, int] | None = None
        self._latest: dict[QueueKey, int] | None = None
        self._reported: dict | None = None

    def initialOffset(self) -> dict:
        ranges = discover(self.client, self._opts, strict=True)
        start = starting_offsets(
            self.client, self._opts, ranges, self._opts.starting, name="startingOffsets"
        )
        check_data_loss(start, ranges, fail=self._opts.fail_on_data_loss)
        return to_json(start)

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self._opts.max_offsets_per_trigger
        return ReadMaxRows(n) if n else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        ranges = discover(self.client, self._opts, strict=False)
        self._target = {key: rng.max_offset for key, rng in ranges.items()}

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        self._report_group(start)
        begin = from_json(start)
        ranges = discover(self.client, self._opts, strict=False)
        check_data_loss(begin, ranges, fail=self._opts.fail_on_data_loss,
                        subscribed=self._opts.subscription.matches)
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        end = plan_end(begin, ranges, target=self._target, max_rows=max_rows)
        self._latest = {key: rng.max_offset for key, rng in ranges.items()}
        return to_json(end)

    def reportLatestOffset(self) -> dict | None:
        return to_json(self._latest) if self._latest is not None else None

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        plans = plan_ranges(from_json(start), from_json(end))
        return [QueuePartition(p.topic, p.queue_id, p.start, p.end, p.new_queue) for p in plans]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, QueuePartition)
        return read_partition(self._opts, partition)

    def commit(self, end: dict) -> None:
        self._report_group(end)

    def _report_group(self, processed: dict) -> None:
        """Write processed offsets to the group (option 'group'), once per change.

        Spark calls commit(end) of a batch only when it plans the next one, and
        never for the last batch of an AvailableNow run; the ``start`` handed to
        latestOffset() is the end of a batch Spark has finished, so it is
        reported from there too.
        """
        if self._opts.group is None or processed == self._reported:
            return
        for topic, queues in processed.items():
            offsets = {int(q): int(o) for q, o in queues.items()}
            try:
                self.client.commit_group(self._opts.group, topic, offsets)
            except (BrokerUnavailableError, BrokerRequestError) as exc:
                # The checkpoint, not the group, is the source of truth; keep going.
                log.warning("could not report group %r offsets for %r: %s",
                            self._opts.group, topic, exc)
                return
        self._reported = processed


class SparkMQBatchReader(_ClientHolder, DataSourceReader):
    """spark.read: [startingOffsets, endingOffsets) of every queue, planned once."""

    def __init__(self, opts: ReaderOptions) -> None:
        self._opts = opts
        self._client = None

    def partitions(self) -> list[InputPartition]:
        opts = self._opts
        try:
            ranges = discover(self.client, opts, strict=True)
            start = starting_offsets(self.client, opts, ranges, opts.starting,
                                     name="startingOffsets")
            end = starting_offsets(self.client, opts, ranges, opts.ending,
                                   name="endingOffsets", missing=LATEST)
        finally:
            self.client.close()
            self._client = None
        check_data_loss(start, ranges, fail=opts.fail_on_data_loss)
        parts: list[InputPartition] = []
        for key in sorted(ranges):
            rng = ranges[key]
            s = max(start[key], rng.min_offset)
            e = min(end[key], rng.max_offset)
            if e > s:
                parts.append(QueuePartition(key[0], key[1], s, e))
        return parts

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, QueuePartition):
            return iter(())  # Spark adds one empty partition when there are none
        return read_partition(self._opts, partition)
