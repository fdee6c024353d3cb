"""The running broker (RocketMQ's BrokerController): wiring and lifecycle.

Start-up, as in the seeds: load metadata (consumer offsets, subscription
groups, topics) -> open and recover the store -> reconcile topics with the
store -> recover transactions -> start services (write pool, arrival
listener for long polling, Delta mirror, table topics) -> periodic jobs (persist offsets,
log store stats, expire transactions, slow-consumer protection).
``stop()`` reverses it: release parked pulls, stop jobs and writers, stop the
mirror and the table topics, persist offsets and transactions, shut the store down cleanly.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from store import MessageStore, StoreError
from store.tiered import TieredStorage

from .protection.disk import DiskState
from .protection.admission import Admission
from .batcher import ProduceBatcher
from .transactions.checkback import CheckBackService
from .model.delay import DelayService
from .protection.fastfail import WriteGate
from .model.groups import GroupManager
from .model.longpoll import PullWaiters
from .protection.memory import trim
from .metrics import Metrics
from .model.pop import PopService
from .cluster.wire import DataVersion
from .cluster.registration import BrokerIdentity, NamesrvRegistrar, topics_payload
from .cluster.replication import Replication
from .cluster.roles import ControllerReplication
from .settings.broker import BrokerSettings
from .client.auth import http_options
from .cluster.slave_sync import SlaveSyncService
from .model.tables import TableManager
from .tasks import PeriodicService
from .model.topics import TopicManager
from .transactions.service import HALF_TOPIC, TransactionService

__all__ = ["Broker"]

log = logging.getLogger(__name__)


class Broker:
    """Holds every part of a running broker; the FastAPI lifespan drives it."""

    def __init__(self, settings: BrokerSettings) -> None:
        self.settings = settings
        meta = settings.meta_path
        self.store = MessageStore(settings.store_config())
        tiered = settings.tiered_config()  # old segments in an object store: hooked in before the store opens
        self.tiered = TieredStorage(self.store, tiered) if tiered.enabled else None
        self.disk = DiskState(self.store)  # would a produce be 507 now: /readyz, /v1/broker (protection/disk.py)
        self.topics = TopicManager(meta / "topics.json", settings.broker.default_queues,
                                   settings.broker.auto_create_topics)
        self.groups = GroupManager(meta)
        self.gate = WriteGate(settings.fast_failure, inline=settings.store.flush_mode == "async",
                              max_wait_ms=settings.server.max_wait_ms)
        self.admission = Admission(settings.server, settings.fast_failure.retry_after_s)
        self.writer = ProduceBatcher(self.gate, self.store.put_messages,  # SYNC: awaits its fdatasync, no thread
                                     self.store.wait_flushed if settings.store.flush_mode == "sync" else None)
        self.transactions = TransactionService(self.store, meta, settings.transactions)
        self.delay = DelayService(self.store, settings.delay, meta)  # delay levels and timers; see delay.py
        self.checkback = CheckBackService(self.transactions, self.store, settings.transactions,
                                          lambda name: self.topics.create(name, 1, "rw", exist_ok=True))
        self.metrics = Metrics()
        # POP, retry and DLQ (pop.py); retries wait in the delay service for level 3 + reconsume times
        self.pop = PopService(self.store, self.topics, self.groups, settings.pop, self.delay.levels_ms,
                              lambda m, level: self.delay.transform(m, delay_level=level))
        # controller mode ([ha] controller): the controller assigns the role (cluster/roles.py)
        self.replication = (ControllerReplication(settings, self.store) if settings.ha.controller
                            else Replication(settings, self.store))
        # table topics: a Delta table per topic with table mode raw/typed (tables.py); masters write them
        self.tables = TableManager(settings, self.store, self.topics, self.replication.is_slave)
        self.slave_sync: SlaveSyncService | None = None
        self.periodic = PeriodicService()
        self.waiters: PullWaiters | None = None
        self.mirror: Any = None
        self.registrar: NamesrvRegistrar | None = None
        self.data_version = DataVersion()
        self.topics.listeners.append(self._topics_changed)
        self.ready = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self.admin_address: str | None = None  # the control listener's host:port, once it listens
        self.kafka: Any = None  # the Kafka listener ([kafka] port >= 0; broker_api.kafka)
        self._round_robin: dict[str, int] = {}

    @property
    def address(self) -> str:
        return f"{self.settings.broker.host}:{self.settings.broker.port}"

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self.settings.meta_path.mkdir(parents=True, exist_ok=True)
        self.groups.load()
        if isinstance(self.replication, ControllerReplication):
            self.replication.prepare()  # the role; a returning old master cuts its own tail before the store opens
            self.replication.on_role_change = self._role_changed
        self.store.start()
        if self.tiered is not None:
            self.tiered.start()
        self.topics.load(self.store)
        self.topics.ensure_system(HALF_TOPIC)
        self.transactions.start()
        self.delay.start(deliver=not self.replication.is_slave)  # only a master delivers
        if not self.replication.is_slave:
            self.checkback.start()  # only a master checks
        if not self.replication.is_slave:  # a slave's store only takes the master's bytes
            self.pop.start()
        self.waiters = PullWaiters(loop)
        self.store.add_arrival_listener(self.waiters.on_arrival)
        self.gate.start(loop)
        self._start_replication(loop)
        self.mirror = self._start_mirror()
        if self.tiered is not None and self.mirror is not None and self.settings.mirror.host == "process":
            mirror = self.mirror  # the child reads the local segment files: keep them until it has
            self.tiered.hold_below(lambda: int(mirror.lag()["mirrored_offset"]))
        self.tables.start()
        self._schedule()
        self.periodic.start()
        self._start_kafka(loop)
        self.ready = True

    def start_registration(self, address: str) -> None:
        """Register with the NameServers of ``[broker] namesrv_addr`` (if any) as ``address``.

        Called once the HTTP socket listens, so ``address`` is the real one.
        """
        b = self.settings.broker
        if not b.namesrv_addr or self.registrar is not None:
            return
        self._registered_as = address
        broker_id = b.broker_id
        if isinstance(self.replication, ControllerReplication):
            broker_id = max(self.replication.broker_id, 0)
        identity = BrokerIdentity(b.cluster, b.name, broker_id, address,
                                  self.replication.ha_address(self.settings.advertised_host()))
        self.registrar = NamesrvRegistrar(b.namesrv_addr, identity, lambda: topics_payload(self.topics.list()),
                                          lambda: self.data_version, interval_s=b.register_interval_s,
                                          token=self.settings.auth.token, ca_file=self.settings.tls.ca_file)
        self.registrar.start()

    def _role_changed(self, role: str, broker_id: int) -> None:
        """Controller mode: the role or id changed in place; re-register and start or stop the role's services."""
        log.warning("role is now %s (broker id %d)", role, broker_id)
        slave = self.replication.is_slave
        if slave and self.slave_sync is None and self._loop is not None:
            self._start_slave_sync()
            self.checkback.stop()
            self.pop.stop()
        elif not slave:
            if self.slave_sync is not None:
                self.slave_sync.stop()
                self.slave_sync = None
            self.checkback.start()
            self.pop.start()
        if self.delay.delivering == slave:  # only a master delivers delayed messages
            self.delay.stop()
            self.delay.start(deliver=not slave)
        b, address = self.settings.broker, getattr(self, "_registered_as", None)
        if self.registrar is not None and address:  # the same address under its new id, no unregister in between
            self.registrar.identity = BrokerIdentity(b.cluster, b.name, max(broker_id, 0), address,
                                                     self.replication.ha_address(self.settings.advertised_host()))
            self.registrar.register_now()

    def _topics_changed(self) -> None:
        self.data_version.next_version()
        if self.registrar is not None:
            self.registrar.register_now()

    def stop(self) -> None:
        self.ready = False
        if self.kafka is not None:
            self.kafka.stop()  # before the store: no Kafka request reaches a stopped store
        if self.registrar is not None:
            self.registrar.stop()  # unregister first: clients stop routing here
            self.registrar = None
        if self.waiters is not None:
            self.waiters.wake_all()
        self.periodic.stop()
        if self.slave_sync is not None:
            self.slave_sync.stop()
        self.replication.stop()
        self.gate.stop()
        if self.mirror is not None:
            self.mirror.stop()
        self.tables.stop()
        self.delay.stop()
        self.checkback.stop()
        self.transactions.stop()
        self.pop.stop()
        self.groups.persist()
        if self.tiered is not None:
            self.tiered.stop()
        self.store.shutdown()

    def _start_replication(self, loop: asyncio.AbstractEventLoop) -> None:
        """The HA port (masters) or the master link and metadata sync (slaves)."""
        self.replication.start(loop)
        self._loop = loop
        if self.replication.is_slave:
            self._start_slave_sync()
            self.periodic.add("follow-master", 1.0, lambda: self.replication.follow(self.registrar))

    def _start_slave_sync(self) -> None:
        credentials = http_options(self.settings.auth.token or None, ca_file=self.settings.tls.ca_file or None)
        self.slave_sync = SlaveSyncService(self.replication, self.topics, self.groups, self.store,
                                           self.settings.ha.metadata_sync_interval_s, self.delay, credentials)
        self.slave_sync.start()

    def _start_kafka(self, loop: asyncio.AbstractEventLoop) -> None:
        if self.settings.kafka.port < 0:
            return
        from .kafka import KafkaListener  # imports kio: only when the listener is on

        self.kafka = KafkaListener(self)
        self.kafka.start(loop)

    def _start_mirror(self) -> Any:
        if not self.settings.mirror.enabled:
            return None
        from connectors import MirrorConfig, open_mirror  # imports deltalake: only when enabled

        # [mirror] host: a thread here (default) or a child process reading the CommitLog read-only
        return open_mirror(self.store, MirrorConfig(**self.settings.mirror_values()))

    def _schedule(self) -> None:
        s = self.settings
        self.periodic.add("persist-offsets", s.groups.offsets_flush_interval_s, self.groups.persist)
        self.periodic.add("store-stats", s.broker.stats_log_interval_s, self._log_stats)
        self.periodic.add("expire-transactions", 1.0, self.transactions.expire)
        self.periodic.add("trim-memory", 5.0, trim)  # freed request memory goes back to the system
        if s.protection.disable_slow_consumers:
            self.periodic.add("protect-broker", s.protection.check_interval_s, self.protect)

    def _log_stats(self) -> None:
        log.info("store stats: %s", self.store.stats())

    # -- queries shared by routes, metrics and protection ----------------

    def settle(self, timeout_s: float = 1.0) -> None:
        """Read your writes: let dispatch catch up with what was stored before now (bounded).

        A produce is answered once the CommitLog holds it; the reput thread makes it visible
        to queues and the key index a moment later.  Reads that would miss it call this first."""
        if self.store.dispatch_behind:
            self.store.wait_visible(timeout_s)

    def queue_range(self, topic: str, queue_id: int) -> tuple[int, int]:
        """(min_offset, max_offset) of a queue; (0, 0) for a queue without data."""
        try:
            return self.store.min_offset(topic, queue_id), self.store.max_offset(topic, queue_id)
        except StoreError:
            return 0, 0

    def group_lag(self, group: str) -> list[dict[str, Any]]:
        """Per topic/queue: committed offset, max offset and lag of ``group``."""
        rows = []
        for topic, offsets in sorted(self.groups.topics_of(group).items()):
            if not self.topics.exists(topic):
                continue
            for queue_id, committed in sorted(offsets.items()):
                _, max_offset = self.queue_range(topic, queue_id)
                rows.append({"topic": topic, "queue_id": queue_id, "committed_offset": committed,
                             "max_offset": max_offset, "lag": max(0, max_offset - committed)})
        return rows

    def reserve_round_robin(self, topic: str, n: int) -> int:
        """Reserve ``n`` round-robin slots of ``topic``; returns the first (queue = slot % queues)."""
        start = self._round_robin.get(topic, 0)
        self._round_robin[topic] = start + n
        return start

    def protect(self) -> list[str]:
        """Disable groups lagging past the threshold (RocketMQ's protectBroker)."""
        limit = self.settings.protection.max_lag_messages
        disabled = []
        for group in self.groups.names():
            lag = sum(r["lag"] for r in self.group_lag(group))
            if lag > limit and self.groups.config(group)["consume_enabled"]:
                reason = f"lag {lag} messages exceeded [protection] max_lag_messages={limit}"
                self.groups.set_consume_enabled(group, False, reason)
                log.warning("slow-consumer protection disabled group %s: %s", group, reason)
                disabled.append(group)
        return disabled

    def mirror_lag(self) -> dict[str, Any] | None:
        return None if self.mirror is None else self.mirror.lag()
