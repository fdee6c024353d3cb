"""The sparkmq CLI against a real broker: commands, help, one-line errors, progress on stderr, pipes, Ctrl-C.

Where what the user sees matters (help layout, stderr, terminals, signals,
pipes) the console script runs as a subprocess; the rest uses typer's runner.
"""

from __future__ import annotations

import os
import pty
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
import typer
from typer.testing import CliRunner

from broker_api.cli import app

runner = CliRunner()
_SCRIPT = Path(sys.executable).parent / "sparkmq"
_CMD = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "broker_api"]
_ENV = {k: v for k, v in os.environ.items() if not k.startswith("SPARKMQ_")}


def _run(url: str, *args: str, stdin: str | None = None) -> Any:
    return runner.invoke(app, [*args, "--url", url], input=stdin)


def _cli(*args: str, stdin: str | None = None, columns: int = 80,
         timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
    """The console script as a user runs it, stdout and stderr pipes."""
    env = {**_ENV, "COLUMNS": str(columns), "TERM": "xterm"}
    return subprocess.run([*_CMD, *args], check=False, input=stdin, capture_output=True, text=True,
                          timeout=timeout_s, env=env)


def _cli_with_terminal_stderr(*args: str, timeout_s: float = 60) -> tuple[int, bytes, bytes]:
    """Run with stdout a pipe and stderr a pseudo-terminal; returns (exit code, stdout, terminal output)."""
    master, slave = pty.openpty()
    env = {**_ENV, "COLUMNS": "120", "TERM": "xterm"}
    proc = subprocess.Popen([*_CMD, *args], stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL, env=env)
    os.close(slave)
    try:
        out = proc.stdout.read() if proc.stdout else b""
        code = proc.wait(timeout_s)
        return code, out, _drain(master)
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()


def _drain(fd: int) -> bytes:
    chunks: list[bytes] = []
    for _ in range(10_000):
        ready, _, _ = select.select([fd], [], [], 0.5)
        if not ready:
            break
        try:
            data = os.read(fd, 65536)
        except OSError:  # the terminal's other end closed
            break
        if not data:
            break
        chunks.append(data)
    return b"".join(chunks)


def _assert_one_error_line(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert result.returncode == 1, (result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert "Traceback" not in result.stderr


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
    assert missing.exit_code == 1 and "does not exist" in missing.stderr


def test_produce_consume_groups_offsets(quick: Any) -> None:
    produced = _run(quick.url, "produce", "cli-p", "--key", "k1", stdin="one\ntwo\nthree\n")
    assert produced.exit_code == 0 and "produced 3 message(s)" in produced.stdout
    time.sleep(0.3)
    consumed = _run(quick.url, "consume", "cli-p", "--group", "g", "--json")
    assert consumed.exit_code == 0, consumed.output
    lines = [orjson.loads(line) for line in consumed.stdout.splitlines()]
    assert [m["body"] for m in lines] == ["one", "two", "three"]
    assert consumed.stderr.strip() == "3 message(s)"
    again = _run(quick.url, "consume", "cli-p", "--group", "g", "--json")
    assert again.stdout == ""
    groups = _run(quick.url, "groups")
    assert "g" in groups.output and groups.exit_code == 0
    detail = _run(quick.url, "groups", "g")
    assert "lag 0" in detail.output
    qid = str(lines[0]["queue_id"])
    reset = _run(quick.url, "offsets", "g", "--topic", "cli-p", "--set", f"{qid}=1")
    assert reset.exit_code == 0 and "next offset" in reset.output
    replay = _run(quick.url, "consume", "cli-p", "--group", "g", "--json", "--max", "5")
    assert [orjson.loads(x)["body"] for x in replay.stdout.splitlines()] == ["two", "three"]


def test_listing_commands_print_json_for_scripts(quick: Any) -> None:
    assert _run(quick.url, "topic", "create", "cli-j", "--queues", "2").exit_code == 0
    assert _run(quick.url, "produce", "cli-j", "a", "b", "c", "--queue", "1").exit_code == 0
    assert _run(quick.url, "offsets", "gj", "--topic", "cli-j", "--set", "1=1").exit_code == 0
    topics = orjson.loads(_run(quick.url, "topic", "list", "--json").stdout)
    assert {"topic": "cli-j", "broker": "broker-a", "queues": 2, "perm": "rw", "table": "off"} in topics
    described = orjson.loads(_run(quick.url, "topic", "describe", "cli-j", "--json").stdout)
    assert [q["max_offset"] for q in described["broker-a"]["queue_offsets"]] == [0, 3]
    groups = orjson.loads(_run(quick.url, "groups", "--json").stdout)
    assert [(g["group"], g["broker"], g["total_lag"]) for g in groups] == [("gj", "broker-a", 2)]
    detail = orjson.loads(_run(quick.url, "groups", "gj", "--json").stdout)
    assert [(r["queue_id"], r["committed_offset"], r["lag"]) for r in detail["broker-a"]["queues"]] == [(1, 1, 2)]
    assert orjson.loads(_run(quick.url, "offsets", "gj", "--topic", "cli-j", "--json").stdout) == {"broker-a": {"1": 1}}


def test_tables_have_titles_headers_and_right_aligned_numbers(quick: Any) -> None:
    assert _run(quick.url, "produce", "cli-tab", *[str(i) for i in range(12)], "--queue", "0").exit_code == 0
    out = _run(quick.url, "topic", "describe", "cli-tab").stdout.splitlines()
    assert out[0] == "cli-tab on broker-a (perm 'rw', 12 messages)"
    header = next(line for line in out if "min offset" in line)
    row0 = next(line for line in out if line.strip().startswith("0 "))
    end = header.index("messages") + len("messages")
    assert row0.rstrip().endswith("12") and len(row0.rstrip()) == end, (header, row0)


def test_help_lists_every_command_on_one_line_each() -> None:
    main_help = _cli("--help", columns=80)
    assert main_help.returncode == 0
    rows = _panel_rows(main_help.stdout, "Commands")
    names = [row.split()[0] for row in rows]
    registered = set(typer.main.get_command(app).commands)  # type: ignore[attr-defined]
    assert {"serve", "topic", "produce", "consume", "groups", "offsets", "sql", "namesrv"} <= registered
    assert sorted(names) == sorted(registered), f"a command's help wrapped onto a second line: {rows}"
    assert any(row.startswith("serve    Run a broker on its embedded defaults.") for row in rows), rows
    topic_rows = _panel_rows(_cli("topic", "--help", columns=80).stdout, "Commands")
    assert [row.split()[0] for row in topic_rows] == ["create", "alter", "list", "describe", "delete"]
    consume_help = _cli("consume", "--help", columns=80).stdout
    assert "sparkmq consume orders --group billing --follow" in consume_help and "--from" in consume_help
    assert "sparkmq offsets billing --topic orders --set 0=0 --set 1=0" in _cli("offsets", "--help").stdout


def _panel_rows(text: str, title: str) -> list[str]:
    """The rows of a rich help panel (``╭─ Commands ─╮ ... ╰─╯``), border stripped."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if f" {title} " in line and line.startswith("╭"))
    rows = []
    for line in lines[start + 1:]:
        if line.startswith("╰"):
            break
        rows.append(line.strip("│ ").rstrip())
    return rows


def test_errors_are_one_unwrapped_line_on_stderr(quick: Any, free_port: int) -> None:
    down = f"http://127.0.0.1:{free_port}"
    _assert_one_error_line(_cli("topic", "list", "--url", down, columns=40),
                           "cannot reach the broker", "sparkmq serve")
    _assert_one_error_line(_cli("groups", "--namesrv", "127.0.0.1:9", columns=40),
                           "no NameServer answered", "sparkmq namesrv")
    _assert_one_error_line(_cli("consume", "nosuch", "--url", quick.url), "topic 'nosuch' does not exist")
    _assert_one_error_line(_cli("groups", "nosuch", "--url", quick.url), "'nosuch'")
    assert _run(quick.url, "topic", "create", "cli-ro", "--perm", "r").exit_code == 0
    _assert_one_error_line(_cli("produce", "cli-ro", "x", "--url", quick.url), "permission_denied", "HTTP 403")
    _assert_one_error_line(_cli("offsets", "g", "--topic", "x", "--set", "zero", "--url", quick.url), "QUEUE=OFFSET")
    _assert_one_error_line(_cli("produce", "t", "--file", "/nonexistent/file.txt"), "/nonexistent/file.txt")
    _assert_one_error_line(_cli("serve", "--config", "/nonexistent/broker.toml"), "does not exist")
    _assert_one_error_line(_cli("serve", "--flush-mode", "sometimes", "--data-dir", "/nonexistent/d"),
                           "invalid settings", "store.flush_mode")
    usage = _cli("produce")  # typer's own usage error: non-zero, on stderr, no traceback
    assert usage.returncode == 2 and "Missing argument" in usage.stderr and "Traceback" not in usage.stderr


def test_serve_and_namesrv_refuse_a_busy_port_in_one_line(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = str(busy.getsockname()[1])
        _assert_one_error_line(_cli("serve", "--port", port, "--data-dir", str(tmp_path / "d"), columns=40),
                               f"cannot listen on 127.0.0.1:{port}", "another broker")
        _assert_one_error_line(_cli("namesrv", "--port", port, columns=40),
                               f"cannot listen on 127.0.0.1:{port}", "another NameServer")
    assert not (tmp_path / "d" / "store").exists()  # refused before touching the data directory


def test_the_main_port_is_bound_before_the_listeners_the_broker_opens_itself(tmp_path: Path) -> None:
    # The HA listener used to bind first: a caller's free port could go to it, and the broker then
    # failed with uvicorn's raw "address already in use" on the port it was told to serve on.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = str(probe.getsockname()[1])
    _assert_one_error_line(_cli("serve", "--port", port, "--ha-port", port, "--data-dir", str(tmp_path / "d")),
                           "the broker cannot start", f"the HA listener cannot listen on 127.0.0.1:{port}",
                           "--ha-port")


def test_produce_file_shows_progress_on_a_terminal_and_only_the_summary_on_stdout(quick: Any,
                                                                                  tmp_path: Path) -> None:
    data = tmp_path / "orders.txt"
    data.write_text("".join(f"order {i}\n" for i in range(2500)))
    code, out, terminal = _cli_with_terminal_stderr("produce", "cli-f", "--file", str(data), "--url", quick.url)
    assert code == 0 and out == b"produced 2500 message(s) to cli-f\n"
    assert b"2500/2500" in terminal and b"producing to cli-f" in terminal
    piped = _cli("produce", "cli-f", "--url", quick.url, stdin="".join(f"x{i}\n" for i in range(1500)))
    assert piped.returncode == 0 and piped.stdout == "produced 1500 message(s) to cli-f\n"
    assert piped.stderr == ""  # stderr is not a terminal: no animation frames
    counts = orjson.loads(_run(quick.url, "topic", "describe", "cli-f", "--json").stdout)
    assert counts["broker-a"]["messages"] == 4000


def test_consume_catch_up_shows_progress_and_keeps_stdout_clean(quick: Any, tmp_path: Path) -> None:
    data = tmp_path / "backlog.txt"
    data.write_text("".join(f"m{i}\n" for i in range(3000)))
    assert _cli("produce", "cli-c", "--file", str(data), "--url", quick.url).returncode == 0
    code, out, terminal = _cli_with_terminal_stderr("consume", "cli-c", "--json", "--group", "gc", "--url", quick.url)
    assert code == 0
    bodies = sorted(orjson.loads(line)["body"] for line in out.splitlines())
    assert bodies == sorted(f"m{i}" for i in range(3000))
    assert b"catching up cli-c" in terminal and b"3000/3000" in terminal
    again = _cli("consume", "cli-c", "--group", "gc", "--url", quick.url)
    assert again.returncode == 0 and again.stdout == "" and again.stderr == "0 message(s)\n"


def test_closed_pipe_ends_quietly(quick: Any, tmp_path: Path) -> None:
    data = tmp_path / "many.txt"
    data.write_text("".join(f"line {i}\n" for i in range(5000)))
    assert _cli("produce", "cli-pipe", "--file", str(data), "--url", quick.url).returncode == 0
    shell = f"{' '.join(_CMD)} consume cli-pipe --url {quick.url} | head -3"
    out = subprocess.run(["bash", "-c", shell], check=False, capture_output=True, text=True, timeout=60, env=_ENV)
    assert out.returncode == 0 and len(out.stdout.splitlines()) == 3
    assert out.stderr == ""


def test_ctrl_c_exits_130_without_traceback_and_commits(quick: Any) -> None:
    assert _run(quick.url, "produce", "cli-int", "a", "b", "c").exit_code == 0
    proc = subprocess.Popen([*_CMD, "consume", "cli-int", "--group", "gi", "--follow", "--json", "--url", quick.url],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_ENV)
    try:
        assert proc.stdout is not None
        seen = [proc.stdout.readline() for _ in range(3)]
        assert all(line.startswith(b"{") for line in seen)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 130
    assert b"Traceback" not in err and err.decode().strip().endswith("interrupted")
    detail = orjson.loads(_run(quick.url, "groups", "gi", "--json").stdout)
    assert detail["broker-a"]["total_lag"] == 0, (detail, err)


@pytest.mark.parametrize("args", [["serve", "--help"], ["sql", "--help"], ["namesrv", "--help"]])
def test_every_command_help_has_examples(args: list[str]) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 0 and "Examples:" in result.output and f"sparkmq {args[0]}" in result.output
