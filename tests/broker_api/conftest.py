"""Fixtures for the broker tests: small, fast brokers (no Delta mirror)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

# Small files and short timers keep each broker start and test fast.
FAST_ENV: dict[str, str] = {
    "SPARKMQ_MIRROR__ENABLED": "false",
    "SPARKMQ_STORE__COMMITLOG_SEGMENT_BYTES": str(1 << 20),
    "SPARKMQ_STORE__CONSUMEQUEUE_SEGMENT_UNITS": "1000",
    "SPARKMQ_STORE__INDEX_SLOTS": "1000",
    "SPARKMQ_STORE__INDEX_ENTRIES": "4000",
    "SPARKMQ_STORE__FLUSH_INTERVAL_MS": "50",
    "SPARKMQ_STORE__RETENTION_CHECK_INTERVAL_S": "3600",
    "SPARKMQ_BROKER__LOG_LEVEL": "warning",
}


@pytest.fixture
def fast_broker(broker_factory: Callable[..., Any]) -> Callable[..., Any]:
    """``start(env=None, data_dir=None)``: a broker with FAST_ENV plus ``env``."""

    def start(env: dict[str, str] | None = None, data_dir: Any = None) -> Any:
        return broker_factory(data_dir=data_dir, env={**FAST_ENV, **(env or {})})

    return start


@pytest.fixture
def quick(fast_broker: Callable[..., Any]) -> Any:
    """One fast broker with default settings."""
    return fast_broker()


@pytest.fixture
def client(quick: Any) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=quick.url, timeout=30) as c:
        yield c
