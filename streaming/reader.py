"""The stream and batch readers: consume queues as Spark partitions.

Driver side, per micro-batch::

    initialOffset()                  -> {"$initial": 1, "orders": {"0": 0, "1": 0, ...}}
                                        (resolved once per reader; batch 0's end
                                        carries it into the checkpoint, see offsets)
    latestOffset(start, limit)       -> end: queue windows, down brokers, data-loss
                                        check, AvailableNow target, min/maxOffsetsPerTrigger
    partitions(start, end)           -> one QueuePartition per queue with end > start
                                        (cut further by minPartitions/maxRecordsPerPartition)
    commit(end)                      -> group offsets to the broker (option 'group')

With ``namesrv`` a queue is (topic, broker, queue): the driver asks the
NameServer which brokers serve each topic, picks up brokers that joined,
and puts the owning broker's addresses (master first, or whichever answered
last) in each partition. A broker that does not answer, or left the routes
while the checkpoint holds offsets for it, is *down*: its queues keep their
offsets while the others advance, and the query fails only after
``brokerDownTimeoutMs`` (see :mod:`outages`).

Executor side, ``read(partition)`` is :func:`pull.read_partition`. The
reader objects are pickled to executors, so they hold options, never clients.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

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
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from .brokers import Brokers, open_brokers
from .discovery import check_data_loss, discover, starting_offsets
from .errors import (
    BrokerRequestError,
    BrokerUnavailableError,
    NamesrvUnavailableError,
    OptionError,
    TopicNotFoundError,
)
from .offsets import (
    FROM,
    INITIAL,
    QueueKey,
    QueueRange,
    RangePlan,
    batch_start,
    from_json,
    initial_json,
    key_broker,
    plan_end,
    plan_ranges,
    split_plans,
    to_json,
)
from .options import LATEST, ReaderOptions
from .outages import BrokerOutages
from .pull import QueuePartition, read_partition

__all__ = ["QueuePartition", "read_partition", "SparkMQStreamReader", "SparkMQBatchReader"]

log = logging.getLogger("sparkmq.streaming")


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
        """A partition with its broker's addresses; None (warned) if it is skipped."""
        addresses = self.client.addresses(plan.broker)
        if plan.broker and not addresses:
            addresses = self._wait_for_route(plan, fail)
            if not addresses:
                return None
        return QueuePartition(plan.topic, plan.queue_id, plan.start, plan.end, plan.new_queue,
                              plan.broker, addresses)

    def _wait_for_route(self, plan: RangePlan, fail: bool) -> tuple[str, ...]:
        """Addresses of a planned range's broker that left the routes (a replayed batch).

        The range is in Spark's offset log, so it must be read: wait (bounded
        by brokerDownTimeoutMs) for the broker to register again.
        """
        where = f"{plan.topic}@{plan.broker}/{plan.queue_id}"
        deadline = time.monotonic() + self._opts.broker_down_timeout_ms / 1000.0
        for _ in range(10_000):
            try:
                self.client.refresh(plan.topic)
            except (TopicNotFoundError, NamesrvUnavailableError) as exc:
                log.debug("route look-up for %s: %s", where, exc)
            addresses = self.client.addresses(plan.broker)
            left = deadline - time.monotonic()
            if addresses or left <= 0:
                break
            log.warning("%s: offsets [%d, %d) were planned but broker %r is not in the "
                        "NameServer routes; waiting for it (%.0f s left)", where, plan.start,
                        plan.end, plan.broker, left)
            time.sleep(min(5.0, left))
        if addresses:
            return addresses
        text = (f"{where}: offsets [{plan.start}, {plan.end}) were planned but broker "
                f"{plan.broker!r} has not been in the NameServer routes for "
                f"brokerDownTimeoutMs={self._opts.broker_down_timeout_ms}")
        if fail:
            raise BrokerUnavailableError(text + ". Restart that broker, or set "
                                         ".option('failOnDataLoss', 'false') to skip them.",
                                         broker=plan.broker)
        log.warning("%s; failOnDataLoss=false, skipping", text)
        return ()

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
        self._outages = BrokerOutages(opts.broker_down_timeout_ms, opts.fail_on_data_loss)
        self._reported: dict | None = None
        self._initial: dict | None = None
        self._last_trigger = time.monotonic()

    def initialOffset(self) -> dict:
        """The resolved start, the same for every call on this reader (see offsets)."""
        if self._initial is not None:
            return self._initial
        ranges = self._discover({}, strict=True, tolerate=False)
        for broker, exc in sorted(self.client.unavailable.items()):
            log.warning("broker %r does not answer at query start (%s); its queues join the "
                        "query when it answers, read from their earliest offsets", broker, exc)
        start = starting_offsets(
            self.client, self._opts, ranges, self._opts.starting, name="startingOffsets"
        )
        check_data_loss(start, ranges, fail=self._opts.fail_on_data_loss)
        self._initial = initial_json(start)
        return self._initial

    def getDefaultReadLimit(self) -> ReadLimit:
        """maxOffsetsPerTrigger, else minOffsetsPerTrigger, else all (Spark passes
        ReadAllAvailable instead under Trigger.AvailableNow, where no trigger waits)."""
        most, least = self._opts.max_offsets_per_trigger, self._opts.min_offsets_per_trigger
        if most:
            return ReadMaxRows(most)
        return ReadMinRows(least) if least else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        ranges = self._discover({}, strict=False, tolerate=True)
        self._target = {key: rng.max_offset for key, rng in ranges.items()}

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        self._report_group(start)
        begin = self._check_shape(from_json(start))
        ranges = self._discover(begin, strict=False, tolerate=True)
        fail = self._opts.fail_on_data_loss
        matches = self._opts.subscription.matches
        self._outages.update(begin, ranges, self.client, matches)
        if "" not in self.client.unavailable:
            check_data_loss(begin, ranges, fail=fail, subscribed=matches)
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        end = plan_end(begin, ranges, target=self._target, max_rows=max_rows)
        self._latest = {key: rng.max_offset for key, rng in ranges.items()}
        if self._delay(begin, end, limit):
            return start
        if start.get(INITIAL):
            return {FROM: to_json(begin), **to_json(end)}  # batch 0 keeps its start
        if FROM in start and end == begin:
            return start  # nothing new after batch 0: the same string, no empty batch
        return to_json(end)

    def _delay(self, begin: dict[QueueKey, int], end: dict[QueueKey, int],
               limit: ReadLimit) -> bool:
        """minOffsetsPerTrigger: wait for that many new offsets, at most maxTriggerDelay."""
        least = self._opts.min_offsets_per_trigger
        if least is None or isinstance(limit, ReadAllAvailable) or self._target is not None:
            return False
        now = time.monotonic()
        waited_ms = (now - self._last_trigger) * 1000
        new = sum(end[k] - begin.get(k, 0) for k in end)
        if new < least and waited_ms < self._opts.max_trigger_delay_ms:
            log.debug("%d new offsets < minOffsetsPerTrigger=%d; waiting (%.0f ms of %d)",
                      new, least, waited_ms, self._opts.max_trigger_delay_ms)
            return True
        self._last_trigger = now
        return False

    def _discover(
        self, begin: dict[QueueKey, int], *, strict: bool, tolerate: bool
    ) -> dict[QueueKey, QueueRange]:
        """Queue windows of the brokers that answer; the others land in ``unavailable``.

        With ``tolerate`` (the query is running), a broker (``endpoint``) or
        NameServer (``namesrv``, no routes seen yet) that does not answer
        makes every queue in ``begin`` wait, rather than failing the batch.
        """
        view = self.client
        view.new_round()
        try:
            return discover(view, self._opts, strict=strict)
        except BrokerUnavailableError as exc:
            if view.routed or not tolerate:
                raise
            view.unavailable[""] = exc
        except NamesrvUnavailableError as exc:
            if not tolerate:
                raise
            for broker in sorted({key_broker(k) for k in begin}):
                view.unavailable[broker] = BrokerUnavailableError(str(exc), broker=broker)
        return {}

    def reportLatestOffset(self) -> dict | None:
        return to_json(self._latest) if self._latest is not None else None

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        plans = plan_ranges(batch_start(start, end), from_json(end))
        plans = split_plans(plans, self._opts.min_partitions, self._opts.max_records_per_partition)
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
        reported from there too. A broker that is down misses this report and
        gets the next one.
        """
        if self._opts.group is None or processed == self._reported:
            return
        per_owner: dict[tuple[str, ...], dict[int, int]] = {}
        for key, off in from_json(processed).items():
            per_owner.setdefault(tuple(key[:-1]), {})[int(key[-1])] = off  # type: ignore[arg-type]
        done = True
        for owner, offsets in sorted(per_owner.items()):
            try:
                client = self.client.client_for((*owner, 0))  # type: ignore[arg-type]
                client.commit_group(self._opts.group, owner[0], offsets)
            except (BrokerUnavailableError, BrokerRequestError, NamesrvUnavailableError) as exc:
                # The checkpoint, not the group, is the source of truth; keep going.
                log.warning("could not report group %r offsets for %s: %s",
                            self._opts.group, "@".join(owner), exc)
                done = False
        if done:
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
            self._check_unavailable()
            start = starting_offsets(self.client, opts, ranges, opts.starting,
                                     name="startingOffsets")
            end = starting_offsets(self.client, opts, ranges, opts.ending,
                                   name="endingOffsets", missing=LATEST)
            check_data_loss(start, ranges, fail=opts.fail_on_data_loss)
            plans: list[RangePlan] = []
            for key in sorted(ranges):
                rng = ranges[key]
                s = max(start[key], rng.min_offset)
                e = min(end[key], rng.max_offset)
                if e > s:
                    plans.append(plan_ranges({key: s}, {key: e})[0])
            plans = split_plans(plans, opts.min_partitions, opts.max_records_per_partition)
            parts = [self._partition(p, opts.fail_on_data_loss) for p in plans]
            return [p for p in parts if p is not None]
        finally:
            self.client.close()
            self._client = None

    def _check_unavailable(self) -> None:
        """Fail for brokers that did not answer, unless skipUnavailableBrokers is set."""
        down = self.client.unavailable
        if not down:
            return
        text = "; ".join(f"broker {b!r} ({', '.join(self.client.addresses(b))}): {exc}"
                         for b, exc in sorted(down.items()))
        if self._opts.skip_unavailable_brokers:
            log.warning("batch read without the queues of brokers that do not answer "
                        "(skipUnavailableBrokers=true): %s", text)
            return
        first = sorted(down)[0]
        raise BrokerUnavailableError(
            f"a batch read needs every broker serving the topic, and these do not answer: "
            f"{text}. Restart them, or set .option('skipUnavailableBrokers', 'true') to read "
            "only the queues of the brokers that answer.",
            broker=first, address=",".join(self.client.addresses(first)),
        )

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, QueuePartition):
            return iter(())  # Spark adds one empty partition when there are none
        return read_partition(self._opts, partition)
