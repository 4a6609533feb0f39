"""Sluice's JVM sink: the gate and the latency measurement inside Spark's own write of each batch.

`foreachBatch` costs every micro-batch a call into Python and a second plan for the batch's write
(docs/performance.md, "Sluice's JVM sink"). The sink in
`runtime/java/dev/sluice/sink/` (`GatedSinkProvider`) wraps Spark's noop and Kafka sinks instead:
Spark writes to it in the batch's one plan; on the stream thread, just before the batch's tasks, it
asks the query's gate (one py4j call, only when a scheduler gates the pool) and sets the granted
FAIR pool; its tasks note each row's age; its commit reports the batch in the progress event's
`sink.metrics` (`SinkMetric`), which the host reads off the batch path. A Kafka sink's
`delivery: exactlyOnce` (the default) swaps Spark's Kafka writer for Sluice's transactional one
(`TransactionalKafkaWrite`; its tasks' side in `dev.sluice.eos`, a jar of its own: `eos_jar`).

The jar is built from those sources by their own build file (`runtime/java/pom.xml`: Maven, Spark
`provided` at the installed pyspark's version, resolved from Maven Central) and cached by the
sources' hash (`~/.cache/sluice/jars/`); the images bake the same build in and name it with
SLUICE_SINK_JAR. Without a jar (no JDK or Maven, or `SLUICE_JVM_SINK=0`) every query is written
through `foreachBatch`, and the host says so once in its log.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

log = logging.getLogger("sluice.runtime")

SOURCES = Path(__file__).parent / "java"
PROVIDER = "dev.sluice.sink.GatedSinkProvider"
"""The format name Spark loads the sink by."""
JAR_ENV = "SLUICE_SINK_JAR"
"""A prebuilt jar (the runtime image's); else one built from SOURCES into the cache."""
CHECKPOINT_MANAGER = "dev.sluice.checkpoint.NioCheckpointFileManager"
"""Spark's FileSystem-based checkpoint writer that creates a local file through Java, not Hadoop:
no `chmod` process for each checkpoint file (`runtime/java/dev/sluice/checkpoint/`)."""
SWITCH_ENV = "SLUICE_JVM_SINK"
"""0 writes every query through foreachBatch (a measurement knob: `sluice bench overhead`)."""
CACHE = Path.home() / ".cache" / "sluice" / "jars"
LANE_PLUGIN = "dev.sluice.sink.UrgentLane"
"""The Spark plugin of a gated pool's urgent lane: urgent tasks at a raised CPU priority, bulk
tasks taking turns."""
URGENT_POOLS_CONF = "spark.sluice.urgentPools"
"""Its setting: the FAIR pools whose tasks run at nice -5 (`UrgentLane.URGENT_POOLS`)."""
BULK_TASKS_CONF = "spark.sluice.bulkTasks"
"""Its setting: how many tasks of the bulk pools run at once (`UrgentLane.BULK_TASKS`)."""
BULK_POOLS_CONF = "spark.sluice.bulkPools"
"""Its setting: the bulk pools (`UrgentLane.BULK_POOLS`): every band that is not urgent."""
DELEGATES = ("noop", "kafka")
"""Sink types the JVM sink writes through (Spark's own v2 sinks); the others use foreachBatch."""


class SinkMetric:
    """Keys of a batch's report in its progress (`progress.sink.metrics`), set by the sink's commit."""

    BATCH = "sluice.batch"
    ASKED = "sluice.asked"
    """The batch id the gate was asked for (Spark's local property; -1 if it was missing)."""
    ROWS = "sluice.rows"
    BEGAN = "sluice.began"
    """Epoch milliseconds: the batch's write began (after the gate)."""
    COMMITTED = "sluice.committed"
    """Epoch milliseconds: the delegate's commit returned."""
    POOL = "sluice.pool"
    THREAD_CPU = "sluice.threadCpu"
    """Nanoseconds of CPU the query's stream thread had used by the commit (-1: the JVM cannot
    tell): between two commits, the driver's work on its batch (offsets, planning, the commit)."""
    TURN_WAIT = "sluice.turnWait"
    """Nanoseconds the batch's bulk tasks waited for a turn of the urgent lane (inside their run
    time; -1: not seen, where no turns are taken or the tasks ran in executors of their own)."""
    AGES = "sluice.ages"
    """Comma-separated milliseconds: the rows' ages when the write began, at the grid's quantiles."""


def enabled() -> bool:
    return os.environ.get(SWITCH_ENV, "1") != "0"


def _digest() -> str:
    import pyspark

    h = hashlib.sha256(pyspark.__version__.encode())
    for source in sorted([*SOURCES.rglob("*.java"), SOURCES / "pom.xml"]):
        h.update(source.relative_to(SOURCES).as_posix().encode())
        h.update(source.read_bytes())
    return h.hexdigest()[:12]


def _maven() -> str | None:
    found = shutil.which("mvn")
    home = os.environ.get("JAVA_HOME")
    javac = (Path(home) / "bin" / "javac").exists() if home else shutil.which("javac") is not None
    return found if found and javac else None


@cache
def jar() -> Path | None:
    """The sink's jar, built once per source version; None (and why, logged) when there is none."""
    if not enabled():
        return None
    baked = os.environ.get(JAR_ENV)
    if baked:
        if Path(baked).is_file():
            return Path(baked)
        log.warning("%s names %s, which does not exist; batches go through foreachBatch.", JAR_ENV, baked)
        return None
    if not (SOURCES / "pom.xml").is_file():
        return None
    target = CACHE / f"sluice-sink-{_digest()}.jar"
    if target.exists() and eos_jar(target).exists():
        return target
    maven = _maven()
    if maven is None:
        log.warning("no JDK (javac) and Maven (mvn) to build Sluice's sink; batches go through foreachBatch.")
        return None
    try:
        _build(maven, target)
    except (OSError, subprocess.CalledProcessError) as failed:
        detail = (getattr(failed, "stdout", "") or "").strip().splitlines()[-3:]
        log.warning("building Sluice's sink failed (%s%s); batches go through foreachBatch.", failed,
                    f": {' '.join(detail)}" if detail else "")
        return None
    return target


def _build(maven: str, target: Path) -> None:
    """`mvn package` with the sources' own build file into `target` (atomically: parallel builds are
    safe), against the Spark of the installed pyspark."""
    import pyspark

    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="sluice-sink-") as work:
        subprocess.run([maven, "-q", "-B", "-f", str(SOURCES / "pom.xml"), f"-Dsluice.build={work}",
                        f"-Dspark.version={pyspark.__version__}", "package"],
                       check=True, capture_output=True, text=True, cwd=work)
        for built, cached in ((Path(work) / "sluice-sink-eos.jar", eos_jar(target)),
                              (Path(work) / "sluice-sink.jar", target)):  # the main jar last: it says "built"
            staged = cached.parent / f".{cached.name}.{os.getpid()}.tmp"  # one per builder
            os.replace(shutil.copy(built, staged), cached)


def eos_jar(main: Path) -> Path:
    """The exactly-once Kafka writer's tasks (`dev.sluice.eos`), a jar beside the main one: the sink
    loads it at the same path on each executor under the task's class loader (the one that sees
    Spark's Kafka package), never from the class path."""
    return main.with_name(main.stem + "-eos.jar")


def session_conf() -> dict[str, str]:
    """What a session needs to load the sink: the jar on the driver's and executors' class path
    (not `spark.jars`: py4j and Spark must see one copy of its classes); and the jar's checkpoint
    writer (`CHECKPOINT_MANAGER`)."""
    found = jar()
    if found is None:
        return {}
    return {"spark.driver.extraClassPath": str(found), "spark.executor.extraClassPath": str(found),
            "spark.sql.streaming.checkpointFileManagerClass": CHECKPOINT_MANAGER}


def loaded(spark: Any) -> bool:
    """Is the sink on this session's class path (its JVM may have started without it)?"""
    from py4j.java_gateway import JavaClass

    return isinstance(spark.sparkContext._jvm.dev.sluice.sink.Gates, JavaClass)


def gates(spark: Any) -> Any:
    """The JVM's registry of gates (`Gates.register(key, gate)`, `Gates.unregister(key)`)."""
    from pyspark.java_gateway import ensure_callback_server_started

    gateway = spark.sparkContext._gateway
    ensure_callback_server_started(gateway)  # type: ignore[no-untyped-call]
    return spark.sparkContext._jvm.dev.sluice.sink.Gates


def lane_status(spark: Any) -> str:
    """"on", or why urgent tasks run at the normal CPU priority in this JVM (`UrgentLane.status`)."""
    return str(spark.sparkContext._jvm.dev.sluice.sink.UrgentLane.status())


@dataclass(frozen=True, slots=True)
class Warmth:
    """Warm before work as the driver's JVM has it (`Warmup.java`)."""

    executors: dict[str, str]
    """Each executor's state, "cold" or "warm" (executors of their own only)."""
    events: list[str]
    """"MILLIS ID cold|warm|gone [WHY]", in order."""
    trouble: str
    """Empty while cold executors are kept out of urgent task sets; else why they are not."""

    def warm_at(self, executor: str) -> float | None:
        """When `executor` last became warm (epoch seconds, the driver's clock), if it is warm."""
        if self.executors.get(executor) != "warm":
            return None
        for line in reversed(self.events):
            millis, who, state = [*line.split(" ", 3), "", ""][:3]
            if who == executor and state == "warm":
                return int(millis) / 1000
        return None


def warmth(spark: Any) -> Warmth:
    """The executors' warm-up states, their history and any trouble (`Warmup.state`, `events`)."""
    warmup = spark.sparkContext._jvm.dev.sluice.sink.Warmup
    pairs = [item.split("=", 1) for item in str(warmup.state()).split(",") if "=" in item]
    events = [line for line in str(warmup.events()).splitlines() if line]
    return Warmth({executor: state for executor, state in pairs}, events, str(warmup.trouble()))


def batch_id_key(spark: Any) -> str:
    """The local property the sink reads the batch id from (its constant, `BatchIds.KEY`)."""
    return str(spark.sparkContext._jvm.dev.sluice.sink.BatchIds.key())


if __name__ == "__main__":  # images/build-local.sh: build (or reuse) the jar and print its path
    import sys

    built = jar()
    if built is None:
        sys.exit("Sluice's sink could not be built here: it needs a JDK and Maven (see the warning above).")
    print(built)
