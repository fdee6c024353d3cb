"""`sparkmq serve --kafka-port`: the listener starts with the broker and stops with it, parked fetches included."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import confluent_kafka as ck

from tests.broker_api.conftest import FAST_ENV
from tests.conftest import _free_port
from tests.procs import stop_process

ROOT = Path(__file__).resolve().parents[2]


def test_kafka_port_flag_serves_and_sigterm_stops_cleanly_with_a_parked_fetch(tmp_path: Path) -> None:
    log = tmp_path / "broker.log"
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("SPARKMQ_")} | FAST_ENV
    cmd = [sys.executable, "-m", "broker_api", "serve", "--host", "127.0.0.1", "--port", str(_free_port()),
           "--data-dir", str(tmp_path / "data"), "--kafka-port", "0"]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        found = None
        while found is None and time.monotonic() < deadline and proc.poll() is None:
            found = re.search(r"kafka listener on ([\d.]+:\d+)", log.read_text())
            time.sleep(0.1)
        assert found, log.read_text()
        bootstrap = found.group(1)
        p = ck.Producer({"bootstrap.servers": bootstrap})
        p.produce("lifecycle", b"one", partition=0)  # auto-created ([broker] auto_create_topics)
        assert p.flush(20) == 0
        c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "life", "fetch.wait.max.ms": 30000,
                         "enable.auto.commit": False})  # close() after the stop has nothing to commit
        c.assign([ck.TopicPartition("lifecycle", 0, 0)])
        m = None
        while m is None and time.monotonic() < deadline:
            m = c.poll(0.5)
        assert m is not None and m.value() == b"one"
        c.poll(1.0)  # the next fetch is parked for up to 30 s
        started = time.monotonic()
        assert stop_process(proc, 20) == 0
        assert time.monotonic() - started < 10
        c.close()
        with socket.socket() as s:  # nothing listens there any more (closed connections may linger in TIME_WAIT)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            host, port = bootstrap.split(":")
            s.bind((host, int(port)))
            s.listen()
    finally:
        stop_process(proc, 5)
    text = log.read_text()
    assert "Traceback" not in text, text
