"""The notebooks are valid nbformat 4 and every code cell compiles."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks() -> None:
    assert {p.name for p in NOTEBOOKS} >= {"quickstart.ipynb", "operations.ipynb"}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_code_cells_compile(path: Path) -> None:
    nb = json.loads(path.read_text())
    assert nb["nbformat"] == 4
    cells = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert cells, f"{path.name} has no code"
    for i, cell in enumerate(cells):
        compile("".join(cell["source"]), f"{path.name}[{i}]", "exec")
