"""Kafka 4.1.1's own command-line tools, run as ``java -cp libs/* <main class>`` (what the .sh scripts do).

The jars come from Maven Central once per machine into the cache the Kafka benchmark uses
(``~/.cache/sparkmq-bench/kafka-4.1.1/libs``, about 40 s and 54 MB the first time); a failed download
fails the test that asked. Without Java or Maven the tests are skipped with the reason.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from benchmarks import kafka_peer

__all__ = ["KafkaTools", "TOPICS", "PRODUCER", "CONSUMER", "GROUPS"]

TOPICS = "org.apache.kafka.tools.TopicCommand"
PRODUCER = "org.apache.kafka.tools.ConsoleProducer"
CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
_DOWNLOAD_TIMEOUT_S = 300
_LOG4J2 = """<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="WARN"><Appenders><Console name="e" target="SYSTEM_ERR">
<PatternLayout pattern="%p %c{1}: %m%n"/></Console></Appenders>
<Loggers><Root level="WARN"><AppenderRef ref="e"/></Root></Loggers></Configuration>
"""


class KafkaTools:
    """Runs one tool against ``bootstrap`` and returns its stdout (an assertion error if it fails)."""

    def __init__(self, libs: Path, workdir: Path) -> None:
        self.libs = libs
        self.log_config = workdir / "log4j2.xml"
        self.log_config.write_text(_LOG4J2)

    def run(self, main: str, *args: str, stdin: str | None = None, timeout_s: float = 60) -> str:
        cmd = ["java", "-XX:TieredStopAtLevel=1", "-Xshare:auto", "-Xmx256m",
               f"-Dlog4j2.configurationFile={self.log_config}", "-cp", f"{self.libs}/*", main, *args]
        out = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=timeout_s, check=False)
        assert out.returncode == 0, f"{main} {' '.join(args)} exited {out.returncode}: {out.stderr[-2000:]}"
        return out.stdout


@pytest.fixture(scope="session")
def kafka_tools(tmp_path_factory: pytest.TempPathFactory) -> KafkaTools:
    if shutil.which("java") is None:
        pytest.skip("Kafka's tools need Java (apt-get install -y default-jre-headless)")
    if shutil.which("mvn") is None:
        pytest.skip("fetching Kafka's tools needs Maven (apt-get install -y maven)")
    libs = kafka_peer.ensure_kafka_jars(kafka_peer.cache_dir(), timeout_s=_DOWNLOAD_TIMEOUT_S)
    return KafkaTools(libs, tmp_path_factory.mktemp("kafka-tools"))
