"""A broker-like process for the crash test: produces upsert messages and writes the table until killed.

    python -m tests.connectors.tables.writer_proc STORE_DIR TABLES_DIR SEED upsert|append

It produces rounds of messages (``messages(seed, round)``) into topic ``acct``
while a TableTopics service MERGEs (or appends) them; the test SIGKILLs it at some point.
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

import orjson

from connectors.tables import TableSpec, TableTopics, Upkeep
from store import Message, MessageStore, StoreConfig

TOPIC = "acct"
SPEC = TableSpec.from_json({
    "mode": "typed", "write_mode": "upsert", "target_lag_s": 0.1,
    "schema": "id STRING NOT NULL, v BIGINT, amount DOUBLE",
})
APPEND_SPEC = TableSpec.from_json({**SPEC.to_json(), "write_mode": "append"})
KEYS = 300


def store_config(root: Path) -> StoreConfig:
    return StoreConfig(root_dir=root, commitlog_segment_bytes=256 << 10)


def messages(seed: int, n: int) -> list[Message]:
    """``n`` messages over KEYS keys: 10% tombstones (empty body), the rest new values."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        key = f"k{rng.randrange(KEYS)}"
        body = b"" if rng.random() < 0.1 else orjson.dumps({"id": key, "v": seed * 100_000 + i, "amount": i / 4})
        out.append(Message(topic=TOPIC, body=body, keys=(key,)))
    return out


def main(store_dir: str, tables_dir: str, seed: int, mode: str) -> None:
    store = MessageStore(store_config(Path(store_dir)))
    store.start()
    tables = TableTopics(store, tables_dir, app_id="broker-a", upkeep=Upkeep(upsert_compact_every_commits=0))
    tables.configure(TOPIC, SPEC if mode == "upsert" else APPEND_SPEC)
    tables.start()
    print("ready", flush=True)
    for round_ in range(1000):
        store.put_messages(messages(seed * 1000 + round_, 100))
        time.sleep(0.02)
    time.sleep(3600)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4])
