"""A record quarantined by recovery is shown by the running broker: /v1/broker, /metrics, the log, store verify.

A real broker is killed (SIGKILL: an unclean stop), one record's body is
garbled on disk and the checkpoint damaged (recovery must scan from the
start); on the next start the damaged record is quarantined, not cut, and the
broker names it everywhere an operator looks, on this start and the next.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

from tests.garble import garble_body

_CMD = [sys.executable, "-m", "broker_api"]
_ENV = {k: v for k, v in os.environ.items() if not k.startswith("SPARKMQ_")}


def _damage_checkpoint(data_dir: Path) -> None:
    path = data_dir / "store" / "checkpoint"
    data = bytearray(path.read_bytes())
    at = data.index(b"commitlog_flushed") + len(b'commitlog_flushed": ')
    data[at] = ord("9") if data[at] != ord("9") else ord("1")
    path.write_bytes(bytes(data))


def _quarantined_broker(fast_broker: Any) -> tuple[Any, int]:
    """A broker whose topic ``d`` (one queue, offsets 0-9) had offset 4 damaged across an unclean stop."""
    b = fast_broker()
    with httpx.Client(base_url=b.url, timeout=30) as c:
        assert c.post("/v1/topics", json={"name": "d", "queues": 1}).status_code == 201
        res = c.post("/v1/topics/d/messages", json={"messages": [{"body": f"m{i}"} for i in range(10)]}).json()
    b.kill()
    assert (Path(b.data_dir) / "store" / "abort").exists()
    phy = garble_body(b.data_dir, res["results"][4]["msg_id"])
    _damage_checkpoint(Path(b.data_dir))
    b.start()
    return b, phy


def _named_in_log(log: str, phy: int) -> list[str]:
    return [line for line in log.splitlines() if "WARNING" in line and "quarantined CommitLog record" in line
            and "topic 'd' queue 0 offset 4" in line and f"CommitLog offset {phy}" in line]


def test_broker_metrics_and_log_name_the_quarantined_record(fast_broker: Any) -> None:
    b, phy = _quarantined_broker(fast_broker)
    with httpx.Client(base_url=b.url, timeout=30) as c:
        info = c.get("/v1/broker").json()
        assert info["quarantined_count"] == 1 and info["store"]["quarantined_records"] == 1
        (rec,) = info["quarantined"]
        assert (rec["topic"], rec["queue_id"], rec["queue_offset"], rec["phy_offset"]) == ("d", 0, 4, phy)
        assert str(phy) in rec["reason"] and rec["size"] > 0
        assert "\nsparkmq_store_quarantined_records 1\n" in c.get("/metrics").text
        page = c.get("/v1/topics/d/queues/0/messages", params={"offset": 0, "max_messages": 100}).json()
        assert [m["body"] for m in page["messages"]] == ["m0", "m1", "m2", "m3"]
        page = c.get("/v1/topics/d/queues/0/messages", params={"offset": 4}).json()
        assert page["status"] == "CORRUPT_MESSAGE" and page["damaged"]["commitlog_offset"] == phy
        page = c.get("/v1/topics/d/queues/0/messages", params={"offset": 5, "max_messages": 100}).json()
        assert [m["body"] for m in page["messages"]] == [f"m{i}" for i in range(5, 10)]  # nothing after it cut
    assert len(_named_in_log(b.log_tail(200_000), phy)) == 1
    b.stop()
    b.start()  # a clean restart names it again: the list is persisted
    with httpx.Client(base_url=b.url, timeout=30) as c:
        assert c.get("/v1/broker").json()["quarantined_count"] == 1
    assert len(_named_in_log(b.log_tail(200_000), phy)) == 2


def test_a_clean_broker_shows_no_quarantine(fast_broker: Any) -> None:
    b = fast_broker()
    with httpx.Client(base_url=b.url, timeout=30) as c:
        info = c.get("/v1/broker").json()
        assert info["quarantined_count"] == 0 and info["quarantined"] == []
        assert "\nsparkmq_store_quarantined_records 0\n" in c.get("/metrics").text


def test_store_verify_prints_the_quarantined_records(fast_broker: Any) -> None:
    b, phy = _quarantined_broker(fast_broker)
    b.stop()
    run = [*_CMD, "store", "verify", str(b.data_dir)]
    text = subprocess.run(run, capture_output=True, text=True, timeout=60, env=_ENV)
    lines = [line for line in text.stdout.splitlines() if line.startswith("quarantined: ")]
    assert len(lines) == 1 and "topic 'd' queue 0 offset 4" in lines[0] and str(phy) in lines[0], text
    assert "1 record(s) quarantined" in text.stderr
    out = subprocess.run([*run, "--json"], capture_output=True, text=True, timeout=60, env=_ENV)
    (rec,) = json.loads(out.stdout)["quarantined"]
    assert (rec["topic"], rec["queue_offset"], rec["phy_offset"]) == ("d", 4, phy)
