"""``sparkmq bench``: the table on stdout, the JSON file, the benchmarks page's block, clear failures.

The suite runs for real (``--quick`` sizes) as a subprocess of ``python -m
broker_api bench`` with ``TMPDIR`` inside ``tmp_path``, so every broker,
``redis-server`` and scratch directory it creates can be checked for leftovers.
No assertion is about how fast anything is.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from benchmarks.table import BEGIN, END

REPO = Path(__file__).resolve().parent.parent
PAGE = REPO / "docs" / "benchmarks.md"
AREAS = ("store", "broker", "spark", "mirror")
FIGURE = re.compile(r"^-?[\d,]+(\.\d+)? \S+$")


def _bench(args: list[str], cwd: Path, timeout_s: float = 540, **env: str) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "TMPDIR": str(cwd), **env}
    return subprocess.run([sys.executable, "-m", "broker_api", "bench", *args], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=timeout_s, check=False)


def _table_rows(text: str) -> list[list[str]]:
    """The data rows of the first markdown table in ``text``, as lists of cells."""
    lines = [ln for ln in text.splitlines() if ln.startswith("| ")]
    assert lines and lines[0].startswith("| what | command | figure"), text
    return [[c.strip() for c in re.split(r"(?<!\\)\|", ln)[1:-1]] for ln in lines[1:]]


def _area(command_cell: str) -> str:
    match = re.fullmatch(r"`sparkmq bench (--quick )?--only (\w+)`", command_cell)
    assert match, command_cell
    return match.group(2)


def _processes_mentioning(text: str) -> list[str]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in args:
            found.append(args)
    return found


def test_quick_run_prints_table_writes_json_and_rewrites_only_the_readme_block(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    shutil.copy(PAGE, readme)
    original = readme.read_text(encoding="utf-8")
    out = _bench(["--quick", "--only", "store", "--json", "results.json", "--docs", str(readme)], tmp_path,
                 timeout_s=300)
    assert out.returncode == 0, out.stderr[-3000:]

    rows = _table_rows(out.stdout)
    assert {_area(r[1]) for r in rows} == {"store"}
    assert all(r[1].startswith("`sparkmq bench --quick --only ") for r in rows)
    assert all(FIGURE.match(r[2]) for r in rows), [r[2] for r in rows]
    whats = [r[0] for r in rows]
    assert any("ASYNC flush" in w for w in whats)
    assert all(r[6].startswith(f"{os.cpu_count()} cores, ") for r in rows)

    results = json.loads((tmp_path / "results.json").read_text())
    assert [r["what"] for r in results["rows"]] == whats
    # every figure was measured; only counts of failures (unanswered, refused requests) may be 0
    assert all(r["value"] > 0 or r["key"].endswith((".unanswered", ".refused")) for r in results["rows"])
    assert results["options"] == {"only": ["store"], "quick": True}
    assert results["machine"]["cores"] == os.cpu_count() and results["failures"] == []

    sync = next(r for r in results["rows"] if r["key"] == "store.sync")
    assert sync["peer_value"] > 0 and sync["ratio"] == sync["value"] / sync["peer_value"]

    new = readme.read_text(encoding="utf-8")
    before, after = original.split(BEGIN)[0], original.split(END)[1]
    assert new.startswith(before + BEGIN) and new.endswith(END + after)
    block = new.split(BEGIN)[1].split(END)[0]
    assert _table_rows(block) == rows

    assert _processes_mentioning(str(tmp_path)) == []  # stores and scratch processes all gone
    assert not list(tmp_path.glob("sparkmq-bench-*"))


def test_a_failing_benchmark_is_one_error_line_and_leaves_the_readme_alone(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{BEGIN}\nold table\n{END}\noutro\n")
    # An invalid setting in the environment makes the benchmark's broker refuse to start.
    out = _bench(["--quick", "--only", "storm", "--docs", str(readme)], tmp_path,  # one benchmark, by its name
                 SPARKMQ_BROKER__DEFAULT_QUEUES="many")
    assert out.returncode == 1
    errors = [line for line in out.stderr.strip().splitlines() if line.startswith("error:")]
    assert len(errors) == 1, out.stderr[-3000:]
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("error: benchmark 'storm' failed: exit status 1: ") and "left unchanged" in last
    log = Path(re.search(r"\(log: (\S+)\)", last).group(1))
    assert log.exists() and "Traceback" in log.read_text()
    assert readme.read_text() == f"intro\n{BEGIN}\nold table\n{END}\noutro\n"
    assert _processes_mentioning(str(tmp_path)) == []


def test_bad_options_fail_before_anything_runs(tmp_path: Path) -> None:
    out = _bench(["--only", "store,kafak"], tmp_path, timeout_s=60)
    assert out.returncode == 1
    assert out.stderr.strip().splitlines() == [
        ("error: --only 'store,kafak': unknown benchmark 'kafak'; "
         "choose from store,broker,spark,mirror (the default) and kafka,failover,tiered (opt-in), "
         "or one benchmark: index,broker_load,storm,ha,producer,pop,delay,tables,kafka_wire")]
    plain = tmp_path / "NOTES.md"
    plain.write_text("no markers here\n")
    out = _bench(["--only", "store", "--docs", str(plain)], tmp_path, timeout_s=60)
    assert out.returncode == 1 and "has no '<!-- generated:bench start -->'" in out.stderr
    assert not (tmp_path / "bench-results.json").exists()


def test_kafka_is_an_opt_in_area_outside_the_default_run(tmp_path: Path) -> None:
    """``--only kafka`` is accepted (it needs Java and Maven, so the default run leaves it out)."""
    help_text = _bench(["--help"], tmp_path, timeout_s=60, COLUMNS="200").stdout
    assert "kafka (a real Kafka broker: Java, Maven) is opt-in" in help_text
    assert "[default: store,broker,spark,mirror]" in help_text
    plain = tmp_path / "NOTES.md"
    plain.write_text("no markers here\n")
    out = _bench(["--only", "kafka", "--docs", str(plain)], tmp_path, timeout_s=60)
    assert out.returncode == 1 and "unknown benchmark" not in out.stderr
    assert "has no '<!-- generated:bench start -->'" in out.stderr  # it got as far as checking the README


def test_the_broker_benchmark_measures_next_to_its_peers_skips_a_missing_redis_and_leaves_nothing_running(
        tmp_path: Path) -> None:
    """The broker area's figures come with their peers: the bare FastAPI route always; with no
    redis-server (and no apt-get to install it) on PATH the run still succeeds and says why the
    Redis peer is missing.  (The tests never install a peer: only a benchmark run does.)"""
    from benchmarks.results import load_measures
    from benchmarks.table import Row

    out_json = tmp_path / "broker.json"
    env = {**os.environ, "PATH": str(Path(sys.executable).parent), "TMPDIR": str(tmp_path)}
    assert shutil.which("redis-server", path=env["PATH"]) is None
    out = subprocess.run([sys.executable, "-m", "benchmarks.bench_broker", "--duration", "0.5", "--phases",
                          "batch,single", "--json-out", str(out_json)], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=180, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "apt-get install -y redis-server" in out.stdout
    measures = {m.key: m for m in load_measures(out_json)}
    single = measures["broker.produce_single"]
    assert single.peer == "bare FastAPI route" and single.peer_value and single.peer_value > 0
    measure = measures["broker.produce_json"]
    assert measure.value > 0 and measure.peer_value is None
    assert not list(tmp_path.glob("bench-broker-*"))
    cells = Row("broker", "sparkmq bench --only broker", measure, "m").cells()
    assert cells[3] == ("Redis XADD pipelined 50: skipped, redis-server not installed "
                        "(apt-get install -y redis-server)")
    assert cells[5] == "≥ 1× peer: not measured"
    assert _processes_mentioning(str(tmp_path)) == []


def test_the_pages_bench_block_holds_a_full_run_of_every_area() -> None:
    text = PAGE.read_text(encoding="utf-8")
    assert BEGIN in text and END in text
    block = text.split(BEGIN)[1].split(END)[0]
    rows = _table_rows(block)
    assert {_area(r[1]) for r in rows} == set(AREAS)
    assert not any("--quick" in r[1] for r in rows), "the benchmarks page's table must come from a full run"
    assert all(FIGURE.match(r[2]) for r in rows)


def test_a_script_taking_a_scratch_directory_is_given_one_that_exists(tmp_path: Path) -> None:
    # bench_tables makes its temp dir inside --dir: the full run failed at its last script
    # because the suite passed a scratch path it had not created
    from rich.progress import Progress

    from benchmarks.suite import BenchSpec, run_one

    spec = BenchSpec("mirror", "probe", "tests.bench_probe", (), (), 60, 60, scratch_flag="--dir")
    with Progress(disable=True) as progress:
        measures = run_one(spec, True, tmp_path, progress)
    assert [m.key for m in measures] == ["probe.scratch"]
