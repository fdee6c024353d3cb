"""A real Apache Kafka broker for the Kafka benchmark: jars from Maven Central, KRaft, one node.

    libs = ensure_kafka_jars(cache_dir())          # mvn dependency:copy-dependencies, once per machine
    ensure_confluent_kafka()                       # pip install confluent-kafka if it is missing
    with KafkaBroker(libs, workdir) as kafka:      # 127.0.0.1, free ports, data in workdir
        kafka.create_topic("bench", 4)
        kafka.bootstrap                            # "127.0.0.1:PORT"

The jars (``kafka_2.13`` and ``kafka-tools`` at :data:`KAFKA_VERSION`, with a
log4j2 binding for slf4j 1.7, which Kafka pins) go to
``~/.cache/sparkmq-bench/kafka-<version>/libs``; Maven's own repository for
them is ``~/.cache/sparkmq-bench/m2``, never ``~/.m2``, because Spark's Ivy
resolution looks in ``~/.m2`` first and trips over entries with a pom and no jar.
This module is for benchmarks only; no test depends on it.
"""

from __future__ import annotations

import importlib
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import Self

__all__ = ["KAFKA_VERSION", "SPARK_KAFKA_PACKAGE", "KafkaBroker", "KafkaPeerError", "cache_dir",
           "ensure_confluent_kafka", "ensure_kafka_jars"]

KAFKA_VERSION = "4.1.1"
LOG4J_VERSION = "2.24.3"
SPARK_KAFKA_PACKAGE = "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0"

_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>sparkmq.bench</groupId><artifactId>kafka-peer</artifactId><version>1</version>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>{kafka}</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-tools</artifactId><version>{kafka}</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId><version>{log4j}</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-core</artifactId><version>{log4j}</version></dependency>
  </dependencies>
</project>
"""

_LOG4J2 = """<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="WARN">
  <Appenders>
    <File name="file" fileName="{log}"><PatternLayout pattern="%d %p %c{{1}}: %m%n"/></File>
  </Appenders>
  <Loggers><Root level="INFO"><AppenderRef ref="file"/></Root></Loggers>
</Configuration>
"""

_SERVER = """process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:{controller}
listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}
advertised.listeners=PLAINTEXT://127.0.0.1:{port}
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
log.dirs={logs}
num.partitions=4
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=false
"""


class KafkaPeerError(RuntimeError):
    """Raised when the Kafka peer cannot be set up: Maven, pip or the broker failed; the message says which."""


def cache_dir() -> Path:
    """Where the benchmark keeps what it downloads: ``~/.cache/sparkmq-bench``."""
    return Path.home() / ".cache" / "sparkmq-bench"


def ensure_kafka_jars(cache: Path, timeout_s: float = 900) -> Path:
    """The directory of Kafka's runtime jars, fetched with Maven on the first call (about 20 s, 54 MB)."""
    home = cache / f"kafka-{KAFKA_VERSION}"
    libs, done = home / "libs", home / "libs.complete"
    if done.exists():
        return libs
    if shutil.which("mvn") is None:
        raise KafkaPeerError("the Kafka benchmark needs Maven to fetch Kafka's jars; install it "
                             "(apt-get install -y maven) or skip this benchmark")
    home.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(libs, ignore_errors=True)
    (home / "pom.xml").write_text(_POM.format(kafka=KAFKA_VERSION, log4j=LOG4J_VERSION))
    cmd = ["mvn", "-B", "-q", f"-Dmaven.repo.local={cache / 'm2'}", "dependency:copy-dependencies",
           f"-DoutputDirectory={libs}", "-DincludeScope=runtime"]
    out = subprocess.run(cmd, cwd=home, capture_output=True, text=True, timeout=timeout_s, check=False)
    if out.returncode != 0 or not list(libs.glob("kafka_2.13-*.jar")):
        raise KafkaPeerError(f"mvn could not fetch Kafka {KAFKA_VERSION} from Maven Central "
                             f"(exit {out.returncode}): {(out.stdout + out.stderr)[-800:]}")
    done.write_text(KAFKA_VERSION + "\n")
    return libs


def ensure_confluent_kafka() -> None:
    """Import confluent-kafka, installing it with pip first if it is missing."""
    try:
        importlib.import_module("confluent_kafka")
        return
    except ImportError:
        pass
    out = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "confluent-kafka"],
                         capture_output=True, text=True, timeout=600, check=False)
    if out.returncode != 0:
        raise KafkaPeerError(f"pip install confluent-kafka failed: {out.stderr[-800:]}")
    importlib.invalidate_caches()
    importlib.import_module("confluent_kafka")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class KafkaBroker:
    """One Kafka node (broker and KRaft controller) on 127.0.0.1, its data and log in ``workdir``."""

    def __init__(self, libs: Path, workdir: Path, heap: str = "1g") -> None:
        self.libs, self.workdir, self.heap = libs, workdir, heap
        self.port, self.controller_port = _free_port(), _free_port()
        self.log = workdir / "kafka.log"
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _java(self, *args: str, heap: tuple[str, ...] = ("-Xmx256m",)) -> list[str]:
        return ["java", *heap, f"-Dlog4j2.configurationFile={self.workdir / 'log4j2.xml'}",
                "-cp", f"{self.libs}/*", *args]

    def _format_storage(self, props: Path) -> None:
        uuid = subprocess.run(self._java("kafka.tools.StorageTool", "random-uuid"), capture_output=True,
                              text=True, timeout=120, check=True).stdout.strip().splitlines()[-1]
        out = subprocess.run(self._java("kafka.tools.StorageTool", "format", "-t", uuid, "-c", str(props)),
                             capture_output=True, text=True, timeout=120, check=False)
        if out.returncode != 0:
            raise KafkaPeerError(f"kafka-storage format failed: {(out.stdout + out.stderr)[-800:]}")

    def start(self, ready_timeout_s: float = 120) -> None:
        """Format the KRaft storage, start the node and wait until it answers a metadata request."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "log4j2.xml").write_text(_LOG4J2.format(log=self.log))
        props = self.workdir / "server.properties"
        props.write_text(_SERVER.format(port=self.port, controller=self.controller_port,
                                        logs=self.workdir / "data"))
        self._format_storage(props)
        with open(self.workdir / "kafka.stderr", "wb") as err:
            self._proc = subprocess.Popen(
                self._java("kafka.Kafka", str(props), heap=(f"-Xms{self.heap}", f"-Xmx{self.heap}")),
                stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL)
        self._wait_ready(ready_timeout_s)

    def _wait_ready(self, timeout_s: float) -> None:
        from confluent_kafka.admin import AdminClient

        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.poll() is not None:
                raise KafkaPeerError(f"Kafka exited with status {self._proc.returncode}; see {self.log}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                AdminClient({"bootstrap.servers": self.bootstrap}).list_topics(timeout=5)
                return
            except Exception:  # noqa: BLE001 - refused / KafkaException until the listener is up
                time.sleep(0.5)
        raise KafkaPeerError(f"Kafka did not answer on {self.bootstrap} within {timeout_s:.0f} s; see {self.log}")

    def create_topic(self, name: str, partitions: int) -> None:
        """Create ``name`` with ``partitions`` partitions (replication factor 1) and wait for it."""
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
            future.result(60)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            topic = admin.list_topics(name, timeout=5).topics.get(name)
            if topic is not None and topic.error is None and len(topic.partitions) == partitions:
                return
            time.sleep(0.2)
        raise KafkaPeerError(f"topic {name!r} did not get {partitions} partitions within 60 s")

    def end_offsets(self, topic: str, partitions: int) -> int:
        """The sum of the topic's high watermarks: how many records it holds."""
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "bench-watermarks"})
        try:
            return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
                       for p in range(partitions))
        finally:
            consumer.close()

    def stop(self) -> None:
        """Stop the node (SIGTERM, then SIGKILL after 30 s); safe to call twice."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
