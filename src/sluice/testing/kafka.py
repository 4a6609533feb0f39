"""A single-node Apache Kafka broker (KRaft, no ZooKeeper) on loopback, from Maven Central jars.

The jars are resolved once with Maven (`kafka-pom.xml` beside this file, pinned version) into
`~/.cache/sluice/kafka/<version>/libs`; the broker runs as `java -cp libs/* kafka.Kafka` with a
data dir under the given work dir. Used by the kafka test tier, `sluice kafka`, and benchmarks.
"""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import processes

KAFKA_VERSION = "3.9.1"
OFFSET_BEGINNING = -2
"""librdkafka's logical offset: a partition's first record."""
CACHE = Path(os.environ.get("SLUICE_CACHE", Path.home() / ".cache" / "sluice"))
POM = Path(__file__).with_name("kafka-pom.xml")


class KafkaUnavailable(RuntimeError):
    """The broker could not be had; the message is one sentence saying what is missing."""


def resolve_jars(version: str = KAFKA_VERSION) -> Path:
    """Resolve (or reuse) the broker's jars; returns the libs directory."""
    libs = CACHE / "kafka" / version / "libs"
    if (libs / f"kafka_2.13-{version}.jar").exists():
        return libs
    if shutil.which("mvn") is None:
        raise KafkaUnavailable("Resolving the Kafka broker needs Maven ('mvn'); install it (apt-get install maven) and retry.")
    if shutil.which("java") is None:
        raise KafkaUnavailable("The Kafka broker needs Java 17; install it (apt-get install openjdk-17-jre-headless) and retry.")
    staging = libs.with_name("libs.partial")
    shutil.rmtree(staging, ignore_errors=True)
    proc = subprocess.run(
        ["mvn", "-q", "-B", "-f", str(POM), f"-Dkafka.version={version}", "dependency:copy-dependencies",
         f"-DoutputDirectory={staging}", "-DincludeScope=runtime"],
        capture_output=True, text=True, timeout=900,
    )
    if proc.returncode != 0:
        last = (proc.stdout + proc.stderr).strip().splitlines()[-1:] or ["no output"]
        raise KafkaUnavailable(f"Maven could not resolve Kafka {version} from Maven Central ({last[0][:200]}); check that Maven Central is reachable.")
    staging.rename(libs)
    return libs


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class KafkaBroker:
    workdir: Path
    version: str = KAFKA_VERSION
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    libs: Path | None = None
    started_in: float = 0.0
    topics: set[str] = field(default_factory=set)
    host: str = "127.0.0.1"
    """The address the broker listens on and advertises (the node tier: the node's IP, so pods
    reach it)."""
    config: Path | None = None
    """The running broker's server.properties (its ports and data directory)."""

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, timeout: float = 90, attempts: int = 3) -> KafkaBroker:
        processes.reap_leftovers(["kafka.Kafka"])
        begin = time.monotonic()
        self.libs = resolve_jars(self.version)
        error = ""
        for attempt in range(1, attempts + 1):
            try:
                self._start_once(attempt, timeout)
                self.started_in = time.monotonic() - begin
                return self
            except KafkaUnavailable as failure:
                error = str(failure)
                self.stop()
        raise KafkaUnavailable(f"The Kafka broker did not start after {attempts} tries: {error}")

    def _java(self, *args: str) -> list[str]:
        assert self.libs is not None
        return ["java", "-Xms128m", "-Xmx512m", "-XX:+UseSerialGC", f"-Dlog4j2.configurationFile={self._log4j()}",
                "-cp", f"{self.libs}/*", *args]

    def _log4j(self) -> Path:
        path = self.workdir / "log4j2.properties"
        if not path.exists():
            path.write_text(
                "rootLogger.level = warn\nrootLogger.appenderRef.out.ref = out\n"
                "appender.out.type = Console\nappender.out.name = out\n"
                "appender.out.layout.type = PatternLayout\nappender.out.layout.pattern = %d %p %c %m%n\n"
            )
        return path

    def _start_once(self, attempt: int, timeout: float) -> None:
        data = self.workdir / f"kafka-{attempt}"
        data.mkdir(parents=True, exist_ok=True)
        self.port, controller = _free_port(), _free_port()
        config = data / "server.properties"
        config.write_text("\n".join([
            "process.roles=broker,controller", "node.id=1",
            f"controller.quorum.voters=1@127.0.0.1:{controller}",
            f"listeners=PLAINTEXT://{self.host}:{self.port},CONTROLLER://127.0.0.1:{controller}",
            f"advertised.listeners=PLAINTEXT://{self.host}:{self.port}",
            "controller.listener.names=CONTROLLER", "inter.broker.listener.name=PLAINTEXT",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            f"log.dirs={data / 'logs'}", "num.partitions=1", "auto.create.topics.enable=false",
            "offsets.topic.replication.factor=1", "transaction.state.log.replication.factor=1",
            "transaction.state.log.min.isr=1", "group.initial.rebalance.delay.ms=0",
            "log.retention.hours=2", "log.flush.interval.ms=1000",
        ]) + "\n")
        cluster = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        formatted = subprocess.run(self._java("kafka.tools.StorageTool", "format", "-t", cluster, "-c", str(config)),
                                   capture_output=True, text=True, timeout=120)
        if formatted.returncode != 0:
            raise KafkaUnavailable(f"formatting Kafka's storage failed: {(formatted.stderr or formatted.stdout).strip()[-300:]}")
        self.config = config
        self.proc = processes.spawn("kafka", self._java("kafka.Kafka", str(config)), data / "kafka.log")
        self._wait_ready(data / "kafka.log", timeout)

    def _wait_ready(self, log: Path, timeout: float) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                tail = log.read_text(errors="replace").strip().splitlines()[-3:]
                raise KafkaUnavailable(f"the broker exited with code {self.proc.returncode}: {' / '.join(tail)}")
            if self._ready():
                return
            time.sleep(0.3)
        raise KafkaUnavailable(f"the broker was not ready within {timeout:.0f} s (log: {log})")

    def restart(self, down: float = 0.0, timeout: float = 90) -> None:
        """Kill the broker (SIGKILL: no clean shutdown), leave it down `down` seconds, and start it
        again on the same data, ports and cluster id (the chaos tier's broker restart)."""
        assert self.proc is not None and self.config is not None, "start the broker first"
        data = self.config.parent
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)
        processes.stop("kafka", self.proc)
        time.sleep(down)
        log = data / f"kafka-restart-{time.monotonic_ns()}.log"
        self.proc = processes.spawn("kafka", self._java("kafka.Kafka", str(self.config)), log)
        self._wait_ready(log, timeout)

    def _ready(self) -> bool:
        from confluent_kafka.admin import AdminClient

        try:  # the port first: librdkafka logs every refused connection
            socket.create_connection((self.host, self.port), timeout=1).close()
        except OSError:
            return False
        try:
            metadata = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0}).list_topics(timeout=2)
        except Exception:
            return False
        return bool(metadata.brokers)

    def create_topic(self, name: str, partitions: int = 1) -> str:
        from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        futures = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
        futures[name].result(timeout=30)
        self.topics.add(name)
        return name

    def count(self, topic: str) -> int:
        """Records in a topic (sum over partitions of high - low watermark)."""
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"count-{uuid.uuid4()}"})
        try:
            partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
            total = 0
            for p in partitions:
                low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
                total += high - low
            return total
        finally:
            consumer.close()

    def values(self, topic: str, committed: bool = True, timeout: float = 60) -> list[bytes]:
        """Every record value in a topic, read from the start to its end (`read_to_end`)."""
        return [v for m in read_to_end(self.bootstrap, topic, committed, timeout) if (v := m.value()) is not None]

    def stop(self) -> None:
        if self.proc is not None:
            processes.stop("kafka", self.proc, timeout=20)
            self.proc = None


def read_to_end(bootstrap: str, topic: str, committed: bool = True, timeout: float = 60) -> list[Any]:
    """Every record of a topic (confluent_kafka messages), read from the start to its end as a
    consumer with isolation.level read_committed (the default: what an exactly-once sink
    promises) or read_uncommitted sees it. Ends by position, not count: transactions put commit
    markers between records, and their offsets hold no record."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"values-{uuid.uuid4()}",
                         "enable.auto.commit": False,
                         "isolation.level": "read_committed" if committed else "read_uncommitted"})
    out: list[Any] = []
    try:
        ends = {}
        for p in consumer.list_topics(topic, timeout=10).topics[topic].partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            if high > low:
                ends[p] = high
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
        deadline = time.monotonic() + timeout
        while ends:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}: partitions {sorted(ends)} not read to their end in {timeout:.0f} s")
            out += [m for m in consumer.consume(10_000, timeout=0.5) if m.error() is None]
            for tp in consumer.position([TopicPartition(topic, p) for p in ends]):
                if tp.offset >= ends[tp.partition]:
                    del ends[tp.partition]
    finally:
        consumer.close()
    return out
