"""Package attributes imported on first use, so the CLI and clients start without FastAPI (the one
``lazy_getattr`` lives in ``store.lazy``; the broker's rooms import it from here)."""

from __future__ import annotations

from store.lazy import lazy_getattr

__all__ = ["lazy_getattr"]
