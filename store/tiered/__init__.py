"""Tiered CommitLog: full, old segments move to an object store (S3 or a directory) and are read back on demand.

The face is lazy (PEP 562): settings import ``TieredConfig`` without the uploader, reader and numpy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_getattr

if TYPE_CHECKING:
    from .config import TieredConfig
    from .manifest import Manifest, RemoteSegmentInfo
    from .remote_reader import RemoteLog, RemoteSegment
    from .tiered_store import TieredStorage

_WHERE: dict[str, str] = {
    "TieredConfig": "config",
    **dict.fromkeys(("Manifest", "RemoteSegmentInfo"), "manifest"),
    **dict.fromkeys(("RemoteLog", "RemoteSegment"), "remote_reader"),
    "TieredStorage": "tiered_store",
}

__getattr__ = lazy_getattr(__name__, _WHERE)

__all__ = sorted(_WHERE)  # the face: every lazily loaded name above
