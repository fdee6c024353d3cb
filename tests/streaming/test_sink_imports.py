"""The sink's Python processes load only what they need (issue 34: the sink's cold first batch).

Spark unpickles the sink in several fresh Python processes (the write planner, every executor
worker, the commit runner); each imports ``streaming.writer`` or ``streaming.source``. None may
pull in the reader side or ``pyarrow.compute`` (together ~0.1 s of CPU per process here), and
the planner and commit runner, which only parse options and commit over HTTP, load neither
pyarrow (with numpy, ~0.2 s) nor the task's sending code: an executor task imports those when
it starts writing. Spark puts its ``pyspark.zip`` first on those processes' path;
``streaming.register`` makes them import an installed PySpark's bytecode instead.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
READER_SIDE = ("streaming.reader", "streaming.pull", "streaming.schema", "streaming.brokers", "pyarrow.compute")
TASK_SIDE = ("pyarrow", "numpy", "streaming.sending", "streaming.routing")


def _loaded_after(module: str, then: str = "pass") -> set[str]:
    code = f"import sys, json; import {module}; {then}; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return set(json.loads(out.stdout))


@pytest.mark.parametrize("module", ["streaming.writer", "streaming.source"])
def test_unpickling_the_sink_imports_no_reader_side(module: str) -> None:
    loaded = _loaded_after(module)
    assert "streaming.writer" in loaded and "streaming.sink_commit" in loaded
    assert loaded.isdisjoint(READER_SIDE + TASK_SIDE), sorted(loaded & set(READER_SIDE + TASK_SIDE))
    assert "streaming.client" not in loaded and "http.client" not in loaded  # the planner sends nothing


def test_the_commit_runner_loads_no_arrow() -> None:
    """What the commit runner does: unpickle the tasks' messages, group them per broker."""
    then = ("import pickle; from streaming.sink_commit import SinkCommitMessage, per_broker; "
            "from streaming.options import parse_writer; "
            "m = pickle.loads(pickle.dumps(SinkCommitMessage(['t1'], 3))); "
            "opts = parse_writer({'endpoint': 'http://127.0.0.1:1', 'topic': 't'}); "
            "assert per_broker(opts, [m, None])[0][2] == ['t1']; "
            "from streaming.client import BrokerClient; BrokerClient(opts.client).close()")
    loaded = _loaded_after("streaming.writer", then)
    assert loaded.isdisjoint(READER_SIDE + TASK_SIDE), sorted(loaded & set(READER_SIDE + TASK_SIDE))


def test_an_executor_task_loads_the_sending_code() -> None:
    loaded = _loaded_after("streaming.writer", "from streaming.writer import _write_task; "
                           "import streaming.sending")
    assert {"pyarrow", "streaming.sending"} <= loaded
    assert loaded.isdisjoint(READER_SIDE), sorted(loaded & set(READER_SIDE))


def test_the_package_names_still_load_on_first_use() -> None:
    code = ("import streaming; print(streaming.SparkMQDataSource.name(), streaming.ARROW_SCHEMA.names[1], "
            "streaming.OptionError.__name__, callable(streaming.register), callable(streaming.lag))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == ["sparkmq", "value", "OptionError", "True", "True"]


# -- the processes Spark starts import an installed PySpark, not its pyspark.zip -----------------

def _spark_like_path(*after: str) -> str:
    """The PYTHONPATH Spark gives a Python process: the zips first, then the function's entries."""
    import pyspark

    lib = Path(pyspark.__file__).parent / "python" / "lib"
    zips = [str(lib / "pyspark.zip"), *map(str, lib.glob("py4j-*-src.zip"))]
    return os.pathsep.join([*zips, *after, str(ROOT)])


def _run(code: str, pythonpath: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PYTHONPATH": pythonpath}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         check=True, env=env)
    return out.stdout


def test_spark_processes_import_the_installed_pyspark() -> None:
    from streaming.source import WORKER_PATH

    code = "import pyspark.daemon, pyspark, sys; print(pyspark.__file__); print(any('.zip' in p for p in sys.path))"
    with_path = _run(code, _spark_like_path(WORKER_PATH)).split()
    assert ".zip" not in with_path[0] and with_path[0].endswith("__init__.py")
    assert with_path[1] == "True"  # py4j's zip stays
    without = _run(code, _spark_like_path()).split()
    assert "pyspark.zip" in without[0]  # what Spark does on its own


def test_the_next_sitecustomize_still_runs(tmp_path: Path) -> None:
    from streaming.source import WORKER_PATH

    (tmp_path / "sitecustomize.py").write_text("import builtins\nbuiltins.OTHER_SITE = 'ran'\n")
    out = _run("import builtins; print(getattr(builtins, 'OTHER_SITE', 'missing'))",
               _spark_like_path(WORKER_PATH, str(tmp_path)))
    assert out.split() == ["ran"]


def test_a_spark_distributions_zip_is_kept(tmp_path: Path) -> None:
    from streaming.source import WORKER_PATH

    lib = tmp_path / "spark" / "python" / "lib"
    lib.mkdir(parents=True)
    zipfile.ZipFile(lib / "pyspark.zip", "w").close()
    out = _run("import sys; print(any(p.endswith('pyspark.zip') for p in sys.path))",
               os.pathsep.join([str(lib / "pyspark.zip"), WORKER_PATH]))
    assert out.split() == ["True"]


class _Session:
    def __init__(self, environment: dict[str, str] | None) -> None:
        self.registered: list[type] = []
        self._environment = environment
        self.dataSource = SimpleNamespace(register=self.registered.append)

    @property
    def sparkContext(self) -> Any:
        if self._environment is None:
            raise NotImplementedError("Spark Connect has no SparkContext")  # PySparkNotImplementedError
        return SimpleNamespace(environment=self._environment)


def test_register_puts_the_worker_path_first_once() -> None:
    import streaming
    from streaming.source import WORKER_PATH

    session = _Session({"PYTHONPATH": "/opt/mine", "PYTHONHASHSEED": "0"})
    streaming.register(session)
    streaming.register(session)
    assert session._environment == {"PYTHONPATH": os.pathsep.join([WORKER_PATH, "/opt/mine"]),
                                    "PYTHONHASHSEED": "0"}
    assert session.registered == [streaming.SparkMQDataSource] * 2
    off = _Session({})
    streaming.register(off, installed_pyspark=False)
    assert off._environment == {} and off.registered == [streaming.SparkMQDataSource]
    connect = _Session(None)
    streaming.register(connect)
    assert connect.registered == [streaming.SparkMQDataSource]
