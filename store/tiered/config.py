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
    interval_s: float = field(
        default=5.0,
        metadata={"doc": "How often (seconds) the uploader looks for segments to upload or expire; a failed "
                         "upload is retried on the next round."},
    )

    @property
    def enabled(self) -> bool:
        return bool(self.uri)
