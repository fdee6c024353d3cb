"""The documentation site: it builds with ``mkdocs build --strict``, its generated pages are current,
and the shell and Python blocks of getting-started and the guides run as written.

Runnable blocks are marked as in the README's tour (see tests/tour.py): ``<!-- tour:terminal -->``,
``<!-- tour:shell -->``, ``<!-- run:python -->``; a block not meant to run says why with
``<!-- norun: ... -->``.  Every page's tour blocks run against their own broker in an empty directory,
with the tour's ports swapped for free ones.  No block here needs Spark, so the whole file stays fast.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from broker_api.cli import docs_gen
from broker_api.cli.docs_gen import REGENERATE

from .tour import Tour, as_shell, find_missing, free_ports, parse_blocks, python_blocks, unmarked_blocks, TOUR_PORTS

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
# The pages whose blocks are checked and run: those mkdocs.yml's nav lists, except the guides whose
# examples need a cluster, real faults or a Kafka client (their commands are exercised by their own tests).
OTHERS = {"guides/security-permissions.md", "guides/cluster-security.md", "guides/client-failures.md",
          "guides/failover.md", "guides/kafka-protocol.md", "guides/damaged-records.md"}
TESTED_PAGES = ["getting-started.md", "concepts.md", *(page for page in re.findall(
    r"^\s+- [^:]+: (guides/[\w-]+\.md)$", (ROOT / "mkdocs.yml").read_text(encoding="utf-8"), flags=re.M)
    if page not in OTHERS)]
RUN_PAGES = [p for p in TESTED_PAGES if parse_blocks((DOCS / p).read_text(encoding="utf-8"))]


def _mkdocs(site: Path, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    pytest.importorskip("mkdocs")
    pytest.importorskip("material")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site)], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=240, check=False)


def test_the_site_builds_strict(tmp_path: Path) -> None:
    done = _mkdocs(tmp_path / "site")
    assert done.returncode == 0, done.stderr[-4000:]
    for page in ("getting-started", "concepts", "tour", "guides/spark", "reference/http-api", "reference/cli",
                 "reference/configuration", "benchmarks", "architecture"):
        assert (tmp_path / "site" / page / "index.html").is_file(), page
    tour = (tmp_path / "site" / "tour" / "index.html").read_text(encoding="utf-8")
    assert "Five-minute tour" in tour and "spark-tour" in tour  # the README's tour, included whole


def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    """The strict build is not a formality: a copy of the site with one dead link does not build."""
    copy = tmp_path / "repo"
    shutil.copytree(DOCS, copy / "docs")
    for name in ("mkdocs.yml", "README.md"):
        shutil.copy(ROOT / name, copy / name)
    shutil.copytree(ROOT / "broker_api" / "cli", copy / "broker_api" / "cli",
                    ignore=shutil.ignore_patterns("__pycache__"))
    page = copy / "docs" / "concepts.md"
    page.write_text(page.read_text(encoding="utf-8") + "\nSee [nowhere](guides/no-such-page.md).\n")
    broken = _mkdocs(tmp_path / "broken", copy)
    assert broken.returncode != 0 and "no-such-page.md" in broken.stderr, broken.stderr[-3000:]


def test_generated_reference_pages_are_current_and_a_stale_one_is_reported(tmp_path: Path,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """Two runs of the generator's ``main`` (each builds both apps), in this process: ``--check`` on a copy with
    cli.md made stale names cli.md alone (so http-api.md is current), and ``--write`` then restores cli.md to the
    committed page (so it is current too)."""
    shutil.copytree(DOCS / "reference", tmp_path / "reference")
    cli = tmp_path / "reference" / "cli.md"
    cli.write_text(cli.read_text(encoding="utf-8").replace("sparkmq serve", "sparkmq sreve", 1))
    args = ["--write", str(tmp_path / "reference")]
    code = docs_gen.main([*args, "--check"])
    stale = capsys.readouterr().err
    assert code == 1 and "cli.md is stale" in stale, stale
    assert "http-api.md" not in stale, f"docs/reference/http-api.md is stale: run `{REGENERATE}`"
    assert "sparkmq sreve" in cli.read_text(encoding="utf-8")  # --check writes nothing
    assert docs_gen.main(args) == 0
    assert cli.read_text(encoding="utf-8") == (DOCS / "reference" / "cli.md").read_text(encoding="utf-8"), (
        f"docs/reference/cli.md is stale: run `{REGENERATE}`")


def test_reference_pages_cover_every_route_and_command() -> None:
    http = (DOCS / "reference" / "http-api.md").read_text(encoding="utf-8")
    for op in ("`POST /v1/topics/{topic}/messages`", "`GET /v1/topics/{topic}/queues/{queue_id}/messages`",
               "`POST /v1/groups/{group}/pop`", "## NameServer", "`POST /v1/brokers/register`"):
        assert op in http, op
    cli = (DOCS / "reference" / "cli.md").read_text(encoding="utf-8")
    for command in ("sparkmq serve", "sparkmq topic create", "sparkmq consume", "sparkmq bench", "sparkmq table status"):
        assert f"## `{command}`" in cli, command
    assert "--docs" in cli and "--readme" not in cli  # `sparkmq bench --docs` rewrites docs/benchmarks.md


@pytest.mark.parametrize("page", TESTED_PAGES)
def test_every_shell_and_python_block_is_marked(page: str) -> None:
    assert unmarked_blocks((DOCS / page).read_text(encoding="utf-8")) == [], (
        f"docs/{page}: mark each block <!-- tour:shell -->, <!-- tour:terminal -->, <!-- run:python --> "
        "or <!-- norun: why -->")


def test_the_marker_check_finds_an_unmarked_block() -> None:
    page = "x\n\n<!-- norun: an install -->\n```bash\npip install x\n```\n\n```python\nprint(1)\n```\n"
    assert unmarked_blocks(page) == ["print(1)"]
    assert unmarked_blocks("<!-- norun: -->\n```bash\nls\n```\n") == ["ls"]  # a reason is required


def test_getting_started_has_what_a_newcomer_needs() -> None:
    blocks = parse_blocks((DOCS / "getting-started.md").read_text(encoding="utf-8"))
    assert blocks[0].kind == "terminal" and blocks[0].commands[0].text == "sparkmq serve"
    text = "\n".join(c.text for b in blocks for c in b.commands)
    for needle in ("sparkmq topic create", "sparkmq produce", "sparkmq consume", "curl -s -X POST", "wait_ms="):
        assert needle in text, needle


@pytest.mark.parametrize("page", RUN_PAGES)
def test_page_runs_as_pasted(page: str, tmp_path: Path) -> None:
    shutil.copytree(ROOT / "conf", tmp_path / "conf")  # run from the clone's directory
    tour = Tour(tmp_path, dict(zip(TOUR_PORTS, free_ports(len(TOUR_PORTS)))), timeout_s=60.0)
    try:
        for block in parse_blocks((DOCS / page).read_text(encoding="utf-8")):
            assert block.kind != "pyspark", f"docs/{page}: Spark blocks belong in the tour (one Spark run)"
            for command in block.commands:
                if block.kind == "terminal":
                    tour.start_terminal(command)
                else:
                    tour.run_shell(as_shell(command) if block.kind == "python" else command)
    finally:
        tour.close()
        stopped = tour.stop_terminals()
    for text, code, output in stopped:
        if text.strip().startswith("sparkmq serve"):
            assert code == 0, f"`{text}` must exit 0 on Ctrl-C:\n{output[-3000:]}"


@pytest.mark.parametrize("page", [p for p in TESTED_PAGES if python_blocks((DOCS / p).read_text(encoding="utf-8"))])
def test_python_blocks_run_as_pasted(page: str, tmp_path: Path) -> None:
    for i, code in enumerate(python_blocks((DOCS / page).read_text(encoding="utf-8"))):
        work = tmp_path / f"block-{i}"
        work.mkdir()
        done = subprocess.run([sys.executable, "-c", code], cwd=work, capture_output=True, text=True, timeout=120,
                              check=False)
        assert done.returncode == 0, f"docs/{page} block {i}:\n{done.stderr[-3000:]}"
        expected = [line.split("# prints:", 1)[1].strip() for line in code.splitlines() if "# prints:" in line]
        for expect in expected:
            assert find_missing(expect, done.stdout) is None, f"docs/{page} block {i}: {expect!r} not in {done.stdout}"
