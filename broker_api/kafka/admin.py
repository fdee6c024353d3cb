"""Admin APIs for Kafka's tools (filled in by step 4)."""

from __future__ import annotations

from typing import Any

__all__ = ["ADMIN_HANDLERS"]

ADMIN_HANDLERS: dict[int, Any] = {}
