"""Typed settings of the message store, read once and passed down.

Each field's ``metadata["doc"]`` is its one-line description: the broker's
configuration reference (``docs/reference/configuration.md``, ``conf/broker.toml``) is generated from it
by ``python -m broker_api.settings.doc``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

__all__ = ["FlushMode", "HAConfig", "StoreConfig"]

FlushMode = Literal["sync", "async"]


@dataclass(frozen=True, slots=True)
class StoreConfig:
    """Every knob of the store; defaults suit a developer laptop."""

    root_dir: Path | str = field(default="data/store", metadata={"doc": "Store directory."})
    commitlog_segment_bytes: int = field(
        default=1 << 30,
        metadata={"doc": "CommitLog segment size in bytes, 1 GiB as in RocketMQ."},
    )
    consumequeue_segment_units: int = field(
        default=300_000,
        metadata={"doc": "ConsumeQueue segment size in 20-byte units (RocketMQ: 300,000)."},
    )
    index_slots: int = field(
        default=500_000,
        metadata={"doc": "Hash slots per index file (RocketMQ: 5,000,000)."},
    )
    index_entries: int = field(
        default=2_000_000,
        metadata={"doc": "Entries per index file (RocketMQ: 20,000,000)."},
    )
    flush_mode: FlushMode = field(
        default="async",
        metadata={"doc": '"sync": a put returns after fdatasync covers it (group commit; survives power loss); '
                         '"async": a flush thread syncs every flush_interval_ms (`--flush-mode`).'},
    )
    flush_interval_ms: int = field(default=500, metadata={"doc": "Async flush period in milliseconds."})
    sync_flush_timeout_ms: int = field(
        default=5000,
        metadata={"doc": "SYNC flush: how long a put waits for the fdatasync that covers it; past it "
                         "the put is answered FLUSH_DISK_TIMEOUT (stored, not yet confirmed on disk; "
                         "RocketMQ syncFlushTimeout)."},
    )
    flush_min_pages: int = field(
        default=4,
        metadata={"doc": "Async flush: a period syncs only when this many 4 KiB pages are dirty "
                         "(and at least every 10 periods)."},
    )
    max_message_bytes: int = field(
        default=4 << 20,
        metadata={"doc": "Largest message (whole encoded record) in bytes, 4 MiB "
                         "(413 message_too_large past it)."},
    )
    store_host: str = field(
        default="",
        metadata={"doc": "ipv4:port written into records and message ids (RocketMQ's storeHost); "
                         "\"\" = the broker's advertised address and HTTP port, so ids are unique "
                         "in a cluster."},
    )
    retention_hours: float = field(
        default=72.0,
        metadata={"doc": "CommitLog segments older than this many hours may be deleted "
                         "once disk use passes the soft limit."},
    )
    disk_soft_limit_ratio: float = field(
        default=0.75,
        metadata={"doc": "Disk use (of the store's file system) past which old segments are deleted."},
    )
    disk_hard_limit_ratio: float = field(
        default=0.90,
        metadata={"doc": "Disk use past which writes are refused (507 disk_full)."},
    )
    retention_check_interval_s: float = field(
        default=10.0,
        metadata={"doc": "How often (seconds) the retention service looks."},
    )
    reput_batch_bytes: int = field(
        default=8 << 20,
        metadata={"doc": "Most CommitLog bytes one dispatch (reput) round reads, 8 MiB."},
    )
    verify_crc_on_read: bool = field(
        default=True,
        metadata={"doc": "Pulls check every record's body CRC; a damaged record is answered CORRUPT_MESSAGE, "
                         "never served (costs a few percent of pull throughput; see the README's benchmarks)."},
    )
    checkpoint_interval_ms: int = field(
        default=1000,
        metadata={"doc": "How often (ms) the flush services write the checkpoint."},
    )

    @property
    def root(self) -> Path:
        return Path(self.root_dir)


@dataclass(frozen=True, slots=True)
class HAConfig:
    """Master/slave replication of the CommitLog (``store.ha``); defaults are RocketMQ's.

    A slave must run with the master's ``commitlog_segment_bytes``: bytes land at the same
    physical offsets and a record never spans segments, so segments must roll at the same
    places.  A slave with another size refuses the stream (see ``HAClient.error``).
    """

    listen_host: str = field(default="0.0.0.0", metadata={"doc": "Address the master's HA port binds to."})
    listen_port: int = field(
        default=10912,
        metadata={"doc": "Master: TCP port slaves connect to (RocketMQ haListenPort); 0 picks a free one."},
    )
    master_address: str | None = field(
        default=None,
        metadata={"doc": "Slave: the master's HA address host:port (RocketMQ haMasterAddress); "
                         "may also come later from the NameServer."},
    )
    heartbeat_interval_s: float = field(
        default=5.0,
        metadata={"doc": "Seconds between offset reports of an idle slave and heartbeats of an idle master."},
    )
    housekeeping_interval_s: float = field(
        default=20.0,
        metadata={"doc": "A connection silent this many seconds is closed (RocketMQ haHousekeepingInterval)."},
    )
    transfer_batch_bytes: int = field(
        default=32 << 10,
        metadata={"doc": "Most record bytes per frame, 32 KiB (a larger single record travels alone)."},
    )
    slave_timeout_ms: int = field(
        default=3000,
        metadata={"doc": "SYNC_MASTER: how long a put waits for a slave's ack (then FLUSH_SLAVE_TIMEOUT)."},
    )
    slave_fallbehind_max_bytes: int = field(
        default=256 << 20,
        metadata={"doc": "SYNC_MASTER: a slave further behind than this counts as not available."},
    )
    reconnect_min_s: float = field(
        default=0.2,
        metadata={"doc": "Slave: first wait before reconnecting; doubles up to reconnect_max_s."},
    )
    reconnect_max_s: float = field(
        default=5.0,
        metadata={"doc": "Slave: longest wait between reconnects (RocketMQ: 5 s)."},
    )
