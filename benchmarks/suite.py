"""The benchmark suite behind ``sparkmq bench``: every script in its own subprocess.

Each script runs as ``python -m benchmarks.<script> ... --json-out FILE`` in a
new session (its own process group), so Spark's JVM, the store's threads and
the brokers and ``redis-server`` it starts are isolated and can all be
killed at once if it overruns its time limit.  Its ``[phase] ...`` lines
feed a progress display; its stderr goes to a log file that is kept (and
named in the error) when it fails.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn

from benchmarks.areas import ALL_AREAS, AREAS, OPT_IN_AREAS
from benchmarks.results import PHASE_PREFIX, Measure, load_measures

__all__ = ["ALL_AREAS", "AREAS", "NAMES", "OPT_IN_AREAS", "SPECS", "BenchSpec", "BenchmarkFailed", "Outcome",
           "bench_command_line", "run_suite", "specs_for"]


@dataclass(frozen=True)
class BenchSpec:
    """One benchmark script, its arguments for the full and the quick run, and its time limits."""

    area: str
    name: str
    module: str
    full: tuple[str, ...]
    quick: tuple[str, ...]
    limit_s: float
    quick_limit_s: float
    scratch_flag: str | None = None  # a flag taking a scratch directory, if the script has one

    def args(self, quick: bool) -> tuple[str, ...]:
        return self.quick if quick else self.full

    def script_command(self, quick: bool) -> str:
        """The standalone command for this script with the suite's sizes."""
        return shlex.join(["python", "-m", self.module, *self.args(quick)])


SPECS: tuple[BenchSpec, ...] = (
    BenchSpec("store", "store", "benchmarks.bench_store", ("--messages", "1000000", "--sync-seconds", "5"),
              ("--messages", "50000", "--sync-seconds", "1"), 900, 180, scratch_flag="--dir"),
    BenchSpec("store", "index", "benchmarks.bench_index", ("--batches", "200", "--batch-size", "10000"),
              ("--batches", "10", "--batch-size", "10000", "--queries", "2000"), 300, 120),
    BenchSpec("broker", "broker", "benchmarks.bench_broker", ("--duration", "5"), ("--duration", "1"), 600, 180),
    BenchSpec("broker", "broker_load", "benchmarks.bench_broker_load", ("--duration", "10", "--gigabytes", "10"),
              ("--duration", "2", "--gigabytes", "0.2"), 1200, 240),  # issue 15: long-poll under load, RSS
    # Overload (issue 22): 1000 connections of single produce, then 24 connections of 10 MB Arrow requests.
    BenchSpec("broker", "storm", "benchmarks.bench_storm", ("--duration", "20"),
              ("--duration", "2", "--connections", "100", "--arrow-connections", "4", "--arrow-mb", "2",
               "--settle-s", "1"), 400, 120),
    # HA (issue 12): replication throughput, slave lag at 100k msg/s, SYNC_MASTER next to ASYNC_MASTER and sync flush.
    BenchSpec("broker", "ha", "benchmarks.bench_ha", ("--duration", "5"), ("--duration", "1", "--copy-mb", "20"),
              600, 180),
    # Failover (issue 31): SIGKILL of a controller-mode master -> first SEND_OK; NameServer restarts under load.
    BenchSpec("failover", "failover", "benchmarks.bench_failover", ("--kills", "20", "--ns-restarts", "3"),
              ("--kills", "1", "--replicas", "2", "--ns-restarts", "1"), 1800, 180),
    # Tiered storage (issue 35): 1 GB read back through the Spark source from S3 (moto) vs from local segments.
    BenchSpec("tiered", "tiered", "benchmarks.bench_tiered", ("--size", "1G"), ("--size", "64M"), 2400, 600),
    # Message model (issue 13): POP + ack next to a plain pull of the same messages; timers with 1M pending.
    BenchSpec("broker", "producer", "benchmarks.bench_producer", ("--rows", "1000000", "--seconds", "5"),
              ("--rows", "50000", "--seconds", "1"), 300, 120),  # the asynchronous Producer (issue 34)
    BenchSpec("broker", "pop", "benchmarks.bench_pop", ("--messages", "200000"), ("--messages", "20000"), 300, 90),
    BenchSpec("broker", "delay", "benchmarks.bench_delay", ("--pending", "1000000", "--due", "100000"),
              ("--pending", "20000", "--due", "5000"), 600, 90),
    BenchSpec("spark", "spark", "benchmarks.bench_spark",
              ("--rows", "1000000", "--sink-rows", "1000000", "--latency-s", "10"),
              ("--rows", "50000", "--sink-rows", "5000", "--latency-s", "3"), 1200, 420),
    BenchSpec("mirror", "mirror", "benchmarks.bench_mirror",
              ("--duration", "60", "--rate", "80000", "--hosts", "thread,process", "--catchup-messages", "1000000",
               "--groupby-rows", "10000000"),  # issue 15: lag <= 5 s at 80k msg/s for 60 s
              ("--duration", "3", "--rate", "100000", "--catchup-messages", "20000", "--groupby-rows", "100000"),
              1200, 300),
    BenchSpec("mirror", "tables", "benchmarks.bench_tables", ("--keys", "1000000"),  # table topics (issue 23)
              ("--messages", "100000", "--keys", "50000", "--lag-seconds", "3"), 2400, 300, scratch_flag="--dir"),
    # The peer Spark users would pick instead (issue 17): a real Kafka broker, Spark's Kafka source and sink.
    BenchSpec("kafka", "kafka", "benchmarks.bench_kafka",
              ("--rows", "1000000", "--sink-rows", "200000", "--rounds", "3"),
              ("--rows", "50000", "--sink-rows", "5000", "--rounds", "2"), 1800, 600),
    # sparkmq's Kafka listener (issue 32): confluent-kafka and Spark's Kafka source on both brokers.
    BenchSpec("kafka", "kafka_wire", "benchmarks.bench_kafka_wire", ("--rows", "1000000", "--rounds", "3"),
              ("--rows", "20000", "--rounds", "2"), 1800, 600),
)


NAMES = tuple(dict.fromkeys(s.name for s in SPECS))  # one benchmark, named in --only instead of its area


def specs_for(selection: tuple[str, ...]) -> list[BenchSpec]:
    """The scripts to run for ``selection`` (areas, and benchmarks by name), in suite order."""
    return [s for s in SPECS if s.area in selection or s.name in selection]


def bench_command_line(area: str, quick: bool) -> str:
    """The ``sparkmq bench`` command that reproduces an area's rows with the same sizes."""
    return f"sparkmq bench {'--quick ' if quick else ''}--only {area}"


class BenchmarkFailed(Exception):
    """Raised when a benchmark script exits non-zero, overruns its time limit or writes no results."""

    def __init__(self, name: str, reason: str, log: Path) -> None:
        super().__init__(f"benchmark '{name}' failed: {reason} (log: {log})")
        self.name, self.reason, self.log = name, reason, log


@dataclass
class Outcome:
    """What the suite measured: measures per script, seconds per script, and failures."""

    measures: dict[str, list[Measure]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    failures: list[BenchmarkFailed] = field(default_factory=list)


_ERROR_LINE = re.compile(r"^([\w.]+(Error|Exception|Exit|Interrupt)|error)\b.*")


def _last_error(log: Path) -> str:
    """The exception line at the end of a log, else its last non-empty line."""
    lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    for line in reversed(lines[-200:]):
        if _ERROR_LINE.match(line):
            return line
    return lines[-1] if lines else "no output"


def _kill_group(pgid: int) -> None:
    """SIGTERM the script's process group (brokers, redis, JVM included), SIGKILL what is left after 10 s."""
    for sig, grace in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 0.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)


def _show(progress: Progress, task: TaskID, name: str, started: float, text: str) -> None:
    """Show a phase: in the live display on a terminal, else as one line per phase (CI logs)."""
    progress.update(task, description=text)
    if progress.disable:
        progress.console.print(f"{name:<7} {time.monotonic() - started:7.1f} s  {text}", soft_wrap=True)


def _follow(stdout: IO[str], out_log: IO[str], show: Callable[[str], None]) -> None:
    for line in stdout:
        out_log.write(line)
        if line.startswith(PHASE_PREFIX):
            show(line[len(PHASE_PREFIX):].strip())


def _child_env() -> dict[str, str]:
    return {**os.environ, "PYTHONUNBUFFERED": "1", "PYSPARK_PYTHON": sys.executable}


def run_one(spec: BenchSpec, quick: bool, work: Path, progress: Progress) -> list[Measure]:
    """Run one script in its own process group; its measures, or :class:`BenchmarkFailed`."""
    json_out, log = work / f"{spec.name}.json", work / f"{spec.name}.log"
    cmd = [sys.executable, "-m", spec.module, *spec.args(quick), "--json-out", str(json_out)]
    if spec.scratch_flag:
        scratch = work / f"{spec.name}-scratch"
        scratch.mkdir(parents=True, exist_ok=True)
        cmd += [spec.scratch_flag, str(scratch)]
    limit = spec.quick_limit_s if quick else spec.limit_s
    task, started = progress.add_task("starting", bench=spec.name, total=None), time.monotonic()
    show = functools.partial(_show, progress, task, spec.name, started)
    with open(log, "w") as err, open(work / f"{spec.name}.out", "w") as out_log:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL, text=True,
                                env=_child_env(), start_new_session=True)
        reader = threading.Thread(target=_follow, args=(proc.stdout, out_log, show), daemon=True)
        reader.start()
        try:
            rc = proc.wait(limit)
        except subprocess.TimeoutExpired:
            rc = None
        finally:
            _kill_group(proc.pid)  # overran, interrupted, or stragglers after a normal exit
            proc.wait()
            reader.join(10)
    show("done" if rc == 0 else "failed")
    progress.stop_task(task)
    if rc is None:
        raise BenchmarkFailed(spec.name, f"still running after its {limit:.0f} s limit; stopped", log)
    if rc != 0:
        raise BenchmarkFailed(spec.name, f"exit status {rc}: {_last_error(log)}", log)
    if not json_out.exists():
        raise BenchmarkFailed(spec.name, "it exited 0 but wrote no results", log)
    return load_measures(json_out)


def run_suite(areas: tuple[str, ...], quick: bool, console: Console) -> Outcome:
    """Run the scripts of ``areas`` one after another, showing progress on ``console`` (stderr)."""
    outcome = Outcome()
    work = Path(tempfile.mkdtemp(prefix="sparkmq-bench-"))
    columns = (SpinnerColumn(), TextColumn("[bold]{task.fields[bench]:<7}"), TimeElapsedColumn(),
               TextColumn("{task.description}"))
    with Progress(*columns, console=console, transient=False, disable=not console.is_terminal) as progress:
        for spec in specs_for(areas):
            started = time.monotonic()
            try:
                outcome.measures[spec.name] = run_one(spec, quick, work, progress)
            except BenchmarkFailed as exc:
                outcome.failures.append(exc)
            outcome.seconds[spec.name] = time.monotonic() - started
    if not outcome.failures:
        shutil.rmtree(work, ignore_errors=True)
    return outcome
