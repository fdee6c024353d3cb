"""What a newcomer tripped over outside the consoles (issue 33; the consoles' are in tests/console/)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _help(*args: str) -> str:
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    done = subprocess.run([sys.executable, "-m", "broker_api", *args, "--help"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_help_shows_bracketed_words_instead_of_eating_them_as_markup() -> None:
    assert "NameServers with [auth] enabled" in _help()
    assert "with  enabled" not in _help()


def test_a_virtual_environment_in_the_clone_is_ignored() -> None:
    done = subprocess.run(["git", "check-ignore", "-q", ".venv/bin/python"], cwd=ROOT, timeout=30, check=False)
    assert done.returncode == 0, ".venv/ (the README's virtual environment) is not in .gitignore"


def test_notebook_01_names_the_extra_the_readme_names() -> None:
    cells = json.loads((ROOT / "notebooks" / "01_quickstart.ipynb").read_text(encoding="utf-8"))["cells"]
    text = "".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    assert "python -m pip install -e '.[notebooks]'" in text and ".[spark]" not in text
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "'.[notebooks]'" in readme
