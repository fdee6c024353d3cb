"""The package layout's rules: one-way dependencies, no import cycles, small modules.

``broker_api -> connectors -> store``; ``streaming`` talks HTTP only; the
Python client and the CLI load without FastAPI.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("store", "connectors", "broker_api", "streaming")
FORBIDDEN = {
    "store": ("broker_api", "connectors", "streaming"),
    "connectors": ("broker_api", "streaming"),
    "streaming": ("broker_api", "store", "connectors"),
}
MAX_LINES = 400


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def _named_imports(name: str, path: Path, nodes: Iterable[ast.AST]) -> set[str]:
    """The modules (and ``module.name`` pairs) the import statements among ``nodes`` name, made absolute."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            targets.add(module)
            targets.update(f"{module}.{alias.name}" for alias in node.names)
    return targets


def _top_level_imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """Modules ``name`` imports when it loads (not inside functions or TYPE_CHECKING)."""
    targets = _named_imports(name, path, ast.parse(path.read_text(), str(path)).body)
    # importing a.b.c loads packages a and a.b first (those that are not our own ancestors)
    ancestors = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
    for target in list(targets):
        parts = target.split(".")
        targets.update(".".join(parts[:i]) for i in range(1, len(parts)))
    return {t for t in targets if t in known and t != name and t not in ancestors}


def test_dependencies_point_one_way() -> None:
    known = _modules()
    wrong = []
    for name, path in known.items():
        owner = name.split(".")[0]
        for target in _top_level_imports(name, path, known):
            if target.split(".")[0] in FORBIDDEN.get(owner, ()):
                wrong.append(f"{name} imports {target}")
        text = path.read_text()
        for other in FORBIDDEN.get(owner, ()):  # lazy imports count too
            if f"import {other}" in text or f"from {other}" in text:
                wrong.append(f"{name} mentions an import of {other}")
    assert wrong == []


def test_no_import_cycles() -> None:
    known = _modules()
    graph = {name: _top_level_imports(name, path, known) for name, path in known.items()}
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(trail[trail.index(nxt):] + [nxt] if nxt in trail else [node, nxt])
            elif nxt not in state:
                visit(nxt, trail + [nxt])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert cycles == []


def test_modules_stay_small() -> None:
    big = {name: n for name, path in _modules().items() if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert big == {}


@pytest.mark.parametrize("module", ["broker_api.client", "broker_api.cli", "broker_api.namesrv"])
def test_client_and_cli_load_without_fastapi(module: str) -> None:
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('fastapi', 'starlette', 'uvicorn'):\n"
        "            raise ImportError('blocked ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        f"import {module}\n"
        "from broker_api.client import SparkMQClient\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


HEAVY_FOR_THE_CLI = ("numpy", "pyarrow", "fastapi", "uvicorn", "httpx", "pydantic", "pydantic_settings")


def test_cli_loads_no_heavy_library() -> None:
    """Issue 33: the CLI starts fast; its command modules load numpy, pyarrow, httpx, settings... when a command runs.

    A regression test, not a timing test: ``sparkmq --help`` loaded all of these once (about 1.4 s of CPU).
    """
    code = f"import broker_api.cli, sys; print(sorted(m for m in {HEAVY_FOR_THE_CLI!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


ROOT_MODULES_MAX = 12


def _room(module: str) -> str:
    """``broker_api.model.pop`` -> ``broker_api.model``; a module at the root is a room of its own."""
    parts = module.split(".")
    return ".".join(parts[:2])


def _all_imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """Every module ``name`` imports, at load time or inside a function."""
    found = _named_imports(name, path, ast.walk(ast.parse(path.read_text(), str(path))))
    return {t for t in found if t in known and t != name}


def test_broker_root_keeps_only_the_wiring() -> None:
    root = sorted(p.name for p in (ROOT / "broker_api").glob("*.py"))
    assert len(root) <= ROOT_MODULES_MAX, root


def test_broker_rooms_import_one_way() -> None:
    """No room of broker_api imports a room that imports it back, lazily or not."""
    known = {n: p for n, p in _modules().items() if n.startswith("broker_api.")}
    edges: dict[str, set[str]] = {}
    for name, path in known.items():
        for target in _all_imports(name, path, known):
            a, b = _room(name), _room(target)
            if a != b:
                edges.setdefault(a, set()).add(b)

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), [start]
        while todo:
            node = todo.pop()
            if node == goal:
                return True
            if node not in seen:
                seen.add(node)
                todo.extend(edges.get(node, ()))
        return False

    back = sorted(f"{a} -> {b}" for a, targets in edges.items() for b in targets if reaches(b, a))
    assert back == []


def _architecture_map() -> list[str]:
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text.split("## The broker's rooms", 1)[1]
    return section.split("```", 2)[1].splitlines()


def test_architecture_page_names_every_room_and_module() -> None:
    lines = _architecture_map()
    words = {word.strip(",;:()`") for line in lines for word in line.split()}
    named = {word for word in words if word.endswith(".py")}
    dirs = {line.split()[0] for line in lines if line.strip() and line.split()[0].endswith("/")}
    modules = {p.name for p in (ROOT / "broker_api").rglob("*.py") if p.name != "__init__.py"}
    assert modules - named == set()
    assert named - modules == set()
    rooms = {p.parent.name + "/" for p in (ROOT / "broker_api").rglob("__init__.py")}
    assert rooms ^ dirs == set()
