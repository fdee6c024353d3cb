"""Start ``python -m broker_api ...`` processes without paying the interpreter's imports each time.

A broker spends most of its start-up importing FastAPI, pydantic, pyarrow and numpy (seconds on a
busy 2-core machine), and the suite starts hundreds.  One launcher process per test process imports
them once and forks a child per request; the child sets the requested environment, working
directory and log file, then runs the real command line (``broker_api.cli.main``) with the
requested arguments: the same code as ``python -m broker_api serve``, in its own process with its
own pid, signals and exit code.  :func:`spawn` returns a handle with the ``subprocess.Popen``
methods the tests use (``poll``, ``wait``, ``send_signal``, ``terminate``, ``kill``, ``pid``,
``returncode``).

``SPARKMQ_TEST_FORK=0`` turns it off (every process is a fresh interpreter, as before); tests that
check how the interpreter itself starts (the CLI's own tests, the README tour) never use it.
"""

from __future__ import annotations

import gc
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

_PRELOAD = ("broker_api.cli", "broker_api.server", "broker_api.broker", "broker_api.http.app", "broker_api.namesrv.app",
            # what a broker or NameServer imports while it starts (uvicorn's protocol and loop, the mirror)
            "anyio._backends._asyncio", "anyio.streams.memory", "anyio.streams.stapled", "connectors.mirror",
            "connectors.mirror_process", "connectors.upkeep_thread", "store.readonly", "tomllib",
            "typer._click.decorators", "uvicorn.lifespan.on", "uvicorn.lifespan.off", "uvicorn.loops.asyncio",
            "uvicorn.protocols.http.auto", "uvicorn.protocols.http.httptools_impl", "uvicorn.protocols.websockets.auto",
            "fastapi.telemetry._runtime")
_REPO_ROOT = Path(__file__).resolve().parent.parent


class Forked:
    """A forked child of the launcher, driven like a ``subprocess.Popen``."""

    def __init__(self, pid: int, rc_path: Path, args: list[str]) -> None:
        self.pid = pid
        self.args = args
        self.returncode: int | None = None
        self._rc_path = rc_path

    def poll(self) -> int | None:
        if self.returncode is None and self._rc_path.exists():
            text = self._rc_path.read_text().strip()
            if text:
                self.returncode = int(text)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
            time.sleep(0.02)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class _Launcher:
    """The launcher process of this test process (started on first use, ends when its stdin closes)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._count = 0

    def _ensure(self) -> subprocess.Popen[bytes]:
        if self._proc is None or self._proc.poll() is not None:
            env = {k: v for k, v in os.environ.items() if not k.startswith("SPARKMQ_")}
            self._proc = subprocess.Popen([sys.executable, "-m", "tests.launcher"], cwd=_REPO_ROOT, env=env,
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        return self._proc

    def spawn(self, args: list[str], env: dict[str, str], cwd: Path, log_path: Path,
              err_path: Path | None = None) -> Forked:
        with self._lock:
            proc = self._ensure()
            assert proc.stdin is not None and proc.stdout is not None
            self._count += 1
            rc_path = log_path.with_name(f"{log_path.name}.{os.getpid()}.{self._count}.rc")
            rc_path.unlink(missing_ok=True)
            request = {"args": args, "env": env, "cwd": str(cwd), "log": str(log_path), "rc": str(rc_path),
                       "err": str(err_path) if err_path else None}
            proc.stdin.write(json.dumps(request).encode() + b"\n")
            proc.stdin.flush()
            line = proc.stdout.readline()
            if not line:
                raise RuntimeError(f"the test launcher exited with {proc.wait()}")
            return Forked(int(json.loads(line)["pid"]), rc_path, args)

    def close(self) -> None:
        with self._lock:
            if self._proc is not None and self._proc.poll() is None:
                assert self._proc.stdin is not None
                self._proc.stdin.close()
                try:
                    self._proc.wait(10)
                except subprocess.TimeoutExpired:
                    self._proc.kill()
            self._proc = None


_LAUNCHER = _Launcher()


def enabled() -> bool:
    return os.environ.get("SPARKMQ_TEST_FORK", "1") != "0"


def spawn(args: list[str], env: dict[str, str], log_path: Path,
          cwd: Path = _REPO_ROOT) -> Forked | subprocess.Popen[bytes]:
    """``python -m broker_api *args`` with ``env`` and stdout+stderr appended to ``log_path``."""
    if not enabled():
        with open(log_path, "ab") as log:
            return subprocess.Popen([sys.executable, "-m", "broker_api", *args], cwd=cwd, env=env,
                                    stdout=log, stderr=subprocess.STDOUT)
    return _LAUNCHER.spawn(args, env, cwd, log_path)


def run(args: list[str], env: dict[str, str] | None = None, cwd: Path = _REPO_ROOT,
        timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    """``subprocess.run([python, -m, broker_api, *args], capture_output=True, text=True)``, forked."""
    env = dict(os.environ if env is None else env)
    if not enabled():
        return subprocess.run([sys.executable, "-m", "broker_api", *args], cwd=cwd, env=env, capture_output=True,
                              text=True, timeout=timeout, check=False)
    with tempfile.TemporaryDirectory(prefix="sparkmq-run-") as tmp:
        out, err = Path(tmp) / "out", Path(tmp) / "err"
        proc = _LAUNCHER.spawn(args, env, cwd, out, err)
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
            raise
        return subprocess.CompletedProcess(["python", "-m", "broker_api", *args], code,
                                           out.read_text(errors="replace") if out.exists() else "",
                                           err.read_text(errors="replace") if err.exists() else "")


def close() -> None:
    _LAUNCHER.close()


# ----------------------------------------------------------------------------------------------
# The launcher process itself: `python -m tests.launcher` (single-threaded, so forking is safe).
# ----------------------------------------------------------------------------------------------


def _child(request: dict[str, Any]) -> None:
    """In the forked child: become ``python -m broker_api *args`` and never return."""
    code = 1
    try:
        # The launcher's request and reply pipes are fds 0 and 1: replaced by /dev/null and the log.
        log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        err = os.open(request.get("err") or request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(log, 1)
        os.dup2(err, 2)
        os.dup2(devnull, 0)
        for fd in (log, err, devnull):
            if fd > 2:
                os.close(fd)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        sys.argv = ["python -m broker_api", *request["args"]]
        from broker_api.cli import main

        main()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001 - a child reports its crash in its log and exit code
        import traceback

        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _reap(rc_paths: dict[int, str]) -> None:
    while rc_paths:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        path = rc_paths.pop(pid, None)
        if path is not None:
            tmp = f"{path}.tmp"
            with open(tmp, "w") as f:
                f.write(str(os.waitstatus_to_exitcode(status)))
            os.replace(tmp, path)


def _cache_command_trees() -> None:
    """typer builds the click command tree from the functions' signatures on every call (a fifth of a
    forked broker's start): built once here, before the forks, and the same tree served to each child."""
    import typer.main

    from broker_api.cli.root import app

    build, built = typer.main.get_command, {}

    def cached(typer_app: Any) -> Any:
        if id(typer_app) not in built:
            built[id(typer_app)] = (typer_app, build(typer_app))
        return built[id(typer_app)][1]

    typer.main.get_command = cached
    cached(app)


def _serve() -> None:
    for name in _PRELOAD:
        try:
            __import__(name)
        except ImportError:  # an optional part (an older uvicorn's module layout): the child imports what it needs
            pass
    _cache_command_trees()
    # The preloaded heap is shared with every child: frozen, so a child's gc.collect() at start-up (the
    # broker's [runtime] gc_freeze) neither walks it nor copies its pages.
    gc.collect()
    gc.freeze()
    requests, replies = sys.stdin.buffer, sys.stdout.buffer
    assert requests.fileno() == 0 and replies.fileno() == 1
    rc_paths: dict[int, str] = {}
    buffered = b""
    while True:
        ready, _, _ = select.select([requests], [], [], 0.02)
        _reap(rc_paths)
        if not ready:
            continue
        chunk = os.read(requests.fileno(), 65536)
        if not chunk:
            break  # the test process closed us (or died): stop taking requests
        buffered += chunk
        while b"\n" in buffered:
            line, buffered = buffered.split(b"\n", 1)
            request = json.loads(line)
            pid = os.fork()
            if pid == 0:
                _child(request)
            rc_paths[pid] = request["rc"]
            replies.write(json.dumps({"pid": pid}).encode() + b"\n")
            replies.flush()
    deadline = time.monotonic() + 30
    while rc_paths and time.monotonic() < deadline:  # children still running finish on their own terms
        _reap(rc_paths)
        time.sleep(0.05)


if __name__ == "__main__":
    _serve()
