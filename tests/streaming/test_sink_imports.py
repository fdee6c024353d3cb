"""The sink's Python workers load the writer side only (issue 34: the sink's cold first batch).

Spark unpickles the sink in several fresh Python processes (the write planner, every executor
worker, the commit runner); each imports ``streaming.writer`` or ``streaming.source``. Neither may
pull in the reader side or ``pyarrow.compute`` (together ~0.1 s of CPU per process here).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

READER_SIDE = ("streaming.reader", "streaming.pull", "streaming.schema", "streaming.brokers", "pyarrow.compute")


def _loaded_after(module: str) -> set[str]:
    code = f"import sys, json; import {module}; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return set(json.loads(out.stdout))


@pytest.mark.parametrize("module", ["streaming.writer", "streaming.source"])
def test_unpickling_the_sink_imports_no_reader_side(module: str) -> None:
    loaded = _loaded_after(module)
    assert "streaming.writer" in loaded and "streaming.sending" in loaded
    assert loaded.isdisjoint(READER_SIDE), sorted(loaded & set(READER_SIDE))


def test_the_package_names_still_load_on_first_use() -> None:
    code = ("import streaming; print(streaming.SparkMQDataSource.name(), streaming.ARROW_SCHEMA.names[1], "
            "streaming.OptionError.__name__, callable(streaming.register), callable(streaming.lag))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == ["sparkmq", "value", "OptionError", "True", "True"]
