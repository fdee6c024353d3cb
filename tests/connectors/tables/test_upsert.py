"""Upsert table topics: the table equals a plain-Python model of the messages, also after SIGKILLs mid-MERGE."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.compute  # noqa: F401 - pa.compute
from deltalake import DeltaTable

from connectors.tables import TableTopics
from store import MessageStore

from . import writer_proc
from .conftest import wait_caught_up

REPO = Path(__file__).resolve().parents[3]


def model(store: MessageStore, topic: str) -> dict[str, dict]:
    """key -> last body of that key, tombstones deleting, in CommitLog order."""
    state: dict[str, dict] = {}
    for batch in store.read_dispatch_batches(0):
        for t, keys, body in zip(batch.topics, batch.keys, batch.bodies):
            if t != topic or not keys:
                continue
            if body:
                state[keys[0]] = orjson.loads(body)
            else:
                state.pop(keys[0], None)
    return state


def table_state(uri: str) -> dict[str, dict]:
    rows = DeltaTable(uri).to_pyarrow_table(columns=["_sparkmq_key", "id", "v", "amount"]).to_pylist()
    keys = [r["_sparkmq_key"] for r in rows]
    assert len(keys) == len(set(keys)), "a key has more than one row"
    return {r["_sparkmq_key"]: {"id": r["id"], "v": r["v"], "amount": r["amount"]} for r in rows}


def test_upsert_table_with_updates_and_tombstones_equals_the_model(store: MessageStore, tables: TableTopics) -> None:
    tables.configure(writer_proc.TOPIC, writer_proc.SPEC)
    for round_ in range(6):
        store.put_messages(writer_proc.messages(round_, 400))
        time.sleep(0.15)
    status = wait_caught_up(tables, writer_proc.TOPIC)
    expected = model(store, writer_proc.TOPIC)
    assert table_state(tables.table_uri(writer_proc.TOPIC)) == expected
    assert status["rows"] == len(expected) and status["version"] >= 2
    table = DeltaTable(tables.table_uri(writer_proc.TOPIC))
    assert table.metadata().configuration.get("delta.enableChangeDataFeed") == "true"
    changes = pa.table(table.load_cdf(starting_version=0).read_all())
    kinds = set(changes["_change_type"].to_pylist())
    assert {"insert", "update_postimage", "delete"} <= kinds


def _wait_for_merge_in_flight(table_dir: Path, timeout_s: float) -> bool:
    """Poll until a data file appears that no commit names yet (a MERGE writing); True if seen."""
    log = table_dir / "_delta_log"
    deadline = time.monotonic() + timeout_s
    files = set(table_dir.rglob("*.parquet"))
    commits = len(list(log.glob("*.json"))) if log.exists() else 0
    while time.monotonic() < deadline:
        now_files = set(table_dir.rglob("*.parquet"))
        now_commits = len(list(log.glob("*.json"))) if log.exists() else 0
        if now_files - files and now_commits == commits and commits > 1:
            return True
        files, commits = now_files, now_commits
        time.sleep(0.002)
    return False


def _crash_and_restart(tmp_path: Path, mode: str) -> tuple[Path, dict[str, dict], list[int]]:
    """Three writer processes SIGKILLed while a commit writes; then a clean catch-up.
    Returns the table dir, the model and the CommitLog offsets of the topic's messages."""
    store_dir, tables_dir = tmp_path / "store", tmp_path / "tables"
    table_dir = tables_dir / writer_proc.TOPIC
    mid_commit = 0
    for seed in range(1, 4):
        proc = subprocess.Popen([sys.executable, "-m", "tests.connectors.tables.writer_proc", str(store_dir),
                                 str(tables_dir), str(seed), mode], cwd=REPO, stdout=subprocess.PIPE, text=True)
        try:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
            time.sleep(0.3 * seed)
            mid_commit += _wait_for_merge_in_flight(table_dir, 20.0)
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
    assert mid_commit >= 1, "no kill landed while a commit was writing"
    store = MessageStore(writer_proc.store_config(store_dir))
    store.start()
    service = TableTopics(store, tables_dir, app_id="broker-a")
    try:
        service.configure(writer_proc.TOPIC, writer_proc.SPEC if mode == "upsert" else writer_proc.APPEND_SPEC)
        service.start()
        wait_caught_up(service, writer_proc.TOPIC)
        expected = model(store, writer_proc.TOPIC)
        offsets = [int(p) for b in store.read_dispatch_batches(0) for t, p, body in
                   zip(b.topics, b.phy_offsets, b.bodies) if t == writer_proc.TOPIC and body]
    finally:
        service.stop()
        store.shutdown()
    return table_dir, expected, offsets


def test_sigkill_of_an_append_writer_then_restart_writes_every_message_once(tmp_path: Path) -> None:
    table_dir, _, offsets = _crash_and_restart(tmp_path, "append")
    got = DeltaTable(str(table_dir)).to_pyarrow_table(columns=["_sparkmq_commitlog_offset"]).column(0).to_pylist()
    assert len(offsets) > 1000
    assert sorted(got) == sorted(offsets)


def test_sigkill_during_merge_then_restart_equals_the_model(tmp_path: Path) -> None:
    table_dir, expected, _ = _crash_and_restart(tmp_path, "upsert")
    assert len(expected) > 100
    assert table_state(str(table_dir)) == expected
    # Exactly once, not only the same end state: no message's value entered the change feed twice.
    changes = pa.table(DeltaTable(str(table_dir)).load_cdf(starting_version=0).read_all())
    kinds = changes["_change_type"].cast(pa.string())
    values = changes["v"].filter(pa.compute.is_in(kinds, pa.array(["insert", "update_postimage"]))).to_pylist()
    assert len(values) == len(set(values))
