"""Python processes Spark starts for the tests import PySpark from the installed package.

Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` first on the ``PYTHONPATH`` of every Python
process it starts (task workers, the data source's planner, commit and streaming runners).  A
pip-installed PySpark is that same zip unpacked one directory up, with bytecode caches; read from
the zip, each process compiles PySpark again (about a second of CPU, on every streaming query).
``tests/conftest.py`` puts this directory on ``PYTHONPATH``; Python runs this file at start-up and
drops the zip when the package it came from is installed, so the same modules load from there.
"""

import sys
from pathlib import Path


def _unpacked(entry: str) -> bool:
    path = Path(entry)
    return path.name == "pyspark.zip" and (path.parents[2] / "__init__.py").is_file()


sys.path[:] = [entry for entry in sys.path if not _unpacked(entry)]
