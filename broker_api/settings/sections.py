"""Settings sections kept out of ``settings.py`` to keep it small: ``[transactions]``, ``[delay]``, ``[ha]``, ``[tables]``,
``[runtime]``.

``broker_api.settings`` re-exports every one of them; import them from there.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from store.schedule_names import parse_levels

__all__ = ["TransactionsSection", "DelaySection", "HASection", "HARole", "TablesSection", "RuntimeSection", "KafkaSection"]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TransactionsSection(_Section):
    """Half messages, commit/rollback and the exactly-once sink records."""

    timeout_s: float = Field(default=300.0, gt=0, description=(
        "Half messages not committed or rolled back within this many seconds are rolled back."))
    check_interval_s: float = Field(default=30.0, gt=0, description=(
        "A transaction with a `check_url` is checked (POST to the producer) at most this often (seconds; "
        "RocketMQ transactionCheckInterval). Expired transactions without one are looked for every second."))
    check_immunity_s: float = Field(default=6.0, ge=0, description=(
        "A transaction with a `check_url` is first checked once it is this old (seconds; RocketMQ "
        "transactionTimeOut)."))
    max_checks: int = Field(default=15, ge=1, description=(
        "Checks answered `unknown` or failed before the half messages move to TRANS_CHECK_MAX_TIME_TOPIC and "
        "the transaction is reported as `discarded` (RocketMQ transactionCheckMax)."))
    check_timeout_s: float = Field(default=3.0, gt=0, description=(
        "How long one check-back POST may take (seconds); past it the check counts as failed."))
    check_url_allow: str = Field(default="loopback", description=(
        "Hosts a transaction's `check_url` may name, separated by spaces or commas: `loopback` (127.0.0.0/8, "
        "::1, localhost), an IP network (10.1.0.0/16) or address, a host name, or `*.example.com`. Any other "
        "host is refused at produce (400 naming this setting) and again before each check-back POST."))
    keep_decisions: int = Field(default=100_000, ge=100, description=(
        "Decided transactions remembered (a repeated commit is answered 200); older ones are forgotten."))
    keep_sink_batches: int = Field(default=1000, ge=1, description=(
        "Committed batch ids remembered per exactly-once sink (a replay of a remembered batch is dropped)."))
    keep_sinks: int = Field(default=10_000, ge=1, description=(
        "Sinks remembered; past this, the sink with the oldest last commit is forgotten."))


class DelaySection(_Section):
    """Delay-level and timer messages (RocketMQ's ScheduleMessageService and timer wheel)."""

    levels: str = Field(default="1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h", description=(
        "Delay of each `delay_level`, level 1 first (units ms, s, m, h, d; RocketMQ messageDelayLevel); a "
        "higher level is clamped to the last one."))
    max_delay_s: int = Field(default=3 * 86400, ge=1, description=(
        "Latest `deliver_at_ms` of a timer message, in seconds from now (RocketMQ timerMaxDelaySec, 3 days); "
        "later is 400 bad_message."))
    timer_precision_ms: int = Field(default=500, ge=10, le=60_000, description=(
        "Width of one timer wheel slot in ms: a timer message is delivered at its due time or at most this much "
        "later. Changing it rebuilds the wheel from the timer log at start-up."))
    poll_interval_ms: int = Field(default=100, ge=10, le=10_000, description=(
        "How often (ms) the deliverers look for due messages (RocketMQ DELAY_FOR_A_WHILE)."))
    progress_interval_s: float = Field(default=10.0, gt=0, description=(
        "Delivery progress is recorded after every delivery and at least this often (seconds) when idle; a "
        "crash re-scans at most the CommitLog written since for messages already delivered."))

    @field_validator("levels")
    @classmethod
    def _check_levels(cls, value: str) -> str:
        parse_levels(value)  # a ValueError names the bad level
        return value


HARole = Literal["", "async_master", "sync_master", "slave"]


class HASection(_Section):
    """Master/slave replication of the CommitLog (RocketMQ's HAService; `store.HAConfig`)."""

    role: HARole = Field(default="", description=(
        '"async_master" | "sync_master" | "slave" (`--broker-role`); "" = by broker id: 0 is an '
        "async_master, > 0 a slave. A sync_master answers a produce once a slave holds it (or says why not "
        "in its `status`)."))
    listen_host: str = Field(default="", description=(
        'Master: address the HA port binds to; "" = `[broker] host`.'))
    listen_port: int = Field(default=0, ge=0, le=65535, description=(
        "Master: TCP port slaves connect to (`--ha-port`; RocketMQ haListenPort 10912); 0 = any free port, "
        "registered with the NameServers (where slaves learn it) and shown in /v1/broker."))
    master_addr: str = Field(default="", description=(
        'Slave: the master\'s HA address host:port (`--ha-master-addr`); "" = the ha_server_address its '
        "NameServer returns at registration."))
    master_url: str = Field(default="", description=(
        'Slave: the master\'s HTTP URL (`--master-url`), for metadata sync and the message of refused '
        'writes; "" = the master_address its NameServer returns at registration.'))
    slave_timeout_ms: int = Field(default=3000, ge=1, description=(
        "sync_master: how long a produce waits for a slave's ack (then status FLUSH_SLAVE_TIMEOUT)."))
    slave_fallbehind_max_bytes: int = Field(default=256 << 20, ge=0, description=(
        "sync_master: a slave further behind than this (or none connected) answers SLAVE_NOT_AVAILABLE "
        "at once, 256 MiB."))
    slave_read_enable: bool = Field(default=True, description=(
        "Slave: serve pulls, lookups and queue offsets (false: 403 slave_read_only)."))
    metadata_sync_interval_s: float = Field(default=10.0, gt=0, description=(
        "Slave: topics, consumer offsets and subscription groups are copied from the master this often "
        "(seconds) and at connect (RocketMQ SlaveSynchronize)."))
    heartbeat_interval_s: float = Field(default=5.0, gt=0, description=(
        "Seconds between offset reports of an idle slave and heartbeats of an idle master."))
    housekeeping_interval_s: float = Field(default=20.0, gt=0, description=(
        "An HA connection silent this many seconds is closed (RocketMQ haHousekeepingInterval)."))
    transfer_batch_bytes: int = Field(default=32 << 10, ge=1024, description=(
        "Most CommitLog bytes per replication frame, 32 KiB (a larger single record travels alone)."))
    secret: str = Field(default="", description=(
        "Cluster secret the master and its slaves share: a slave proves it (HMAC challenge) before the master "
        "sends any of the log, and checks the master's proof. \"\" = no proof: with `[auth] enabled` the "
        "master then refuses every slave; without auth the link is open to anyone who reaches the HA port. "
        "Prefer the SPARKMQ_HA__SECRET environment variable. With `[tls]` the link is TLS as well."))
    controller: str = Field(default="", description=(
        "Controller mode (`--controller ADDR[,ADDR...]`): NameServers started with `--controller`. The "
        "controller assigns role and broker id (no `--broker-role`, no `--broker-id`), elects a new master "
        "when this one stops, and fences a stale one. \"\" = classic master/slave."))
    min_in_sync_replicas: int = Field(default=1, ge=1, description=(
        "Controller mode: a master refuses writes (503 master_fenced) while its in-sync set is smaller "
        "(RocketMQ minInSyncReplicas); 1 = the master alone may write (its SYNC answers say SLAVE_NOT_AVAILABLE)."))
    controller_heartbeat_interval_s: float = Field(default=1.0, gt=0, description=(
        "Controller mode: seconds between heartbeats to the controller."))
    max_time_slave_not_catchup_s: float = Field(default=5.0, gt=0, description=(
        "Controller mode: a slave further behind than this (seconds) or disconnected leaves the in-sync "
        "set (RocketMQ haMaxTimeSlaveNotCatchup)."))
    reconnect_min_s: float = Field(default=0.2, gt=0, description=(
        "Slave: first wait before reconnecting to the master; doubles up to reconnect_max_s."))
    reconnect_max_s: float = Field(default=5.0, gt=0, description=(
        "Slave: longest wait between reconnects (RocketMQ: 5 s)."))


class TablesSection(_Section):
    """Table topics: a Delta table per topic whose `table.mode` is not off (`connectors.tables`)."""

    enabled: bool = Field(default=True, description=(
        "Write the Delta table of every topic whose `table.mode` is raw or typed (masters only; a slave keeps "
        "the settings and writes none). false: such topics keep their settings, nothing is written, and "
        "enabling a table is answered 503 tables_disabled."))
    root_dir: str = Field(default="", description=(
        'Directory or object store URI (`s3://bucket/prefix`, credentials and endpoint from the AWS_* environment) '
        'of the table topics\' Delta tables (`<topic>` and `<topic>__dlq` under it); "" = `<data_dir>/tables`.'))


class RuntimeSection(_Section):
    """The Python runtime of the broker process: garbage collector (``broker_api.server``)."""

    gc_freeze: bool = Field(default=True, description=(
        "Once the broker listens, move every object made at start-up (modules, settings, the app) out of "
        "the collector's reach (gc.freeze), so a full collection scans only what was made since; a full "
        "collection of the start-up heap stopped the event loop for 25-140 ms on a loaded machine."))
    gc_threshold: int = Field(default=7000, ge=100, description=(
        "Allocations between two young-generation collections (Python's default is 700); fewer, slightly "
        "longer collections while requests allocate their answers."))


class KafkaSection(_Section):
    """The Kafka wire-protocol listener (`broker_api.kafka`): Kafka clients over the same store."""

    port: int = Field(default=-1, ge=-1, le=65535, description=(
        "TCP port of the Kafka listener (`--kafka-port`); -1 = off, 0 = any free port (named in the ready line)."))
    host: str = Field(default="", description='Address the Kafka listener binds to; "" = `[broker] host`.')
    advertised_host: str = Field(default="", description=(
        'Host Kafka clients are told to connect to (Metadata); "" = the broker\'s advertised host.'))
    max_frame_bytes: int = Field(default=100 << 20, ge=1024, description=(
        "Largest Kafka request accepted, 100 MiB (Kafka socket.request.max.bytes); a larger frame closes "
        "the connection and is logged."))
    group_initial_rebalance_delay_ms: int = Field(default=300, ge=0, description=(
        "How long a new consumer group waits for more members before its first assignment "
        "(Kafka group.initial.rebalance.delay.ms)."))
    fetch_ahead_bytes: int = Field(default=64 << 20, ge=0, description=(
        "Once a Fetch answer carries a partition's page, the next page of that partition is read and built "
        "on a worker thread, so a consumer reading a backlog finds it ready; this bounds the pages kept "
        "(the sum of their Fetch byte limits, 1 MiB each for a Java consumer's defaults), 64 MiB; 0 = off."))
