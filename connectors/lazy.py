"""Package attributes imported on first use, so importing one light module skips Delta Lake (the one
``lazy_getattr`` lives in ``store.lazy``, the lowest layer; connectors' packages import it from here)."""

from __future__ import annotations

from store.lazy import lazy_getattr

__all__ = ["lazy_getattr"]
