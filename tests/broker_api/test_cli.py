"""The sparkmq CLI against a real broker."""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

import orjson
from typer.testing import CliRunner

from broker_api.cli import app

runner = CliRunner()


def _run(url: str, *args: str, stdin: str | None = None) -> Any:
    result = runner.invoke(app, [*args, "--url", url], input=stdin)
    return result


def test_topic_commands(quick: Any) -> None:
    created = _run(quick.url, "topic", "create", "cli-t", "--queues", "3")
    assert created.exit_code == 0, created.output
    assert "cli-t: 3 queues" in created.output
    listed = _run(quick.url, "topic", "list")
    assert "cli-t" in listed.output and listed.exit_code == 0
    described = _run(quick.url, "topic", "describe", "cli-t")
    assert described.exit_code == 0 and "max offset" in described.output
    deleted = _run(quick.url, "topic", "delete", "cli-t", "--yes")
    assert deleted.exit_code == 0
    missing = _run(quick.url, "topic", "describe", "cli-t")
    assert missing.exit_code == 1 and "does not exist" in missing.output


def test_produce_consume_groups_offsets(quick: Any) -> None:
    produced = _run(quick.url, "produce", "cli-p", "--key", "k1", stdin="one\ntwo\nthree\n")
    assert produced.exit_code == 0 and "produced 3 message(s)" in produced.output
    time.sleep(0.3)
    consumed = _run(quick.url, "consume", "cli-p", "--group", "g", "--json")
    assert consumed.exit_code == 0, consumed.output
    lines = [orjson.loads(line) for line in consumed.output.splitlines() if line.startswith("{")]
    assert [m["body"] for m in lines] == ["one", "two", "three"]
    again = _run(quick.url, "consume", "cli-p", "--group", "g", "--json")
    assert [line for line in again.output.splitlines() if line.startswith("{")] == []
    groups = _run(quick.url, "groups")
    assert "g" in groups.output and groups.exit_code == 0
    detail = _run(quick.url, "groups", "g")
    assert "lag 0" in detail.output
    qid = str(lines[0]["queue_id"])
    reset = _run(quick.url, "offsets", "g", "--topic", "cli-p", "--set", f"{qid}=1")
    assert reset.exit_code == 0 and "next offset" in reset.output
    replay = _run(quick.url, "consume", "cli-p", "--group", "g", "--json", "--max", "5")
    assert [orjson.loads(x)["body"] for x in replay.output.splitlines() if x.startswith("{")] == ["two", "three"]


def test_clear_errors_and_help(quick: Any) -> None:
    down = runner.invoke(app, ["topic", "list", "--url", "http://127.0.0.1:9"])
    assert down.exit_code == 1 and "cannot reach the broker" in down.output
    bad = _run(quick.url, "offsets", "g", "--topic", "x", "--set", "zero")
    assert bad.exit_code == 1
    help_text = subprocess.run([sys.executable, "-m", "broker_api", "--help"], capture_output=True, text=True,
                               timeout=60).stdout
    for command in ("serve", "topic", "produce", "consume", "groups", "offsets", "sql"):
        assert command in help_text
    serve_help = runner.invoke(app, ["serve", "--help"])
    assert "--flush-mode" in serve_help.output and "--data-dir" in serve_help.output
    bad_config = runner.invoke(app, ["serve", "--config", "/nonexistent/broker.toml"])
    assert bad_config.exit_code == 1 and "does not exist" in bad_config.output
