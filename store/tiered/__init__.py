"""Tiered CommitLog: full, old segments move to an object store (S3 or a directory) and are read back on demand."""

from __future__ import annotations

from .config import TieredConfig
from .manifest import Manifest, RemoteSegmentInfo
from .remote_reader import RemoteLog, RemoteSegment
from .tiered_store import TieredStorage

__all__ = ["Manifest", "RemoteLog", "RemoteSegment", "RemoteSegmentInfo", "TieredConfig", "TieredStorage"]
