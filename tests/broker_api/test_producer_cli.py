"""``sparkmq produce`` through the Producer, as a user runs it: stdin lines, --files, count, rate, failures."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from broker_api.client import SparkMQClient
from tests.tour import free_ports

from .test_cli import _cli_with_terminal_stderr

_ENV = {k: v for k, v in os.environ.items() if not k.startswith("SPARKMQ_")}


def _produce(*args: str, stdin: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "broker_api", "produce", *args], input=stdin, env=_ENV,
                          capture_output=True, text=True, timeout=120, check=False)


def test_stdin_lines_and_files_go_through_the_producer_with_count_rate_and_failures(quick: Any,
                                                                                   tmp_path: Path) -> None:
    with SparkMQClient(quick.url) as c:
        c.create_topic("cli-async", queues=2)
    lines = "".join(f"line-{i}\n" for i in range(3_000))
    done = _produce("cli-async", "--url", quick.url, "--queue", "1", stdin=lines)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "produced 3000 message(s) to cli-async\n"
    assert done.stderr == ""  # piped: no progress, no rate line
    with SparkMQClient(quick.url) as c:
        page = c.pull("cli-async", 1, 0, max_messages=1_000)
        assert [m["body"] for m in page.messages[:3]] == ["line-0", "line-1", "line-2"]  # in input order
        assert page.max_offset == 3_000
    blobs = []
    for i in range(3):
        blob = tmp_path / f"blob-{i}.bin"
        blob.write_bytes(f"file {i}\n".encode() * 100)
        blobs.append(str(blob))
    files = _produce("cli-files", "--url", quick.url, "--files", "--key", "k", stdin="\n".join(blobs) + "\n")
    assert files.returncode == 0 and files.stdout == "produced 3 message(s) to cli-files\n", files.stderr
    with SparkMQClient(quick.url) as c:
        q = next(i for i in c.queues("cli-files") if i.max_offset)
        bodies = [m["body"] for m in c.pull("cli-files", q.queue_id, 0).messages]
    assert bodies == [f"file {i}\n" * 100 for i in range(3)]
    data = tmp_path / "lines.txt"
    data.write_text(lines)
    code, out, terminal = _cli_with_terminal_stderr("produce", "cli-tty", "--file", str(data), "--url", quick.url)
    assert code == 0 and out == b"produced 3000 message(s) to cli-tty\n"
    assert b"3000/3000" in terminal and b"3,000 acknowledged in" in terminal and b"msg/s), 0 failed" in terminal


def test_failures_are_counted_and_exit_1_in_one_line() -> None:
    (port,) = free_ports(1)  # nothing listens there
    failed = _produce("cli-down", "--url", f"http://127.0.0.1:{port}", stdin="a\nb\nc\n")
    assert failed.returncode == 1 and failed.stdout == ""
    assert "0 acknowledged" in failed.stderr and "3 failed" in failed.stderr
    error = [line for line in failed.stderr.splitlines() if line.startswith("error:")]
    assert len(error) == 1 and "3 of 3 message(s) were not stored" in error[0] and "Traceback" not in failed.stderr
