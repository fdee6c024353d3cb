"""The stream and batch readers: consume queues as Spark partitions.

Driver side, per micro-batch::

    initialOffset()                  -> {"orders": {"0": 0, "1": 0, ...}}
    latestOffset(start, limit)       -> end: queue windows, data-loss check,
                                        AvailableNow target, maxOffsetsPerTrigger
    partitions(start, end)           -> one QueuePartition per queue with end > start
    commit(end)                      -> group offsets to the broker (option 'group')

With ``namesrv`` a queue is (topic, broker, queue): the driver asks the
NameServer which brokers serve each topic, picks up brokers that joined,
fails (or warns) for brokers that left with unread data, and puts the owning
broker's address in each partition.

Executor side, ``read(partition)`` pulls [start, end) in Arrow pages with its
own HTTP client (from the partition's broker address, never the NameServer)
and yields ``pyarrow.RecordBatch`` in the Spark schema. The reader objects
are pickled to executors, so they hold options, never clients.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from .brokers import Brokers, open_brokers
from .client import BrokerClient, Page
from .discovery import check_data_loss, check_gone_brokers, discover, starting_offsets
from .errors import (
    BrokerRequestError,
    BrokerUnavailableError,
    DataLossError,
    NamesrvUnavailableError,
    OptionError,
    SparkMQError,
    TopicNotFoundError,
)
from .offsets import QueueKey, RangePlan, from_json, plan_end, plan_ranges, to_json
from .options import LATEST, ClientConfig, ReaderOptions
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
    broker: str = ""
    address: str = ""

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
    config = opts.client
    if part.address:
        config = ClientConfig(endpoints=(part.address,), timeout_s=opts.client.timeout_s)
    with BrokerClient(config) as client:
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
                    f"{part.where}: broker did not advance past offset {cur} "
                    f"(status {page.status}, next {nxt})"
                )
            cur = nxt


class _ClientHolder:
    """Lazily builds the driver-side broker view; drops it when pickled."""

    _opts: ReaderOptions
    _client: Brokers | None = None

    @property
    def client(self) -> Brokers:
        if self._client is None:
            self._client = open_brokers(self._opts.client)
        return self._client

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_client"] = None
        return state

    def _partition(self, plan: RangePlan, fail: bool) -> QueuePartition | None:
        """A partition with its broker's address; None (warned) if the broker is gone."""
        address = ""
        if plan.broker:
            address = self.client.address(plan.broker)
            if not address:
                try:
                    address = self.client.serving(plan.topic).get(plan.broker, "")
                except TopicNotFoundError:
                    address = ""
            if not address:
                text = (f"{plan.topic}@{plan.broker}/{plan.queue_id}: offsets [{plan.start}, "
                        f"{plan.end}) were planned but broker {plan.broker!r} no longer serves "
                        f"topic {plan.topic!r} according to the NameServer")
                if fail:
                    raise DataLossError(text + ". Restart that broker, or set "
                                        ".option('failOnDataLoss', 'false') to skip them.")
                log.warning("%s; failOnDataLoss=false, skipping", text)
                return None
        return QueuePartition(plan.topic, plan.queue_id, plan.start, plan.end, plan.new_queue,
                              plan.broker, address)

    def _check_shape(self, flat: dict[QueueKey, int]) -> dict[QueueKey, int]:
        routed = self._opts.client.routed
        if any((len(k) == 3) != routed for k in flat):
            have, want = ("'endpoint'", "'namesrv'") if routed else ("'namesrv'", "'endpoint'")
            raise OptionError(
                f"the checkpoint's offsets were written by a query using {have}, and this "
                f"query uses {want}: offsets with and without a broker level cannot be "
                "mixed. Use a new checkpointLocation (and startingOffsets) for this query."
            )
        return flat


class SparkMQStreamReader(_ClientHolder, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """readStream: one partition per (topic, queue) per micro-batch."""

    def __init__(self, opts: ReaderOptions) -> None:
        self._opts = opts
        self._client = None
        self._target: dict[QueueKey, int] | None = None
        self._latest: dict[QueueKey, int] | None = None
        self._known_max: dict[QueueKey, int] = {}
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
        begin = self._check_shape(from_json(start))
        ranges = discover(self.client, self._opts, strict=False)
        fail = self._opts.fail_on_data_loss
        matches = self._opts.subscription.matches
        check_data_loss(begin, ranges, fail=fail, subscribed=matches)
        if self.client.routed:
            check_gone_brokers(begin, ranges, self._known_max, fail=fail, subscribed=matches)
            self._known_max.update({key: rng.max_offset for key, rng in ranges.items()})
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        end = plan_end(begin, ranges, target=self._target, max_rows=max_rows)
        self._latest = {key: rng.max_offset for key, rng in ranges.items()}
        return to_json(end)

    def reportLatestOffset(self) -> dict | None:
        return to_json(self._latest) if self._latest is not None else None

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        plans = plan_ranges(from_json(start), from_json(end))
        parts = [self._partition(p, self._opts.fail_on_data_loss) for p in plans]
        return [p for p in parts if p is not None]

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
        per_owner: dict[tuple[str, ...], dict[int, int]] = {}
        for key, off in from_json(processed).items():
            per_owner.setdefault(tuple(key[:-1]), {})[int(key[-1])] = off  # type: ignore[arg-type]
        for owner, offsets in sorted(per_owner.items()):
            try:
                client = self.client.client_for((*owner, 0))  # type: ignore[arg-type]
                client.commit_group(self._opts.group, owner[0], offsets)
            except (BrokerUnavailableError, BrokerRequestError, NamesrvUnavailableError) as exc:
                # The checkpoint, not the group, is the source of truth; keep going.
                log.warning("could not report group %r offsets for %s: %s",
                            self._opts.group, "@".join(owner), exc)
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
            check_data_loss(start, ranges, fail=opts.fail_on_data_loss)
            parts: list[InputPartition] = []
            for key in sorted(ranges):
                rng = ranges[key]
                s = max(start[key], rng.min_offset)
                e = min(end[key], rng.max_offset)
                if e > s:
                    plan = plan_ranges({key: s}, {key: e})[0]
                    part = self._partition(plan, opts.fail_on_data_loss)
                    if part is not None:
                        parts.append(part)
            return parts
        finally:
            self.client.close()
            self._client = None

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, QueuePartition):
            return iter(())  # Spark adds one empty partition when there are none
        return read_partition(self._opts, partition)
