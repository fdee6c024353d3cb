"""Typed settings of the tiered CommitLog (``[tiered]``), read once and passed down.

Each field's ``metadata["doc"]`` is its line in the generated configuration reference.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["TieredConfig"]


@dataclass(frozen=True, slots=True)
class TieredConfig:
    """Where full CommitLog segments go once they are old, and how long they stay there."""

    uri: str = field(
        default="",
        metadata={"doc": 'Object store for old CommitLog segments: "s3://bucket/prefix" (credentials, region '
                         "and endpoint from the usual AWS_* environment variables), or a local directory; "
                         '"" = tiering off.'},
    )
    local_retention_s: float = field(
        default=3600.0,
        metadata={"doc": "A full segment whose last write is older than this many seconds is uploaded, "
                         "verified and then dropped from the local disk."},
    )
    local_max_bytes: int = field(
        default=0,
        metadata={"doc": "Also upload the oldest full segments while the local CommitLog is larger than this "
                         "many bytes (0 = no size limit; the active segment always stays)."},
    )
    retention_s: float = field(
        default=7 * 86400.0,
        metadata={"doc": "Remote segments whose last write is older than this many seconds are deleted from "
                         "the object store (0 = keep for ever)."},
    )
    cache_max_bytes: int = field(
        default=256 << 20,
        metadata={"doc": "Memory for blocks read back from the object store (least recently used go first)."},
    )
    block_bytes: int = field(
        default=1 << 20,
        metadata={"doc": "Unit of remote reads and of the per-block CRCs the manifest keeps, 1 MiB."},
    )
    readahead_blocks: int = field(
        default=64,
        metadata={"doc": "A sequential reader of a remote segment (a Spark backfill, a slave catching up) has "
                         "this many of the next blocks fetched in the background, in GETs of at least half as "
                         "many; 0 = off."},
    )
    interval_s: float = field(
        default=5.0,
        metadata={"doc": "How often (seconds) the uploader looks for segments to upload or expire; a failed "
                         "upload is retried on the next round."},
    )

    def __post_init__(self) -> None:
        if self.block_bytes < 4096 or self.cache_max_bytes < self.block_bytes:
            raise ValueError(f"[tiered] block_bytes must be at least 4096 and cache_max_bytes at least block_bytes "
                             f"(got {self.block_bytes} and {self.cache_max_bytes})")
        if min(self.local_retention_s, self.retention_s, self.local_max_bytes, self.readahead_blocks) < 0 \
                or self.interval_s <= 0:
            raise ValueError("[tiered] local_retention_s, retention_s, local_max_bytes and readahead_blocks must "
                             "be >= 0, interval_s > 0")

    @property
    def enabled(self) -> bool:
        return bool(self.uri)
