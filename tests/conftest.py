"""Fixtures shared by the whole suite.

* ``spark``: one SparkSession (local[2]) for the whole test session, with
  delta-spark's jars (``connectors.spark_view.with_delta``; Ivy caches them
  in ``~/.cache/sparkmq/ivy``); workers run the interpreter that runs the tests.
* ``free_port``: a free TCP port on 127.0.0.1 (from this worker's own range under xdist).

Under pytest-xdist (``-n auto --dist loadgroup`` in pyproject.toml) the tests
that share a SparkSession or a server wider than one test run on one worker,
as one work unit (see ``pytest_collection_modifyitems``).
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests import launcher
from tests.procs import free_port as _free_port
from tests.procs import stop_process
from tests.s3_support import s3_server  # noqa: F401  (fixture: moto's S3 server on loopback)
from tests.work_order import longest_first

# Every JVM the tests start through spark-submit (the shared session, the notebooks' and the
# subprocess sessions): C1 only and the serial collector. Test jobs are small and short, and
# C2's compiler threads were a third of a Spark test's CPU on this 2-core machine.
os.environ.setdefault("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
# ... and every Python process Spark starts (also for sessions that never call streaming.register, and
# notebook kernels' sessions) imports PySpark unpacked, not from pyspark.zip: the sitecustomize that
# streaming.register hands to Spark, on the tests' PYTHONPATH from the start.
_SPARKPATH = str(Path(__file__).resolve().parent.parent / "streaming" / "workerpath")
if _SPARKPATH not in os.environ.get("PYTHONPATH", "").split(os.pathsep):
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [_SPARKPATH, os.environ.get("PYTHONPATH")]))

_MAX_WORKERS = 4  # each worker may hold a SparkSession (a JVM with a 1 GiB heap)


def _share_the_default_tls_context() -> None:
    """``httpx.get()``/``post()`` without a client build a Client whose transport creates an SSL context
    and loads certifi's CA bundle (~20 ms of CPU), even for an http:// URL: the suite's polling loops
    made that nearly half of the test processes' own CPU. The default context (``verify=True``, no
    client certificate) is built once per test process and shared, as one Client would share it; an
    SSLContext is safe to share between connections. Other ``verify``/``cert`` values (the TLS tests'
    own contexts) are built as before."""
    try:
        from httpx._transports import default as transport
    except ImportError:  # another httpx layout: every call builds its own context, only slower
        return
    build = transport.create_ssl_context
    shared: dict[tuple[bool, str | None, str | None], Any] = {}

    def create_ssl_context(verify: Any = True, cert: Any = None, trust_env: bool = True) -> Any:
        if verify is not True or cert is not None:
            return build(verify=verify, cert=cert, trust_env=trust_env)
        key = (trust_env, os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))
        if key not in shared:
            shared[key] = build(verify=verify, cert=cert, trust_env=trust_env)
        return shared[key]

    transport.create_ssl_context = create_ssl_context


_share_the_default_tls_context()


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: one worker more than the cores, 3 to 4, for a run over directories (the README's
    command): the suite waits on brokers, elections and Spark as much as it computes, so a third
    worker on 2 cores fills the waits (13.7 min against 16.7 with 2 on a quiet 2-core machine).
    None when only test files or test ids are named (a quick check of one file needs no workers)."""
    asked = os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS")
    if asked:
        return int(asked)
    if all(Path(arg.split("::")[0]).is_file() for arg in config.args):
        return 0
    return max(3, min(_MAX_WORKERS, (os.cpu_count() or 1) + 1))


def _work_unit(item: pytest.Item) -> str | None:
    """The xdist group of a test that shares something wider than itself: its module for a
    Spark test (each worker opens one SparkSession when it first runs one, so Spark modules
    spread over the workers like any other), else the conftest or module defining a
    module/package/session-scoped server it uses."""
    if "spark" in item.fixturenames:
        return "spark:" + item.nodeid.split("::")[0]
    info = getattr(item, "_fixtureinfo", None)
    for name in item.fixturenames:
        defs = info.name2fixturedefs.get(name) if info is not None else None
        if defs and defs[-1].scope != "function" and defs[-1].baseid:  # plugins' fixtures have no baseid
            return defs[-1].baseid
    return None


def _group_of(item: pytest.Item) -> str:
    marker = item.get_closest_marker("xdist_group")
    if marker is None:
        return item.nodeid
    return str(marker.args[0] if marker.args else marker.kwargs.get("name", "default"))


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False  # the units go out longest first (tests/work_order.py)


@pytest.hookimpl(tryfirst=True)  # before xdist's worker appends "@group" to the node ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("xdist_group") is None and (unit := _work_unit(item)):
            item.add_marker(pytest.mark.xdist_group(unit))
    if hasattr(config, "workerinput"):  # an xdist worker: its collection's order is the order units go out
        longest_first(items, _group_of)


@pytest.fixture
def free_port() -> int:
    return _free_port()


# Spark's own Kafka source and sink, for tests/kafka (the listener speaks Kafka's protocol).
SPARK_KAFKA_PACKAGE = "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0"


def _ivy_dir() -> Path:
    """Ivy's cache for the suite's Spark packages: under the user's cache dir, kept between runs."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "sparkmq" / "ivy"


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """One local[2] session with delta-spark's jars (downloaded by Ivy once per machine)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from connectors.spark_view import with_delta

    warehouse = tmp_path_factory.mktemp("spark-warehouse")  # per xdist worker: its own basetemp
    local_dir = tmp_path_factory.mktemp("spark-local")
    builder = (
        SparkSession.builder.master("local[2]")
        .appName("sparkmq-tests")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.databricks.delta.snapshotPartitions", "2")  # Delta's log replay: 2 tasks, not 50
        .config("spark.ui.enabled", "false")
        .config("spark.sql.warehouse.dir", str(warehouse))
        .config("spark.local.dir", str(local_dir))  # shuffle and block files: not shared with another worker
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.streaming.stopTimeout", "30s")
    )
    ivy = _ivy_dir()
    ivy.mkdir(parents=True, exist_ok=True)
    with open(ivy / ".lock", "w") as lock:  # test runs started together must not download into one cache at once
        fcntl.flock(lock, fcntl.LOCK_EX)
        session = with_delta(builder, ivy_dir=ivy, extra_packages=[SPARK_KAFKA_PACKAGE]).getOrCreate()
    try:
        yield session
    finally:
        session.stop()


# --------------------------------------------------------------------------
# Broker fixtures (issue 3): real `python -m broker_api serve` subprocesses.
# --------------------------------------------------------------------------



_REPO_ROOT = Path(__file__).resolve().parent.parent


class BrokerProcess:
    """A broker subprocess on 127.0.0.1; ``restart()`` keeps port and data dir."""

    def __init__(self, data_dir: Path, port: int, env: dict[str, str], log_path: Path) -> None:
        self.data_dir = data_dir
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.log_path = log_path
        self._env = env
        self.proc: subprocess.Popen[bytes] | launcher.Forked | None = None

    def start(self, timeout_s: float = 60.0) -> BrokerProcess:
        args = ["serve", "--host", "127.0.0.1", "--port", str(self.port), "--data-dir", str(self.data_dir)]
        self.proc = launcher.spawn(args, self._env, self.log_path)
        self._wait_ready(timeout_s)
        return self

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                if httpx.get(self.url + "/readyz", timeout=1.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"broker not ready after {timeout_s}s:\n{self.log_tail()}")

    def log_tail(self, n: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except OSError:
            return ""

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout_s: float = 30.0) -> int | None:
        """SIGTERM and wait (SIGKILL if it does not exit in time); returns the exit code."""
        return stop_process(self.proc, timeout_s)

    def kill(self) -> None:
        """SIGKILL: no shutdown hooks run (a crash)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def restart(self, timeout_s: float = 60.0) -> BrokerProcess:
        self.stop()
        return self.start(timeout_s)


# Test machines are shared and slow at times: fast failure is tested on
# purpose (tests/broker_api/test_ops.py sets its own limits); everywhere else
# a slow moment must not turn a produce into a 503.
_TEST_BROKER_ENV = {
    "SPARKMQ_FAST_FAILURE__MAX_QUEUE_WAIT_MS": "10000",
    "SPARKMQ_FAST_FAILURE__BUSY_PUT_MS": "10000",
}


@pytest.fixture
def broker_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., BrokerProcess]]:
    """``start(data_dir=None, env=None) -> BrokerProcess``; every broker is stopped at teardown."""
    started: list[BrokerProcess] = []

    def start(data_dir: Path | None = None, env: dict[str, str] | None = None) -> BrokerProcess:
        base = tmp_path_factory.mktemp("broker")
        data = Path(data_dir) if data_dir is not None else base / "data"
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("SPARKMQ_")}
        full_env.update(_TEST_BROKER_ENV)
        full_env.update(env or {})
        proc = BrokerProcess(data, _free_port(), full_env, base / "broker.log")
        started.append(proc)
        return proc.start()

    yield start
    for proc in started:
        proc.stop()


@pytest.fixture
def broker(broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    """A default broker on a free port with its own data dir."""
    return broker_factory()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    launcher.close()  # the process that forks brokers for this test process (tests/launcher.py)
