"""The notebooks run top to bottom, and are stored without outputs.

Each notebook is copied to ``tmp_path`` and executed there with nbclient on
the ``python3`` kernel (the interpreter running the tests). Notebooks start
their own broker and SparkSession and write only to a temporary directory
(``TMPDIR`` points into a scratch directory); a cell error fails the test with
that cell's source and traceback.

The three notebooks run one after another in one kernel, as a user working
through them in one Jupyter session would: before each, the kernel's
namespace is emptied (``%reset -f``) and its working directory moved to the
notebook's, and each notebook's ``spark.stop()`` ends its SparkContext, so the
next builds its own session (in the same Spark JVM, which is what saves the
time: one JVM start instead of three).
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import signal
import sys
import time
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path
from collections.abc import Iterator
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient
from jupyter_client.manager import KernelManager
from nbclient.exceptions import CellExecutionError

NOTEBOOK_DIR = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
EXPECTED = {"01_quickstart.ipynb", "02_streaming_pipeline.ipynb", "03_operations.ipynb"}
CELL_TIMEOUT_S = 300
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# Notebooks that must plot (a cell calling plt.show() that renders an image/png).
PLOTTING = {"02_streaming_pipeline.ipynb"}


def test_the_expected_notebooks_exist() -> None:
    assert {p.name for p in NOTEBOOKS} == EXPECTED


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_stored_notebook_has_no_outputs(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code, f"{path.name} has no code cells"
    dirty = [i for i, c in enumerate(code) if c.outputs or c.execution_count is not None]
    assert not dirty, f"{path.name}: code cells {dirty} have stored outputs or execution counts; clear them"


def _imported_modules(path: Path) -> set[str]:
    """Top-level names of the modules a notebook's code cells import (absolute imports)."""
    nb = nbformat.read(path, as_version=4)
    found: set[str] = set()
    for cell in (c for c in nb.cells if c.cell_type == "code"):
        source = "\n".join(line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!")))
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                found |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return found


def _requirement_names(requirements: list[str]) -> set[str]:
    return {re.split(r"[\s\[<>=!~;]", r, maxsplit=1)[0].lower().replace("_", "-") for r in requirements}


def test_the_notebooks_extra_installs_what_the_notebooks_import() -> None:
    """`pip install -e '.[notebooks]'` brings every package the notebooks import, a kernel and Jupyter."""
    project = tomllib.loads((NOTEBOOK_DIR.parent / "pyproject.toml").read_text())["project"]
    offered = _requirement_names(project["dependencies"] + project["optional-dependencies"]["notebooks"])
    ours = {"sparkmq"}
    owners = packages_distributions()
    needed: dict[str, str] = {}
    for path in NOTEBOOKS:
        for module in _imported_modules(path) - set(sys.stdlib_module_names):
            for dist in owners.get(module, [module]):
                needed[dist.lower().replace("_", "-")] = f"{path.name} imports {module}"
    missing = {dist: why for dist, why in needed.items() if dist not in offered | ours}
    assert not missing, f"the notebooks extra in pyproject.toml lacks: {missing}"
    assert {"pyspark", "matplotlib"} <= set(needed), needed  # the check saw the notebooks' real imports
    assert {"ipykernel", "jupyterlab", "nbclient"} <= offered  # a kernel, a front end, `jupyter execute`


def _kernel_env(tmp: Path) -> dict[str, str]:
    """The test's environment, minus broker settings and plot backends that would change the run."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARKMQ_")}
    env.pop("MPLBACKEND", None)  # let ipykernel use its inline backend, so plots become image/png
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    env["TMPDIR"] = str(tmp)
    return env


_SPARK_JVM = "org.apache.spark.deploy.SparkSubmit"  # the kernel's Spark JVM (py4j gateway), shared by the notebooks


def _processes_mentioning(tmp: Path, spare_spark_jvm: bool = False) -> dict[int, str]:
    """pid -> command line of the processes with ``tmp`` on their command line."""
    found = {}
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if spare_spark_jvm and _SPARK_JVM in cmdline:
            continue
        if str(tmp) in cmdline and int(proc.name) != os.getpid():
            found[int(proc.name)] = cmdline
    return found


def _stop_leftovers(tmp: Path, grace_s: float = 30.0, spare_spark_jvm: bool = False) -> list[str]:
    """Processes a run left behind (a broker after a failed cell), SIGTERMed after ``grace_s``.

    Spark's JVM carries the scratch directory on its command line and exits on
    its own shortly after the kernel does, hence the grace period; while the
    kernel runs, ``spare_spark_jvm`` leaves it out.
    """
    deadline = time.monotonic() + grace_s
    while (left := _processes_mentioning(tmp, spare_spark_jvm)) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in left:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    return [f"{pid}: {cmd[:200]}" for pid, cmd in left.items()]


def _plot_cells_without_png(nb: Any) -> tuple[int, list[int]]:
    """(cells calling plt.show(), indexes of those without an image/png output)."""
    plots = [(i, c) for i, c in enumerate(nb.cells) if c.cell_type == "code" and "plt.show()" in c.source]
    missing = [i for i, c in plots if not any("image/png" in o.get("data", {}) for o in c.outputs)]
    return len(plots), missing


class _Kernel:
    """One ``python3`` kernel for the module's notebooks, with TMPDIR in ``scratch``."""

    def __init__(self, scratch: Path) -> None:
        self.scratch = scratch
        self.km = KernelManager(kernel_name="python3")
        self.km.start_kernel(env=_kernel_env(scratch), cwd=str(scratch))

    def run(self, nb: Any, run_dir: Path) -> None:
        """Empty the namespace, move to ``run_dir``, then run ``nb`` top to bottom."""
        fresh = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
            f"get_ipython().run_line_magic('reset', '-f')\nimport os\nos.chdir({str(run_dir)!r})\ndel os")])
        NotebookClient(fresh, timeout=60, km=self.km).execute()
        NotebookClient(nb, timeout=CELL_TIMEOUT_S, km=self.km).execute()

    def stop(self) -> list[str]:
        self.km.shutdown_kernel(now=False)
        return _stop_leftovers(self.scratch)


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Kernel]:
    shared = _Kernel(tmp_path_factory.mktemp("notebook-scratch"))
    yield shared
    leftovers = shared.stop()
    assert not leftovers, f"the notebooks' kernel left processes running: {leftovers}"


@pytest.mark.spark
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs_top_to_bottom(path: Path, tmp_path: Path, kernel: _Kernel) -> None:
    run_dir, scratch = tmp_path / "run", kernel.scratch
    run_dir.mkdir()
    copy = run_dir / path.name
    shutil.copyfile(path, copy)
    nb = nbformat.read(copy, as_version=4)
    try:
        kernel.run(nb, run_dir)
    except CellExecutionError as exc:
        pytest.fail(f"{path.name} failed:\n{_ANSI.sub('', str(exc))}", pytrace=False)
    finally:
        leftovers = _stop_leftovers(scratch, spare_spark_jvm=True)
        nbformat.write(nb, tmp_path / f"executed-{path.name}")
    assert not leftovers, f"{path.name} left processes running: {leftovers}"
    assert sorted(p.name for p in run_dir.iterdir()) == [path.name], "the notebook wrote into its working directory"
    left = [p.name for p in scratch.glob("sparkmq-*")]
    assert not left, f"the notebook did not remove its temporary directory: {left}"
    plots, missing = _plot_cells_without_png(nb)
    assert not missing, f"{path.name}: plot cells {missing} produced no image/png output"
    if path.name in PLOTTING:
        assert plots, f"{path.name} has no plot cell (plt.show())"
