"""Transaction check-back end to end: the broker POSTs to the producer's own HTTP endpoint."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

CHECK_ENV = {"SPARKMQ_TRANSACTIONS__CHECK_IMMUNITY_S": "0.5", "SPARKMQ_TRANSACTIONS__CHECK_INTERVAL_S": "0.5",
             "SPARKMQ_TRANSACTIONS__MAX_CHECKS": "3", "SPARKMQ_TRANSACTIONS__TIMEOUT_S": "1"}


class _Producer:
    """The producer's app: answers each check with ``answers[transaction_id]`` and records the checks."""

    def __init__(self) -> None:
        self.answers: dict[str, str] = {}
        self.checks: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.checks.append(body)
                data = json.dumps({"action": outer.answers.get(body["transaction_id"], "unknown")}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/check"

    def count(self, tx_id: str) -> int:
        return sum(1 for c in self.checks if c["transaction_id"] == tx_id)


@pytest.fixture
def producer() -> Iterator[_Producer]:
    p = _Producer()
    thread = threading.Thread(target=p.server.serve_forever, daemon=True)
    thread.start()
    yield p
    p.server.shutdown()
    thread.join(5)


def _half(c: httpx.Client, topic: str, body: str, check_url: str | None) -> str:
    doc: dict[str, Any] = {"messages": [{"body": body}], "transactional": True}
    if check_url:
        doc["check_url"] = check_url
    resp = c.post(f"/v1/topics/{topic}/messages", json=doc)
    assert resp.status_code == 200, resp.text
    return str(resp.json()["transaction_id"])


def _state(c: httpx.Client, tx_id: str) -> str:
    return str(c.get(f"/v1/transactions/{tx_id}").json()["state"])


def _wait_state(c: httpx.Client, tx_id: str, want: str, timeout_s: float = 15.0) -> str:
    deadline = time.monotonic() + timeout_s
    while _state(c, tx_id) != want and time.monotonic() < deadline:
        time.sleep(0.1)
    return _state(c, tx_id)


def _bodies(c: httpx.Client, topic: str) -> list[str]:
    page = c.get(f"/v1/topics/{topic}/queues/0/messages", params={"offset": 0, "max_messages": 100})
    return [m["body"] for m in page.json().get("messages", [])] if page.status_code == 200 else []


def test_check_back_commits_rolls_back_and_discards(fast_broker: Any, producer: _Producer) -> None:
    b = fast_broker(CHECK_ENV)
    with httpx.Client(base_url=b.url, timeout=30) as c:
        c.post("/v1/topics", json={"name": "ck", "queues": 1})
        to_commit = _half(c, "ck", "yes", producer.url)
        to_rollback = _half(c, "ck", "no", producer.url)
        unknown = _half(c, "ck", "maybe", producer.url)
        plain = _half(c, "ck", "plain", None)
        producer.answers.update({to_commit: "commit", to_rollback: "rollback"})
        assert _wait_state(c, to_commit, "committed") == "committed"
        assert _wait_state(c, to_rollback, "rolled_back") == "rolled_back"
        assert _wait_state(c, plain, "rolled_back") == "rolled_back"  # no check_url: the timeout stays
        assert producer.count(plain) == 0
        check = next(x for x in producer.checks if x["transaction_id"] == to_commit)
        assert check["topic"] == "ck" and isinstance(check["msg_ids"], list)
        assert _wait_state(c, unknown, "discarded", 20.0) == "discarded"
        assert producer.count(unknown) == 3
        assert c.post(f"/v1/transactions/{unknown}", json={"action": "commit"}).status_code == 409
        assert _bodies(c, "ck") == ["yes"]
        assert _bodies(c, "TRANS_CHECK_MAX_TIME_TOPIC") == ["maybe"]
        assert 'sparkmq_transaction_checks_total{outcome="discarded"} 1' in c.get("/metrics").text


def test_check_count_survives_sigkill(fast_broker: Any, producer: _Producer) -> None:
    b = fast_broker({**CHECK_ENV, "SPARKMQ_TRANSACTIONS__MAX_CHECKS": "4"})
    with httpx.Client(base_url=b.url, timeout=30) as c:
        tx = _half(c, "cs", "later", producer.url)
        deadline = time.monotonic() + 10
        while producer.count(tx) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    b.kill()
    before = producer.count(tx)
    b.start()
    with httpx.Client(base_url=b.url, timeout=30) as c:
        assert _wait_state(c, tx, "discarded", 20.0) == "discarded"
    assert 4 <= producer.count(tx) <= 5 and before >= 2  # at most one check repeated by the crash


def test_check_url_to_a_host_not_allowed_is_refused_at_produce_naming_the_setting(fast_broker: Any) -> None:
    b = fast_broker(env=CHECK_ENV)
    with httpx.Client(base_url=b.url, timeout=10) as c:
        c.post("/v1/topics", json={"name": "tx-allow", "queues": 1}).raise_for_status()
        for url in ("http://10.0.0.1/check", "http://internal.example/", "http://169.254.169.254/latest",
                    "http://xn--a.example/", "ftp://127.0.0.1/"):
            r = c.post("/v1/topics/tx-allow/messages",
                       json={"messages": [{"body": "x"}], "transactional": True, "check_url": url})
            assert r.status_code == 400, (url, r.text)
            assert "check_url" in r.json()["message"], r.text
        r = c.post("/v1/topics/tx-allow/messages",
                   json={"messages": [{"body": "x"}], "transactional": True, "check_url": "http://10.0.0.1/"})
        assert "check_url_allow" in r.json()["message"]
        assert _half(c, "tx-allow", "loopback is fine", "http://127.0.0.1:9/check")


def test_an_invalid_international_host_name_is_caught_and_counted_by_the_check_back_thread(
        fast_broker: Any) -> None:
    b = fast_broker(env={**CHECK_ENV, "SPARKMQ_TRANSACTIONS__CHECK_URL_ALLOW": "loopback *.example"})
    with httpx.Client(base_url=b.url, timeout=10) as c:
        c.post("/v1/topics", json={"name": "tx-idna", "queues": 1}).raise_for_status()
        for bad in ("http://\u2603.example/", "http://\uff21.example/", "http://[::1/"):  # httpx.InvalidURL
            r = c.post("/v1/topics/tx-idna/messages",
                       json={"messages": [{"body": "x"}], "transactional": True, "check_url": bad})
            assert r.status_code == 400 and "not a valid URL" in r.json()["message"], (bad, r.text)
        tx = _half(c, "tx-idna", "half", "http://xn--a.example/")  # allowed by name, unparseable by IDNA
        assert _wait_state(c, tx, "discarded") == "discarded"
        metrics = c.get("/metrics").text
    assert 'sparkmq_transaction_checks_total{outcome="failed"} 3' in metrics, metrics
    log = b.log_tail() if hasattr(b, "log_tail") else ""
    assert "Traceback" not in log and "check-back pass failed" not in log, log
