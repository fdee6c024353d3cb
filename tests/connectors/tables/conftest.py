"""Fixtures for table topics: a real MessageStore on tmp_path and a TableTopics service over it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from connectors.tables import TableTopics
from store import Message, MessageStore, PutResult, StoreConfig


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MessageStore]:
    s = MessageStore(StoreConfig(root_dir=tmp_path / "store", commitlog_segment_bytes=256 << 10))
    s.start()
    yield s
    s.shutdown()


@pytest.fixture
def tables(store: MessageStore, tmp_path: Path) -> Iterator[TableTopics]:
    service = TableTopics(store, tmp_path / "tables", app_id="broker-a")
    service.start()
    yield service
    service.stop()


def put_json(store: MessageStore, topic: str, docs: list[object], *, keys: list[str | None] | None = None,
             queue_id: int = 0) -> list[PutResult]:
    """Append one message per doc (dicts as JSON, bytes as they are)."""
    msgs = []
    for i, doc in enumerate(docs):
        body = doc if isinstance(doc, bytes) else orjson.dumps(doc)
        key = keys[i] if keys is not None else None
        msgs.append(Message(topic=topic, body=body, queue_id=queue_id, keys=(key,) if key else (),
                            tags="T", properties={"n": str(i)}))
    return store.put_messages(msgs)


def wait_caught_up(service: TableTopics, topic: str, timeout_s: float = 60.0) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status = service.status().get(topic)
        if status is not None and status["lag_bytes"] == 0:
            return status
        time.sleep(0.05)
    raise AssertionError(f"table of {topic!r} did not catch up: {service.status().get(topic)}")
