"""MessageStore: the facade that wires the store's parts together.

::

    root/
      lock              flock'd while open (a second process is refused)
      abort             present while running; found at start = unclean stop
      checkpoint        JSON, replaced atomically
      commitlog/<20-digit start offset>
      consumequeue/<topic>/<queue id>/<20-digit start byte>
      index/<index files>

Start-up: lock → recover the CommitLog → recover ConsumeQueues and index →
re-dispatch synchronously up to the log's end → rebuild the queue-offset
table → start reput, flush, logics-flush and retention services.

Replication (``store.ha``) uses four calls here: ``read_commitlog`` and
``add_append_listener`` on a master, ``append_replicated`` on a slave, and
``min_phy_offset``/``max_phy_offset`` on both.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Sequence, TypeVar

from . import codec, pull
from .checkpoint import StoreCheckpoint
from .columns import ColumnExtra, ColumnGroup, ColumnPutResult, ColumnRows, put_groups
from .packed import PackedBodies
from .commitlog import CommitLog
from .config import StoreConfig
from .consume_queue_store import ConsumeQueueStore
from .dispatch import DispatchBatch, Dispatcher
from .errors import DiskFullError, MessageNotFoundError, StoreClosedError
from .flush import FlushStats, GroupCommitService, LogicsFlushService, make_flusher
from .index_service import IndexService
from .lockfile import StoreLock
from .message import GetResult, GetStatus, Message, PutResult, StoredMessage
from .quarantine import QuarantinedRecord
from .recovery import recover_store
from .retention import RetentionService
from .reput import ReputService

__all__ = ["MessageStore", "ArrivalListener", "AppendListener"]

_log = logging.getLogger(__name__)

ArrivalListener = Callable[[str, int, int], None]  # from the reput thread: (topic, queue_id, new_max_offset)
AppendListener = Callable[[int], None]  # by the appending thread, with the CommitLog's new max offset


# Pull statuses that mean "nothing there": worth a second look once dispatch has caught up.
_NOTHING = frozenset({GetStatus.NO_QUEUE, GetStatus.NO_NEW_MESSAGE, GetStatus.NO_MATCHED_MESSAGE,
                      GetStatus.OFFSET_OVERFLOW})
_SETTLE_S = 1.0
_Page = TypeVar("_Page", GetResult, pull.PullBatch, pull.PullColumns | pull.PullBatch)

class MessageStore:
    def __init__(self, config: StoreConfig) -> None:
        self.config = config
        root = config.root
        self.commitlog = CommitLog(root / "commitlog", config.commitlog_segment_bytes, config.store_host,
                                   config.verify_crc_on_read)
        self.queues = ConsumeQueueStore(root / "consumequeue", config.consumequeue_segment_units)
        self.index = IndexService(root / "index", config.index_slots, config.index_entries)
        self.checkpoint = StoreCheckpoint(root / "checkpoint")
        self.reput = ReputService(self.commitlog, self.queues, config.reput_batch_bytes)
        self.reput.dispatchers.append(self.index)
        self.flush_stats = FlushStats()
        # SYNC: the reput is woken once per group commit (every put waits for a flush)
        self._flusher = make_flusher(self.commitlog, config, self.flush_stats, self.reput.notify)
        self._logics = LogicsFlushService(config.checkpoint_interval_ms, self._flush_logics)
        self._retention = RetentionService(
            self.commitlog, root, config.retention_hours, config.disk_soft_limit_ratio,
            config.disk_hard_limit_ratio, config.retention_check_interval_s, self._after_retention,
            lambda: self.reput.reput_offset)
        self._lock = StoreLock(root)
        self.max_message_bytes = min(config.max_message_bytes, config.commitlog_segment_bytes - codec.MIN_BLANK)
        self._born_host = codec.encode_host(config.store_host)
        self._state_lock = threading.Lock()
        self._running = False
        self.abnormal_start = False
        self.recovery: dict[str, object] = {}
        self._append_listeners: list[AppendListener] = []
        self.damaged_reads = 0  # pulls answered CORRUPT_MESSAGE

    # -- lifecycle -------------------------------------------------------
    def start(self) -> None:
        with self._state_lock:
            if self._running:
                return
            self.abnormal_start = self._lock.acquire()
            try:
                self._recover()
            except BaseException:
                self._close_files()
                self._lock.release(clean=False)
                raise
            self.commitlog.on_append = self._appended
            for svc in (self.reput, self._flusher, self._logics, self._retention):
                svc.start()
            self._running = True

    def _recover(self) -> None:
        self.recovery = recover_store(self, self._flush_logics)
        for rec in self.commitlog.quarantine.records():  # every start names them, not only the one that found them
            _log.warning("quarantined CommitLog record (damaged, kept; a read of it answers CORRUPT_MESSAGE): %s",
                         rec.describe())

    def shutdown(self) -> None:
        with self._state_lock:
            if not self._running:
                return
            self._running = False
            with self.commitlog.write_lock:  # wait for in-flight appends
                pass
            for svc in (self._retention, self._logics, self._flusher, self.reput):
                svc.stop()
            self.commitlog.flush()
            self._flush_logics()
            self._close_files()
            self._lock.release(clean=True)

    def _close_files(self) -> None:
        self.index.close()
        self.queues.close()
        self.commitlog.close()

    def _check_running(self) -> None:
        if not self._running:
            raise StoreClosedError("the message store is not running; call start() first")

    def _flush_logics(self) -> None:
        reput_at = self.reput.reput_offset
        self.queues.flush()
        self.index.flush()
        now = int(time.time() * 1000)
        self.checkpoint.update(commitlog_flushed=self.commitlog.queue.flushed_offset(), commitlog_ts=now,
                               logics_flushed=reput_at, logics_ts=now)

    def _after_retention(self, commitlog_min: int) -> None:
        self.queues.correct_min_offsets(commitlog_min)
        self.index.delete_files_before(commitlog_min)
        quarantine = self.commitlog.quarantine
        if quarantine.between(0, commitlog_min):
            quarantine.keep_within(commitlog_min, 1 << 62)
            quarantine.save()

    # -- write -----------------------------------------------------------
    def put_messages(self, messages: list[Message], wait: bool = True) -> list[PutResult]:
        """Append a batch atomically; with SYNC flush, returns once it is on disk (with
        ``wait=False`` at once: then ``await wait_flushed(results)``)."""
        if not messages:
            self._check_running()
            return []
        self._check_writable()
        batch = codec.prepare_batch(messages, int(time.time() * 1000), self._born_host, self.max_message_bytes)
        res = self.commitlog.append(batch)
        ids = codec.make_msg_ids(self.commitlog.store_host, res.phy_offsets)
        n, ts = len(messages), res.store_timestamp
        results = list(map(PutResult._make, zip(ids, [m.topic for m in messages], batch.queue_ids,
                                                res.queue_offsets, res.phy_offsets, batch.sizes, [ts] * n)))
        if wait:  # a timeout's FlushTimeoutError carries the results: the caller answers FLUSH_DISK_TIMEOUT
            self._flusher.wait_for(res.end_offset, results)
        return results

    async def wait_flushed(self, results: list[PutResult]) -> None:
        """After ``put_messages(..., wait=False)``: with SYNC flush, awaits the group fdatasync that
        covers ``results`` on the running loop, holding no thread; answers as ``put_messages``."""
        if results:
            await self._flusher.wait_async(results[-1].phy_offset + results[-1].size, results)

    def put_columns(self, topic: str, queue_id: int, bodies: Sequence[bytes] | PackedBodies, *,
                    keys: Sequence[str] | None = None, tags: str | None = None) -> ColumnPutResult:
        """Append messages of one topic and queue given as columns (see :mod:`store.columns`):
        one body per message, optional one key per message, one tag for all.  Atomic; with
        SYNC flush, returns once it is on disk."""
        return self.put_column_groups(topic, [(queue_id, bodies, keys)], tags)[0]

    def put_column_groups(self, topic: str, groups: Sequence[ColumnGroup], tags: str | None = None,
                          extra: ColumnExtra = None, rows: ColumnRows = None) -> list[ColumnPutResult]:
        """``put_columns`` for several queues of a topic (``extra``: every message's properties and sys flag;
        ``rows``: columns.GroupRows per group), all validated first; a SYNC flush timeout carries the results."""
        self._check_writable()
        return put_groups(self.commitlog, self._flusher.wait_for, topic, groups, tags, self._born_host,
                          self.max_message_bytes, extra, rows)

    def _check_writable(self) -> None:
        self._check_running()
        if self._retention.disk_full:
            raise DiskFullError(f"disk use {self._retention.last_ratio:.0%} passed the hard limit "
                                f"{self.config.disk_hard_limit_ratio:.0%}; free space or lower retention")

    def append_replicated(self, phy_offset: int, data: bytes) -> int:
        """Slave: write raw CommitLog bytes from the master at the same physical offset.

        Whole, valid records only (see CommitLog.append_replicated); returns the bytes of ``data``
        consumed (the caller keeps a partial record for the next frame); reput then builds the queues
        and index as on the master. With SYNC flush, returns once an fdatasync covers them."""
        self._check_running()
        used = self.commitlog.append_replicated(phy_offset, data)
        if used:
            self._flusher.wait_for(self.commitlog.max_offset())
        return used

    def _appended(self, end: int) -> None:
        if not isinstance(self._flusher, GroupCommitService):  # SYNC: woken once per group commit
            self.reput.notify(end)
        for listener in self._append_listeners:
            listener(end)

    def add_append_listener(self, listener: AppendListener) -> None:
        """Call ``listener(new_max_offset)`` after every append (the HA master wakes its senders)."""
        self._append_listeners = [*self._append_listeners, listener]

    def remove_append_listener(self, listener: AppendListener) -> None:
        self._append_listeners = [x for x in self._append_listeners if x is not listener]

    # -- read ------------------------------------------------------------
    def min_phy_offset(self) -> int:
        """First CommitLog offset still on disk (start of the oldest retained segment)."""
        return self.commitlog.min_offset()

    def max_phy_offset(self) -> int:
        """CommitLog offset just past the last whole record."""
        return self.commitlog.max_offset()

    def read_commitlog(self, phy_offset: int, max_bytes: int) -> bytes:
        """Raw CommitLog bytes from ``phy_offset`` up to the write position of its segment
        (RocketMQ's getCommitLogData); empty when nothing is there.  Never crosses a segment."""
        self._check_running()
        try:
            return self.commitlog.read_chunk(phy_offset, max_bytes)
        except ValueError:  # segment deleted by retention meanwhile
            return b""

    def get_messages(self, topic: str, queue_id: int, offset: int, max_count: int = 32,
                     tags: frozenset[str] | None = None, max_bytes: int | None = None, *,
                     settle: bool = True) -> GetResult:
        """A page of one queue.  Finding nothing while the dispatcher is behind, it waits (at most
        1 s) for what was put before the call and looks again, unless ``settle`` is False."""
        return self._read(pull.pull, topic, queue_id, offset, max_count, tags, max_bytes, settle)

    def get_message_batch(self, topic: str, queue_id: int, offset: int, max_count: int = 1000,
                          tags: frozenset[str] | None = None, max_bytes: int | None = None, *,
                          settle: bool = True) -> pull.PullBatch:
        """Same page as get_messages, as columns (DispatchBatch): the fast path for Arrow pulls."""
        return self._read(pull.pull_batch, topic, queue_id, offset, max_count, tags, max_bytes, settle)

    def get_message_columns(self, topic: str, queue_id: int, offset: int, max_count: int = 1000,
                            tags: frozenset[str] | None = None, max_bytes: int | None = None, *,
                            settle: bool = True) -> pull.PullColumns | pull.PullBatch:
        """Same page as get_message_batch, as flat buffers when it can be (see pull.pull_page)."""
        return self._read(pull.pull_page, topic, queue_id, offset, max_count, tags, max_bytes, settle)

    def _read(self, read: Callable[..., _Page], topic: str, queue_id: int, offset: int, max_count: int,
              tags: frozenset[str] | None, max_bytes: int | None, settle: bool) -> _Page:
        """One page through ``read``; a second look after settling when it found nothing."""
        self._check_running()
        result = read(self.commitlog, self.queues.get(topic, queue_id), offset, max_count, tags, max_bytes)
        if settle and result.status in _NOTHING and self._settled():
            result = read(self.commitlog, self.queues.get(topic, queue_id), offset, max_count, tags, max_bytes)
        if result.damaged is not None:
            self.damaged_reads += 1
            _log.error("%s; the pull answered CORRUPT_MESSAGE with next offset %d",
                       result.damaged.describe(), result.next_offset)
        return result

    def _settled(self) -> bool:
        """Read your writes: if dispatch is behind, wait for what was put before now; True if it waited."""
        return self.dispatch_behind and self.wait_visible(_SETTLE_S)

    def quarantined(self) -> list[QuarantinedRecord]:
        """Damaged records recovery kept instead of cutting the log after them (see :mod:`.quarantine`):
        physical offset, size, reason, and topic, queue and queue offset when their header could be read."""
        return self.commitlog.quarantine.records()

    def get_message(self, msg_id: str) -> StoredMessage:
        self._check_running()
        return self.commitlog.read_message(codec.parse_msg_id(msg_id)[1])

    def wait_visible(self, timeout_s: float = 1.0) -> bool:
        """Wait until what is appended now is dispatched (pulls, offsets, keys see it); False after ``timeout_s``."""
        self._check_running()
        return self.reput.wait_for(self.reput.dispatch_end(), timeout_s)

    def settled_reput_offset(self, timeout_s: float) -> int:
        """The reput offset once what is appended now is dispatched, or after ``timeout_s`` (also while stopping)."""
        self.reput.wait_for(self.reput.dispatch_end(), timeout_s)
        return self.reput.reput_offset

    def limit_to_confirm_offset(self, confirm: Callable[[], int] | None) -> None:
        """Controller mode: dispatch (so every read) stops at ``confirm()``; None lifts the limit."""
        self.reput.end_limit = confirm
        self.reput.notify()

    def confirm_offset(self) -> int:
        """The CommitLog offset consumers may read below (the high watermark); the log's end without a limit."""
        return self.reput.dispatch_end()

    @property
    def dispatch_behind(self) -> bool:
        """Whether appended messages are still waiting for the reput dispatcher."""
        return self.reput.behind_bytes > 0

    def query_by_key(self, topic: str, key: str, begin_ms: int, end_ms: int, max_count: int = 64) -> list[StoredMessage]:
        self._check_running()
        self._settled()
        phys = self.index.query(topic, key, begin_ms, end_ms, max_count * 2)
        hits = [m for m in pull.read_many(self.commitlog, phys)
                if m.topic == topic and key in m.keys and begin_ms <= m.store_timestamp <= end_ms]
        return hits[:max_count]

    def min_offset(self, topic: str, queue_id: int) -> int:
        cq = self.queues.get(topic, queue_id)
        return cq.min_offset() if cq else 0

    def max_offset(self, topic: str, queue_id: int) -> int:
        cq = self.queues.get(topic, queue_id)
        return cq.max_offset() if cq else 0

    def offset_for_timestamp(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        cq = self.queues.get(topic, queue_id)
        if cq is None:
            return 0
        return cq.offset_for_timestamp(timestamp_ms, self._store_time)

    def _store_time(self, phy: int, size: int) -> int:
        try:
            return self.commitlog.read_message(phy, size).store_timestamp
        except MessageNotFoundError:
            return -1

    def topics(self) -> dict[str, list[int]]:
        return self.queues.topics()

    def delete_topic(self, topic: str) -> None:
        with self.commitlog.write_lock:
            self.queues.delete_topic(topic)
            for key in [k for k in self.commitlog.topic_queue_table if k[0] == topic]:
                del self.commitlog.topic_queue_table[key]

    # -- dispatch hooks --------------------------------------------------
    def add_arrival_listener(self, listener: ArrivalListener) -> None:
        self.reput.listeners.append(listener)

    def add_dispatcher(self, dispatcher: Dispatcher) -> None:
        self.reput.dispatchers.append(dispatcher)

    def remove_dispatcher(self, dispatcher: Dispatcher) -> None:
        if dispatcher in self.reput.dispatchers:
            self.reput.dispatchers.remove(dispatcher)

    def read_records(self, msg_ids: list[str]) -> DispatchBatch:
        """The messages with these ids as columns, in CommitLog order; ids whose records are gone
        (retention) are left out.  Much faster than ``get_message`` per id for records written together."""
        self._check_running()
        return pull.read_records(self.commitlog, [codec.parse_msg_id(m)[1] for m in msg_ids])

    def read_dispatch_batches(self, from_offset: int, max_bytes: int = 8 << 20) -> Iterator[DispatchBatch]:
        """Parse the CommitLog from a record boundary up to its current end."""
        self._check_running()
        offset, end = from_offset, self.reput.reput_offset
        while offset < end:
            batch, offset = self.commitlog.read_batch(offset, max_bytes)
            if batch is not None:
                yield batch

    # -- operations ------------------------------------------------------
    def limit_retention(self, below: Callable[[], int]) -> None:
        """Retention deletes local segments only below ``below()`` too (tiered storage: what is uploaded)."""
        dispatched = self._retention.dispatched
        self._retention.dispatched = lambda: min(dispatched(), below())

    def run_retention(self, force: bool = False) -> int:
        self._check_running()
        return self._retention.run_once(force)

    def stats(self) -> dict[str, object]:
        return {
            "commitlog_min_offset": self.commitlog.min_offset(),
            "commitlog_max_offset": self.commitlog.max_offset(),
            "commitlog_flushed_offset": self.commitlog.queue.flushed_offset(),
            "reput_offset": self.reput.reput_offset,
            "dispatch_behind_bytes": self.reput.behind_bytes,
            "flush_mode": self.config.flush_mode,
            **self.flush_stats.as_dict(),  # flushes, and with SYNC the group commits and their puts
            "disk_used_ratio": self._retention.last_ratio,
            "disk_full": self._retention.disk_full,
            "damaged_records_read": self.damaged_reads,
            "segments": len(self.commitlog.queue.files),
            "queues": len(self.queues.queues()),
            "recovery": self.recovery,
            "quarantined_records": len(self.commitlog.quarantine),
        }
