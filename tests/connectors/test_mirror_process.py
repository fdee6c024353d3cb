"""The Delta mirror in its own process ([mirror] host = "process"): SIGKILL of the child, of the broker, stop."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from connectors import MirrorConfig, MirrorProcess, run_sql
from store import Message, MessageStore, StoreConfig

_FAST = {"SPARKMQ_MIRROR__BATCH_INTERVAL_S": "0.1", "SPARKMQ_MIRROR__BATCH_ROWS": "300",
         "SPARKMQ_MIRROR__HOST": "process", "SPARKMQ_STORE__COMMITLOG_SEGMENT_BYTES": str(1 << 20),
         # compaction and checkpoints run on the child's upkeep thread while it commits
         "SPARKMQ_MIRROR__COMPACT_EVERY_COMMITS": "5", "SPARKMQ_MIRROR__CHECKPOINT_EVERY_COMMITS": "3"}


def _mirror(url: str) -> dict[str, Any]:
    return httpx.get(f"{url}/v1/broker", timeout=10).json()["mirror"]


def _until(what: Callable[[], bool], timeout_s: float, message: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if what():
            return
        time.sleep(0.05)
    raise AssertionError(message)


def _gone(pid: int) -> bool:
    """True once ``pid`` no longer runs (exited, or a zombie waiting to be reaped)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"


def _sql(url: str, sql: str) -> list[list[Any]]:
    resp = httpx.post(f"{url}/v1/sql", json={"sql": sql, "max_rows": 100_000}, timeout=60)
    assert resp.status_code == 200, resp.text
    return resp.json()["rows"]  # type: ignore[no-any-return]


def test_sigkill_of_the_mirror_child_mid_write_resumes_with_no_duplicate_and_no_gap(
        broker_factory: Callable[..., Any]) -> None:
    b = broker_factory(env=_FAST)
    acked: list[str] = []
    stop = threading.Event()

    def producer() -> None:
        for i in range(300):
            if stop.is_set():
                return
            msgs = [{"body": f"m-{i}-{j}", "keys": [f"k{j}"]} for j in range(100)]
            resp = httpx.post(f"{b.url}/v1/topics/orders/messages", json={"messages": msgs}, timeout=30)
            assert resp.status_code == 200, resp.text
            acked.extend(r["msg_id"] for r in resp.json()["results"])

    thread = threading.Thread(target=producer)
    thread.start()
    try:
        _until(lambda: (m := _mirror(b.url))["mirrored_offset"] > 0 and m["lag_bytes"] > 0 and len(acked) >= 3000,
               60, "the mirror never committed while behind")
        first = _mirror(b.url)
        assert first["host"] == "process" and first["restarts"] == 0
        os.kill(first["pid"], signal.SIGKILL)
        _until(lambda: _gone(first["pid"]), 10, "the child survived SIGKILL")
    finally:
        stop.set()
        thread.join(60)
    _until(lambda: (m := _mirror(b.url))["restarts"] == 1 and m["pid"] not in (None, first["pid"]), 60,
           "the broker did not start a new mirror process")
    _until(lambda: _mirror(b.url)["lag_bytes"] == 0, 120, "the new mirror process did not catch up")
    stats = _sql(b.url, "SELECT queue_id, count(*), count(DISTINCT queue_offset), min(queue_offset), "
                        "max(queue_offset) FROM messages GROUP BY queue_id ORDER BY queue_id")
    queues = {q["queue_id"]: q for q in httpx.get(f"{b.url}/v1/topics/orders/queues", timeout=10).json()}
    assert sum(row[1] for row in stats) == len(acked)
    for qid, n, distinct, lo, hi in stats:
        assert n == distinct == hi - lo + 1  # no duplicate, no gap
        assert (lo, hi + 1) == (queues[qid]["min_offset"], queues[qid]["max_offset"])
    assert {r[0] for r in _sql(b.url, "SELECT msg_id FROM messages")} == set(acked)


def test_the_child_exits_when_the_broker_is_killed_and_a_restart_resumes(broker_factory: Callable[..., Any]) -> None:
    b = broker_factory(env=_FAST)
    msgs = [{"body": f"m-{i}"} for i in range(500)]
    assert httpx.post(f"{b.url}/v1/topics/orders/messages", json={"messages": msgs}, timeout=30).status_code == 200
    _until(lambda: _mirror(b.url)["lag_bytes"] == 0, 60, "the mirror did not catch up")
    pid = _mirror(b.url)["pid"]
    b.kill()
    _until(lambda: _gone(pid), 15, "the mirror process outlived its broker")
    b.start()
    assert httpx.post(f"{b.url}/v1/topics/orders/messages", json={"messages": msgs[:7]}, timeout=30).status_code == 200
    _until(lambda: _mirror(b.url)["lag_bytes"] == 0, 60, "the mirror did not catch up after the restart")
    assert _sql(b.url, "SELECT count(*), count(DISTINCT msg_id) FROM messages") == [[507, 507]]
    new_pid = _mirror(b.url)["pid"]
    b.stop()
    _until(lambda: _gone(new_pid), 15, "the mirror process outlived a clean broker stop")


def test_stop_commits_everything_twice_safe_and_leaves_no_process(tmp_path: Path) -> None:
    store = MessageStore(StoreConfig(root_dir=tmp_path / "store", commitlog_segment_bytes=1 << 20))
    store.start()
    try:
        config = MirrorConfig(table_uri=str(tmp_path / "delta"), app_id="a", batch_interval_s=30.0, host="process")
        mirror = MirrorProcess(store, config)
        mirror.start()
        pid = mirror.lag()["pid"]
        results = store.put_messages([Message(topic="t", body=b"x%d" % i, queue_id=i % 2) for i in range(2000)])
        mirror.stop()  # long before batch_interval_s: stop itself commits
        mirror.stop()
        assert _gone(pid)
        assert mirror.lag()["pid"] is None and mirror.lag()["lag_bytes"] == 0
        got = run_sql(str(tmp_path / "delta"), "SELECT msg_id FROM messages", max_rows=10_000, timeout_s=60)
        assert sorted(got["msg_id"].to_pylist()) == sorted(r.msg_id for r in results)
    finally:
        store.shutdown()


def test_a_table_the_child_cannot_open_is_reported_and_stop_still_ends_cleanly(tmp_path: Path) -> None:
    store = MessageStore(StoreConfig(root_dir=tmp_path / "store"))
    store.start()
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    mirror = MirrorProcess(store, MirrorConfig(table_uri=str(blocker / "t"), app_id="a"))
    try:
        mirror.start()  # returns at once: the child opens the table on its own
        _until(lambda: "not-a-dir" in (mirror.lag()["last_error"] or ""), 60,
               f"the failure to open the table was not reported: {mirror.lag()}")
        assert "could not open" in mirror.lag()["last_error"]
    finally:
        mirror.stop()
        mirror.stop()
        store.shutdown()
    assert mirror.lag()["pid"] is None
