"""A broker whose old CommitLog segments live in S3 (moto's server on loopback) serves all of its topic over
HTTP, byte for byte; a SIGKILL in the middle of an upload loses nothing and the upload resumes on restart."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import httpx

from tests.s3_support import Gate, S3Server

_TOPIC = "lake"


def _env(s3: S3Server, uri: str, endpoint: str | None = None) -> dict[str, str]:
    env = {**s3.env(), "SPARKMQ_TIERED__URI": uri, "SPARKMQ_TIERED__LOCAL_RETENTION_S": "0",
           "SPARKMQ_TIERED__INTERVAL_S": "0.2", "SPARKMQ_TIERED__BLOCK_BYTES": str(16 << 10),
           "SPARKMQ_TIERED__CACHE_MAX_BYTES": str(32 << 10), "SPARKMQ_TIERED__RETENTION_S": "0",
           "SPARKMQ_STORE__COMMITLOG_SEGMENT_BYTES": str(64 << 10), "SPARKMQ_STORE__FLUSH_MODE": "sync",
           # small ConsumeQueue and index files, so the old ones move to S3 as well
           "SPARKMQ_STORE__CONSUMEQUEUE_SEGMENT_UNITS": "40", "SPARKMQ_STORE__INDEX_ENTRIES": "64"}
    if endpoint:
        env["AWS_ENDPOINT_URL"] = endpoint
    return env


def _produce(c: httpx.Client, n: int = 300) -> list[dict[str, Any]]:
    """n messages of ~1 KiB (about five 64 KiB segments); returns the produce results with their bodies."""
    c.post("/v1/topics", json={"name": _TOPIC, "queues": 1}).raise_for_status()
    out = []
    for lo in range(0, n, 50):
        msgs = [{"body": f"m{i:05d}-" + "x" * 1000, "keys": [f"k{i}"]} for i in range(lo, lo + 50)]
        resp = c.post(f"/v1/topics/{_TOPIC}/messages", json={"messages": msgs})
        resp.raise_for_status()
        out += [{**r, "body": m["body"]} for r, m in zip(resp.json()["results"], msgs)]
    return out


def _read_all(c: httpx.Client) -> list[tuple[int, str]]:
    seen, offset = [], 0
    while True:
        page = c.get(f"/v1/topics/{_TOPIC}/queues/0/messages", params={"offset": offset, "max_messages": 100})
        page.raise_for_status()
        doc = page.json()
        seen += [(m["offset"], m["body"]) for m in doc["messages"]]
        if doc["status"] != "FOUND":
            return seen
        offset = doc["next_offset"]


def _wait_tiered(c: httpx.Client, remote_at_least: int, timeout_s: float = 30.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        tiered = c.get("/v1/broker").json()["tiered"]
        if (tiered["remote_segments"] >= remote_at_least and tiered["local_segments"] == 1) \
                or time.monotonic() > deadline:
            return tiered
        time.sleep(0.1)


def _wait(done: Callable[[], bool], timeout_s: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def test_broker_serves_remote_segments_over_http(fast_broker: Callable[..., Any], s3_server: S3Server) -> None:
    bucket = s3_server.new_bucket()
    b = fast_broker(_env(s3_server, f"s3://{bucket}/b1"))
    with httpx.Client(base_url=b.url, timeout=30) as c:
        sent = _produce(c)
        tiered = _wait_tiered(c, 4)
        assert tiered["local_segments"] == 1 and tiered["remote_bytes"] >= 4 * (64 << 10), tiered
        store = b.data_dir / "store"
        assert _wait(lambda: min(p.name for p in (store / "consumequeue" / _TOPIC / "0").iterdir()) > "0" * 20
                     and len(list((store / "index").iterdir())) < 300 // 63)  # the old queue and index files: S3
        assert _read_all(c) == [(r["queue_offset"], r["body"]) for r in sent]  # 90 % remote, byte for byte
        first = c.get(f"/v1/messages/{sent[0]['msg_id']}").json()
        assert first["body"] == sent[0]["body"]
        hits = c.get(f"/v1/topics/{_TOPIC}/messages", params={"key": "k7"}).json()["messages"]
        assert [m["body"] for m in hits] == [sent[7]["body"]]
        at = c.get(f"/v1/topics/{_TOPIC}/queues/0/offset", params={"timestamp_ms": first["store_timestamp"]})
        assert at.json()["offset"] == 0
        metrics = c.get("/metrics").text
        assert "sparkmq_tiered_remote_bytes" in metrics and "sparkmq_tiered_cache_hits" in metrics
        seg = json.loads((b.data_dir / "store" / "tiered" / "manifest.json").read_text())["segments"][1]
        victim = next(r for r in sent if seg["start"] <= int(r["msg_id"][16:], 16) < seg["start"] + seg["size"])
        s3_server.client().delete_object(Bucket=bucket, Key=f"b1/{seg['key']}")  # its blocks left the 32 KiB cache
        resp = c.get(f"/v1/messages/{victim['msg_id']}")
        assert resp.status_code == 502 and resp.json()["error"] == "remote_read_failed", resp.text
        assert "could not be read" in resp.json()["message"]


def test_sigkill_during_upload_loses_nothing_and_resumes(fast_broker: Callable[..., Any],
                                                         s3_server: S3Server) -> None:
    bucket = s3_server.new_bucket()
    gate = Gate(int(s3_server.endpoint.rsplit(":", 1)[1]))
    try:
        b = fast_broker(_env(s3_server, f"s3://{bucket}/b2", endpoint=f"http://127.0.0.1:{gate.port}"))
        gate.close()  # from now on S3 hears the requests but never answers
        with httpx.Client(base_url=b.url, timeout=30) as c:
            sent = _produce(c)
        assert gate.traffic.wait(20), "no upload started"
        b.kill()  # in the middle of the first upload
        manifest = b.data_dir / "store" / "tiered" / "manifest.json"
        assert not manifest.exists() or json.loads(manifest.read_text())["segments"] == []
        gate.open()
        b.start()
        with httpx.Client(base_url=b.url, timeout=30) as c:
            tiered = _wait_tiered(c, 4)
            assert tiered["local_segments"] == 1 and tiered["failed_uploads"] == 0, tiered
            assert _read_all(c) == [(r["queue_offset"], r["body"]) for r in sent]
        assert len([k for k in s3_server.keys(bucket, "b2/commitlog/")]) == tiered["remote_segments"]
    finally:
        gate.stop()
