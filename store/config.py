"""Typed settings of the message store, read once and passed down."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

__all__ = ["StoreConfig", "FlushMode"]

FlushMode = Literal["sync", "async"]


@dataclass(frozen=True, slots=True)
class StoreConfig:
    """Every knob of the store; defaults suit a developer laptop."""

    root_dir: Path | str = "data/store"
    # CommitLog segment size; RocketMQ uses 1 GiB.
    commitlog_segment_bytes: int = 1 << 30
    # ConsumeQueue segment size in 20-byte units (RocketMQ: 300,000 units).
    consumequeue_segment_units: int = 300_000
    # IndexFile geometry (RocketMQ: 5,000,000 slots, 20,000,000 entries).
    index_slots: int = 500_000
    index_entries: int = 2_000_000
    # "sync": a put returns after fdatasync covers it (group commit).
    # "async": a flush thread syncs every flush_interval_ms or min pages.
    flush_mode: FlushMode = "async"
    flush_interval_ms: int = 500
    flush_min_pages: int = 4
    # Largest message (whole encoded record) accepted.
    max_message_bytes: int = 4 << 20
    # Identity written into records and message ids.
    store_host: str = "127.0.0.1:10911"
    # Retention: segments older than this may be deleted ...
    retention_hours: float = 72.0
    # ... once disk use of the store's file system passes this ratio,
    disk_soft_limit_ratio: float = 0.75
    # and writes are refused past this ratio.
    disk_hard_limit_ratio: float = 0.90
    # How often the retention service looks.
    retention_check_interval_s: float = 10.0
    # Reput: how many bytes of CommitLog one dispatch round reads at most.
    reput_batch_bytes: int = 8 << 20
    # Written to checkpoint every this many ms by the flush services.
    checkpoint_interval_ms: int = 1000

    @property
    def root(self) -> Path:
        return Path(self.root_dir)
