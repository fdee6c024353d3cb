"""Fixtures for store tests: small segments so rolls happen often."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from store import MessageStore, StoreConfig


def small_config(root: Path, **overrides: object) -> StoreConfig:
    base: dict[str, object] = dict(
        root_dir=root,
        commitlog_segment_bytes=64 << 10,
        consumequeue_segment_units=1000,
        index_slots=1024,
        index_entries=4096,
        flush_mode="sync",
        checkpoint_interval_ms=200,
        retention_check_interval_s=3600,
    )
    base.update(overrides)
    return StoreConfig(**base)  # type: ignore[arg-type]


@pytest.fixture
def open_store(tmp_path: Path) -> Iterator[Callable[..., MessageStore]]:
    """``open_store(**overrides)`` starts a store under tmp_path; all are shut down at the end."""
    opened: list[MessageStore] = []

    def _open(root: Path | None = None, **overrides: object) -> MessageStore:
        s = MessageStore(small_config(root or tmp_path / "store", **overrides))
        s.start()
        opened.append(s)
        return s

    before = set(threading.enumerate())
    yield _open
    for s in opened:
        s.shutdown()
    leaked = [t for t in threading.enumerate() if t not in before and t.name.startswith("sparkmq")]
    assert not leaked, f"threads left running: {leaked}"
