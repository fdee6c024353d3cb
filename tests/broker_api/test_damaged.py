"""A record garbled on disk while the broker was down: what pulls, /metrics, the log and the CLI say."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from typing import Any

import httpx
import pyarrow as pa

from tests.garble import garble_body

_CMD = [sys.executable, "-m", "broker_api"]
_ENV = {k: v for k, v in os.environ.items() if not k.startswith("SPARKMQ_")}


def _damaged_broker(fast_broker: Any) -> tuple[Any, int]:
    """A broker whose topic ``d`` (one queue, offsets 0-9) has offset 4 damaged on disk."""
    b = fast_broker()
    with httpx.Client(base_url=b.url, timeout=30) as c:
        assert c.post("/v1/topics", json={"name": "d", "queues": 1}).status_code == 201
        res = c.post("/v1/topics/d/messages", json={"messages": [{"body": f"m{i}"} for i in range(10)]}).json()
    b.stop()
    phy = garble_body(b.data_dir, res["results"][4]["msg_id"])
    b.start()
    return b, phy


def test_pull_json_and_arrow_name_the_damaged_record(fast_broker: Any) -> None:
    b, phy = _damaged_broker(fast_broker)
    with httpx.Client(base_url=b.url, timeout=30) as c:
        for n in (5, 100):  # a small page (message objects) and a big one (columns)
            page = c.get("/v1/topics/d/queues/0/messages", params={"offset": 0, "max_messages": n}).json()
            assert page["status"] == "FOUND" and [m["body"] for m in page["messages"]] == ["m0", "m1", "m2", "m3"]
            assert page["next_offset"] == 4
            page = c.get("/v1/topics/d/queues/0/messages", params={"offset": 4, "max_messages": n}).json()
            assert page["status"] == "CORRUPT_MESSAGE" and page["messages"] == [] and page["next_offset"] == 5
            d = page["damaged"]
            assert (d["topic"], d["queue_id"], d["offset"], d["commitlog_offset"]) == ("d", 0, 4, phy)
            assert "CRC" in d["reason"]
            page = c.get("/v1/topics/d/queues/0/messages", params={"offset": 5, "max_messages": n}).json()
            assert [m["body"] for m in page["messages"]] == [f"m{i}" for i in range(5, 10)]
        r = c.get("/v1/topics/d/queues/0/messages", params={"offset": 4},
                  headers={"Accept": "application/vnd.apache.arrow.stream"})
        assert r.status_code == 200 and r.headers["X-Sparkmq-Status"] == "CORRUPT_MESSAGE"
        assert r.headers["X-Sparkmq-Next-Offset"] == "5"
        assert json.loads(r.headers["X-Sparkmq-Damaged"])["offset"] == 4
        assert pa.ipc.open_stream(io.BytesIO(r.content)).read_all().num_rows == 0
        metrics = c.get("/metrics").text
    assert 'sparkmq_pull_requests_total{status="CORRUPT_MESSAGE"} 3' in metrics
    assert "sparkmq_store_damaged_records_read 3" in metrics
    log = b.log_tail(20000)
    assert "damaged record in topic 'd' queue 0 at queue offset 4" in log and f"CommitLog offset {phy}" in log


def test_cli_consumer_stops_on_a_damaged_record_unless_told_to_skip(fast_broker: Any) -> None:
    b, phy = _damaged_broker(fast_broker)
    run = [*_CMD, "consume", "d", "--url", b.url, "--group", "g"]
    stopped = subprocess.run(run, capture_output=True, text=True, timeout=60, env=_ENV)
    assert stopped.returncode == 4
    assert stopped.stdout.count("\n") == 4  # m0-m3
    error = [line for line in stopped.stderr.splitlines() if line.startswith("error:")]
    assert len(error) == 1 and "queue offset 4" in error[0] and "--skip-damaged" in error[0], stopped.stderr
    # The group's offset stopped before the damaged record: a second run starts there.
    skipped = subprocess.run([*run, "--skip-damaged"], capture_output=True, text=True, timeout=60, env=_ENV)
    assert skipped.returncode == 0, skipped.stderr
    assert [line.split()[-1] for line in skipped.stdout.splitlines()] == [f"m{i}" for i in range(5, 10)]
    assert "warning: skipping damaged record in topic 'd' queue 0 at queue offset 4" in skipped.stderr
    assert f"CommitLog offset {phy}" in skipped.stderr
