"""The README's five-minute tour works when pasted, command by command."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .tour import TOUR_PORTS, Tour, free_ports, parse_tour, find_missing, python_blocks

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_tour_covers_what_the_issue_asks_for() -> None:
    blocks = parse_tour(README)
    kinds = [b.kind for b in blocks]
    text = "\n".join(c.text for b in blocks for c in b.commands)
    assert kinds[0] == "terminal" and "sparkmq serve" in blocks[0].commands[0].text
    for needle in ("curl -s -X POST localhost:8080/v1/topics", "wait_ms=", "sparkmq consume orders --group tail --follow",
                   'readStream.format("sparkmq")', 'writeStream.format("sparkmq")', "spark.sql(", "sparkmq sql",
                   "?key=order-1", "sparkmq groups", "/metrics", "sparkmq namesrv", "--namesrv 127.0.0.1:9876"):
        assert needle in text, needle
    assert "pyspark" in kinds
    assert all(c.expect for b in blocks if b.kind == "terminal" for c in b.commands)
    assert "python -m pip install -e '.[spark]'" in README[:README.index("<!-- section:tour -->")]
    assert "exits 130" in README[README.index("<!-- section:tour -->"):README.index("<!-- /section:tour -->")]


def test_expectations_match_in_order_only() -> None:
    assert find_missing('{"a":1,...,"c":3}', '{"a":1,"b":2,"c":3}') is None
    assert find_missing("orders ... 3", "3 orders") == "3"
    assert find_missing("x", "") == "x"


@pytest.mark.spark
def test_readme_tour_runs_as_pasted(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "conf", tmp_path / "conf")  # the clone's directory, as the tour says
    tour = Tour(tmp_path, dict(zip(TOUR_PORTS, free_ports(len(TOUR_PORTS)))))
    stopped: list[tuple[str, int | None, str]] = []
    shell_outputs: list[tuple[str, str]] = []
    try:
        for block in parse_tour(README):
            for command in block.commands:
                if block.kind == "terminal":
                    tour.start_terminal(command)
                elif block.kind == "shell":
                    shell_outputs.append((command.text, tour.run_shell(command)))
                else:
                    tour.run_pyspark(command)
    finally:
        tour.close()
        stopped = tour.stop_terminals()
    serve = [s for s in stopped if s[0].strip() == "sparkmq serve"]
    assert serve and serve[0][1] == 0, f"the broker must exit 0 on Ctrl-C:\n{serve[0][2][-3000:] if serve else ''}"
    # The follower saw what was produced after it started (step 7's message), not only the backlog,
    # and, as the tour says, stops on Ctrl-C with its count and exit status 130.
    follow = [s for s in stopped if "--follow" in s[0]]
    assert follow and '{"id": 4, "amount": 12}' in follow[0][2], follow[0][2] if follow else "no follower"
    assert follow[0][1] == 130 and "message(s); interrupted" in follow[0][2], (follow[0][1], follow[0][2][-3000:])
    # The tour says curl's answers end without a newline: each plain curl printed JSON and no newline.
    answers = [(t, out) for t, out in shell_outputs if t.startswith("curl -s") and "|" not in t and "&" not in t]
    assert len(answers) >= 5
    for text, out in answers:
        assert "{" in out and out.endswith("}"), f"`{text}` printed {out[-200:]!r}"  # (& jobs may print first)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_readme_links_point_at_headings_and_files_that_exist() -> None:
    body = re.sub(r"```.*?```", "", README, flags=re.S)  # code blocks hold no headings or links
    anchors = {_slug(m) for m in re.findall(r"^#+ (.+)$", body, flags=re.M)}
    targets = re.findall(r"\]\(#([^)]+)\)", body)
    assert len(targets) >= 5
    for target in targets:
        assert target in anchors, f"README link #{target} has no heading"
    pages = re.findall(r"\]\((docs/[\w./-]+\.md)(?:#[^)]*)?\)", body)
    assert len(pages) >= 10  # where each kind of user goes next
    for page in pages:
        assert (ROOT / page).is_file(), f"README links {page}, which does not exist"
    for path in re.findall(r"`((?:notebooks|benchmarks|tests|conf)/[\w./-]+\.(?:ipynb|py|toml))`", README):
        assert (ROOT / path).exists(), f"README names {path}, which does not exist"


def test_readme_is_short_and_points_nowhere_outside_the_clone() -> None:
    assert len(README.splitlines()) <= 300
    assert "python -m pip install -e '.[test]' && python -m pytest -q" in README  # .ci/run runs it
    assert "python -m pip install -e . && sparkmq serve" in README
    for gone in ("../shared", "seeds/", "load average", "What changed", "Left to do", "before and after"):
        assert gone not in README, gone
    tour = README[README.index("<!-- section:tour -->"):README.index("<!-- /section:tour -->")]
    assert "](" not in tour.replace("](#", "")  # the site includes the tour: no README-relative links in it


def test_the_store_example_runs_as_pasted(tmp_path: Path) -> None:
    """The embeddable-store example of the concepts page, run verbatim in a fresh directory."""
    (code,) = python_blocks((ROOT / "docs" / "concepts.md").read_text())
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert "FOUND" in done.stdout  # print(page.status, ...) shows the message was read back
    assert (tmp_path / "data" / "store" / "commitlog").is_dir()
