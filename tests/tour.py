"""Runs the README's five-minute tour, and the documentation site's pages, the way a user pastes them.

The tour section of README.md (and every page of docs/ with runnable blocks) is
a list of fenced blocks, each announced by a marker comment that says how a
user runs it:

``<!-- tour:terminal -->``
    commands that run in a terminal of their own until Ctrl-C (the broker, a
    ``--follow`` consumer). Each starts as its own process; its ``# prints:``
    lines are waited for in its output; at the end it gets SIGINT (Ctrl-C).
``<!-- tour:shell -->``
    commands pasted one by one into one bash shell, shared by every shell block
    (variables, ``&`` jobs, ``wait`` and ``jobs`` behave as in a terminal).
    Each must exit 0; its ``# prints:`` lines must appear in its output.
``<!-- tour:pyspark -->``
    Python pasted into ``pyspark --master "local[2]"``; the output must hold
    the ``# prints:`` lines and no traceback.

``<!-- tour:python -->``
    Python run by this interpreter in the shared shell (so it reaches the
    brokers the page started); its output must hold the ``# prints:`` lines.
``<!-- run:python -->``
    a Python program run on its own (``python -c``) in an empty directory;
    it must exit 0 (see :func:`python_blocks`).
``<!-- norun: why -->``
    a block that is not meant to run as written (an install, a placeholder
    such as ``MSG_ID``, a machine the test does not have); the reason is
    required.  On the pages whose blocks are tested, a shell or Python block
    with none of these markers is an error (see :func:`unmarked_blocks`).

``# prints: A ... B`` after a command means: its output contains ``A``, then
later ``B`` (``...`` stands for anything).  For a background ``&`` command the
expectation is checked when the next ``wait`` returns.  Ports are the only
thing the runner changes: 8080, 8081, 8082, 9876 and 8099 become free ports (in the
commands, and as the defaults of ``sparkmq serve`` and the CLI, through
``SPARKMQ_BROKER__PORT``, ``SPARKMQ_NAMESRV_PORT`` and ``SPARKMQ_URL``).
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

__all__ = ["Block", "Command", "Tour", "as_shell", "parse_blocks", "parse_tour", "find_missing", "python_blocks",
           "unmarked_blocks", "free_ports"]

_MARKER = re.compile(r"<!-- tour:(terminal|shell|pyspark|python) -->\s*\n```(\w+)\n(.*?)\n```", re.S)
_FENCE = re.compile(r"^```(\w*)[^\n]*\n.*?^```", re.S | re.M)
_ANY_MARKER = re.compile(r"<!-- (?:tour:(?:terminal|shell|pyspark|python)|run:python|norun: \S[^>]*) -->\s*$")
_RUNNABLE_LANGS = {"bash", "sh", "shell", "console", "python", "py", "pycon"}
_PRINTS = "# prints:"
_HEREDOC = re.compile(r"<<-?\s*'?(\w+)'?")
_DONE = "__TOUR_RC__="
TOUR_PORTS = (8080, 8081, 8082, 9876, 8099)  # 8099: a page's own little HTTP server


@dataclass
class Command:
    """One pasted command and what the README says it prints."""

    text: str
    expect: list[str] = field(default_factory=list)

    @property
    def background(self) -> bool:
        return self.text.rstrip().endswith("&") and not self.text.rstrip().endswith("&&")


@dataclass
class Block:
    """One fenced block of the tour and how it is run."""

    kind: str
    code: str
    commands: list[Command]


def parse_tour(readme: str) -> list[Block]:
    """The tour's blocks in README order."""
    start, end = readme.index("<!-- section:tour -->"), readme.index("<!-- /section:tour -->")
    blocks = []
    for kind, _lang, code in _MARKER.findall(readme[start:end]):
        blocks.append(Block(kind, code, _python_commands(code) if kind == "pyspark" else _shell_commands(code)))
    return blocks


def parse_blocks(page: str) -> list[Block]:
    """Every ``tour:`` block of a whole page, in page order."""
    return [Block(kind, code, _python_commands(code) if kind in ("pyspark", "python") else _shell_commands(code))
            for kind, _lang, code in _MARKER.findall(page)]


def as_shell(command: Command) -> Command:
    """A ``tour:python`` block as one command of the shared shell (a here-document to ``python``)."""
    return Command(f"python - <<'__TOUR_PY__'\n{command.text}\n__TOUR_PY__", command.expect)


def python_blocks(page: str) -> list[str]:
    """The code of every ``<!-- run:python -->`` block of a page."""
    return re.findall(r"<!-- run:python -->\s*\n```python\n(.*?)\n```", page, flags=re.S)


def unmarked_blocks(page: str) -> list[str]:
    """The first line of every shell or Python fenced block with no run/norun marker on the line before it."""
    missing = []
    for fence in _FENCE.finditer(page):
        if fence.group(1) not in _RUNNABLE_LANGS:
            continue
        before = page[:fence.start()].rstrip("\n").rsplit("\n", 1)[-1]
        if not _ANY_MARKER.search(before):
            missing.append(fence.group(0).split("\n")[1])
    return missing


def _shell_commands(code: str) -> list[Command]:
    commands: list[Command] = []
    pending: list[str] = []
    heredoc: str | None = None
    for line in code.splitlines():
        stripped = line.strip()
        if heredoc is not None:  # a here-document's lines belong to its command, up to its end word
            pending.append(line)
            if stripped == heredoc:
                heredoc = None
                commands.append(Command("\n".join(pending)))
                pending = []
            continue
        opened = _HEREDOC.search(line)
        if opened and not stripped.startswith("#"):
            pending.append(line)
            heredoc = opened.group(1)
            continue
        if not pending and stripped.startswith(_PRINTS):
            commands[-1].expect.append(stripped[len(_PRINTS):].strip())
            continue
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        pending.append(line)
        text = "\n".join(pending)
        if not line.endswith("\\") and _complete(text):
            commands.append(Command(text))
            pending = []
    if pending:
        raise ValueError(f"unfinished command in the tour: {pending!r}")
    return commands


def _complete(text: str) -> bool:
    try:
        shlex.split(text, comments=True)
    except ValueError:  # an open quote: the command goes on on the next line
        return False
    return True


def _python_commands(code: str) -> list[Command]:
    source = [line for line in code.splitlines() if not line.strip().startswith(_PRINTS)]
    expect = [line.strip()[len(_PRINTS):].strip() for line in code.splitlines() if line.strip().startswith(_PRINTS)]
    return [Command("\n".join(source), expect)]


def find_missing(expect: str, output: str) -> str | None:
    """The first piece of ``expect`` (split on ``...``) not found, in order, in ``output``; None if all are."""
    pos = 0
    for piece in (p.strip() for p in expect.split("...")):
        if not piece:
            continue
        found = output.find(piece, pos)
        if found < 0:
            return piece
        pos = found + len(piece)
    return None


class TourError(AssertionError):
    """Raised when a tour command fails or does not print what the README says."""


class Tour:
    """Runs the tour's blocks in a working directory, with the tour's ports mapped to free ones."""

    def __init__(self, workdir: Path, ports: dict[int, int], timeout_s: float = 180.0) -> None:
        self.workdir = workdir
        self.ports = ports
        self.timeout_s = timeout_s
        self.env = _user_env(ports[8080], ports[9876])
        self.terminals: list[tuple[Command, subprocess.Popen[bytes], Path]] = []
        self._shell: subprocess.Popen[bytes] | None = None
        self._fifo_w: TextIO | None = None
        self._log = workdir / "shell.log"
        self._n = 0
        self._bg_start: int | None = None

    def ported(self, text: str) -> str:
        """``text`` with every tour port replaced by its free port."""
        ports = "|".join(str(p) for p in self.ports)
        return re.sub(rf"(?<!\d)({ports})(?!\d)", lambda m: str(self.ports[int(m.group(1))]), text)

    # -- terminals ---------------------------------------------------------------
    def start_terminal(self, command: Command) -> None:
        log = self.workdir / f"terminal-{len(self.terminals)}.log"
        proc = subprocess.Popen(["bash", "-c", self.ported(command.text)], cwd=self.workdir, env=self.env,
                                stdin=subprocess.DEVNULL, stdout=log.open("wb"), stderr=subprocess.STDOUT,
                                start_new_session=True)
        self.terminals.append((command, proc, log))
        for expect in command.expect:
            self._wait_for(self.ported(expect), lambda: log.read_text(errors="replace"), command.text, proc)

    def stop_terminals(self) -> list[tuple[str, int | None, str]]:
        """Ctrl-C to every terminal, newest first; (command, exit code, output) for each."""
        results = []
        for command, proc, log in reversed(self.terminals):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGINT)
                try:
                    proc.wait(60)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(10)
            results.append((command.text, proc.returncode, log.read_text(errors="replace")))
        self.terminals.clear()
        return results

    # -- the shared shell ----------------------------------------------------------
    def _start_shell(self) -> None:
        fifo = self.workdir / "commands.fifo"
        os.mkfifo(fifo)
        loop = f'exec 3<"$0"; while IFS= read -r f <&3; do source "$f"; echo "{_DONE}$?"; done'
        self._shell = subprocess.Popen(["bash", "-c", loop, str(fifo)], cwd=self.workdir, env=self.env,
                                       stdin=subprocess.DEVNULL, stdout=self._log.open("wb"),
                                       stderr=subprocess.STDOUT, start_new_session=True)
        self._fifo_w = fifo.open("w")

    def run_shell(self, command: Command) -> str:
        """Run one command in the shared shell; its output (exactly as printed, up to the next prompt)."""
        if self._shell is None:
            self._start_shell()
        self._n += 1
        script = self.workdir / f"command-{self._n}.sh"
        script.write_text(self.ported(command.text) + "\n")
        start = len(self._log.read_bytes())
        if command.background and self._bg_start is None:
            self._bg_start = start
        assert self._fifo_w is not None
        self._fifo_w.write(f"{script}\n")
        self._fifo_w.flush()
        output, rc = self._wait_done(start, command.text)
        if rc != 0:
            raise TourError(f"`{command.text}` exited {rc}; it printed:\n{output}")
        if command.text.strip() == "wait" or command.text.rstrip().endswith("&& wait"):
            since = self._bg_start if self._bg_start is not None else start
            output = self._log.read_bytes()[since:].decode(errors="replace")
            self._bg_start = None
        for expect in command.expect:
            if command.background:
                self._wait_for(self.ported(expect), lambda: self._log.read_bytes()[start:].decode(errors="replace"),
                               command.text, None)
                continue
            missing = find_missing(self.ported(expect), output)
            if missing is not None:
                raise TourError(f"`{command.text}` should print {expect!r}; {missing!r} is missing in:\n{output}")
        return output

    def _wait_done(self, start: int, text: str) -> tuple[str, int]:
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            out = self._log.read_bytes()[start:].decode(errors="replace")
            match = re.search(rf"{_DONE}(\d+)\n", out)
            if match:
                return out[:match.start()], int(match.group(1))
            if self._shell is not None and self._shell.poll() is not None:
                raise TourError(f"the shell died running `{text}`:\n{out}")
            time.sleep(0.1)
        raise TourError(f"`{text}` did not finish in {self.timeout_s:.0f} s; it printed:\n{out}")

    def _wait_for(self, expect: str, read: Callable[[], str], text: str,
                  proc: subprocess.Popen[bytes] | None) -> None:
        deadline = time.monotonic() + self.timeout_s
        output = ""
        while time.monotonic() < deadline:
            output = read()
            if find_missing(expect, output) is None:
                return
            if proc is not None and proc.poll() is not None:
                break
            time.sleep(0.2)
        raise TourError(f"`{text}` should print {expect!r}; it printed:\n{output}")

    # -- pyspark -----------------------------------------------------------------------
    def run_pyspark(self, command: Command) -> str:
        env = {**self.env, "PYSPARK_DRIVER_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON_OPTS": "-i"}
        done = subprocess.run(["pyspark", "--master", "local[2]"], input=self.ported(command.text) + "\n",
                              cwd=self.workdir, env=env, capture_output=True, text=True, timeout=self.timeout_s * 2)
        output = done.stdout + done.stderr
        if done.returncode != 0 or "Traceback (most recent call last)" in output:
            raise TourError(f"the pyspark block failed (exit {done.returncode}):\n{output[-6000:]}")
        for expect in command.expect:
            missing = find_missing(self.ported(expect), done.stdout)
            if missing is not None:
                raise TourError(f"the pyspark block should print {expect!r}; {missing!r} is missing in:\n{done.stdout}")
        return output

    def close(self) -> None:
        """Stop the shell and whatever it still runs in the background."""
        if self._fifo_w is not None:
            self._fifo_w.close()
        if self._shell is not None:
            try:
                os.killpg(self._shell.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self._shell.wait(10)


def _user_env(broker_port: int, namesrv_port: int) -> dict[str, str]:
    """A user's environment: this interpreter's scripts first on PATH, the CLI pointed at the broker."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARKMQ_")}
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env["SPARKMQ_URL"] = f"http://127.0.0.1:{broker_port}"  # the CLI's default broker
    env["SPARKMQ_BROKER__PORT"] = str(broker_port)  # `sparkmq serve`'s default port (flags still win)
    env["SPARKMQ_NAMESRV_PORT"] = str(namesrv_port)  # `sparkmq namesrv`'s default port
    env["PYSPARK_PYTHON"] = sys.executable
    env["COLUMNS"] = "160"
    return env


def free_ports(n: int) -> list[int]:
    """``n`` distinct free ports on 127.0.0.1, held together while the kernel picks them."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()
