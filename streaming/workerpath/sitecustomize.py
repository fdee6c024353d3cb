"""Python processes Spark starts for ``format("sparkmq")`` import PySpark's bytecode, not pyspark.zip.

Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` first on the ``PYTHONPATH`` of every Python
process it starts: the data source's planner and commit runners, their daemons and the task
workers. That zip holds no bytecode, so each process compiles the PySpark modules it imports
again (about 1.1 s more CPU than the installed package, several seconds of wall time on a busy
machine), and the first micro-batch of a Python sink waits for three or four such processes.

:func:`streaming.register` puts this directory on the ``PYTHONPATH`` Spark gives those processes
(``SparkContext.environment``). Python runs this file at start-up, before any of PySpark is
imported, and drops the zip when it lies inside a pip-installed PySpark (``<site-packages>/
pyspark/python/lib/pyspark.zip``): the same modules then load from that package, with their
``__pycache__``. A zip from a Spark distribution (``/opt/spark/python/lib``) is kept.

Only the first ``sitecustomize`` on ``sys.path`` runs, so this one then runs the next one on
the path (a distribution's or a virtualenv's), if there is one.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys


def _inside_installed_pyspark(entry: str) -> bool:
    """``entry`` is ``<pyspark>/python/lib/pyspark.zip`` of an unpacked (pip-installed) pyspark."""
    if os.path.basename(entry) != "pyspark.zip":
        return False
    package = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(entry))))
    return os.path.isfile(os.path.join(package, "__init__.py"))


def _run_next_sitecustomize() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [e for e in sys.path if os.path.abspath(e or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None or spec.origin == os.path.abspath(__file__):
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


sys.path[:] = [entry for entry in sys.path if not _inside_installed_pyspark(entry)]
_run_next_sitecustomize()
