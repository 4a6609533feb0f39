"""The one SparkSession of a pool: FAIR mode with the scheduler's band ladder."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sluice.api.constants import (
    ASYNC_PROGRESS_CONF,
    ASYNC_PROGRESS_MS,
    BANDS,
    BULK_TASKS_CONF,
    BULK_TASKS_PER_CORE,
    EXECUTOR_JIT,
    EXECUTOR_JIT_CONF,
    EXECUTOR_JITS,
    START_WARMUP_CONF,
    URGENT_LANE_CHOICES,
    URGENT_RESERVE_CONF,
    WARMUP_CONF,
)
from sluice.api.pool import PoolPriority
from sluice.scheduler.bands import band_name, fairscheduler_xml, urgent_bands

from . import jvm_sink
from .priority import BULK_NICE

KAFKA_PACKAGE = "org.apache.spark:spark-sql-kafka-0-10_2.13"
SHIPPED_WITH_PYSPARK = (
    "org.apache.hadoop:hadoop-client-runtime", "org.apache.hadoop:hadoop-client-api", "org.slf4j:slf4j-api",
    "at.yawk.lz4:lz4-java", "org.lz4:lz4-java", "org.xerial.snappy:snappy-java", "com.google.code.findbugs:jsr305",
    "org.scala-lang.modules:scala-parallel-collections_2.13",
)
"""The connector's dependencies that pyspark's own jars already hold (same versions): not fetched again."""
IVY_SETTINGS = """<ivysettings>
  <settings defaultResolver="central"/>
  <caches defaultCacheDir="{cache}"/>
  <resolvers>
    <ibiblio name="central" m2compatible="true" root="https://repo1.maven.org/maven2/"/>
  </resolvers>
</ivysettings>
"""
"""Maven Central only: Spark's default chain also asks repos.spark-packages.org, which is not
reachable everywhere and prints a line per artifact when it is not."""
CHECKPOINT_MANAGER = "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
"""Spark's checkpoint writer through Hadoop's FileSystem API (Spark's default, for a filesystem
with a FileContext, goes through it). A Spark internal class name: a test in tests/spark/test_runtime.py fails
if an upgrade moves it."""
RAW_LOCAL_FILES = {"spark.hadoop.fs.AbstractFileSystem.file.impl": "org.apache.hadoop.fs.local.RawLocalFs",
                   "spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",
                   "spark.sql.streaming.checkpointFileManagerClass": CHECKPOINT_MANAGER}
"""Checkpoint and state files on a local disk or volume: no `.crc` side files, and as few child
processes as Hadoop allows. Every micro-batch writes an offset log and a commit log file (and a
stateful query its state files). Hadoop's local filesystem without its native library (pip's
pyspark has none) runs a process for every permission change (`chmod` after each file it
creates) and, through FileContext, for every symlink check (`readlink`, twice per rename):
about 20 processes per micro-batch of a filter, measured with `strace` and the kernel's PID
counter. Through the FileSystem API on the raw local filesystem it is 4 (the `chmod`s). The
checksums and the processes cost a filter's micro-batch a third of its time (measured:
docs/architecture.md, "Measurements behind the design"). With Sluice's jar the writer is its
subclass that creates local files through Java (`jvm_sink.CHECKPOINT_MANAGER`): none. Rename keeps
each write atomic on a local filesystem; on an object store neither of Spark's writers is."""
PROVIDER = "spark.sql.streaming.stateStore.providerClass"
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
HADOOP_LOCAL_FILES = "org.apache.hadoop.fs.LocalFileSystem"


def local_files(extra: dict[str, str]) -> dict[str, str]:
    """RAW_LOCAL_FILES for a session with `extra` config, but Hadoop's own `fs.file.impl` when the
    RocksDB state store is chosen: it takes the local filesystem through Hadoop's
    `FileSystem.getLocal`, which casts it to `LocalFileSystem`, and on the raw one every batch
    failed its state commit (a ClassCastException, seen in `sluice bench rescale`). Set, not
    left out: a session started earlier in the same process leaves its settings to the next one
    as defaults. The checkpoint writer and FileContext's raw local filesystem stay."""
    if extra.get(PROVIDER) == ROCKSDB:
        return RAW_LOCAL_FILES | {"spark.hadoop.fs.file.impl": HADOOP_LOCAL_FILES}
    return dict(RAW_LOCAL_FILES)


LOG4J2 = Path(__file__).resolve().with_name("log4j2.properties")
"""Spark's logging: warnings and errors, one line each, no notices of normal operation."""

KAFKA_JARS_ENV = "SLUICE_KAFKA_JARS"
"""A directory holding the connector's jars (the runtime image bakes them in at /opt/sluice/jars):
when set, the session adds them with `spark.jars` and never reaches Maven Central."""


def kafka_jars() -> list[Path]:
    """The baked-in connector jars named by SLUICE_KAFKA_JARS, or none (then Ivy resolves them)."""
    folder = os.environ.get(KAFKA_JARS_ENV)
    if not folder:
        return []
    jars = sorted(Path(folder).glob("*.jar"))
    if not any(jar.name.startswith("spark-sql-kafka-0-10") for jar in jars):
        raise RuntimeError(f"{KAFKA_JARS_ENV}={folder} holds no spark-sql-kafka-0-10 jar; "
                           "rebuild the runtime image or unset it to resolve the connector from Maven Central.")
    return jars


def _jvm_running() -> bool:
    from pyspark import SparkContext

    return SparkContext._gateway is not None


def driver_process(spark: Any) -> subprocess.Popen[bytes] | None:
    """The driver JVM's process, as PySpark's `launch_gateway` started it and keeps it (`proc` on the
    py4j gateway: a private attribute; `tests/spark/test_driver_process.py` fails loudly if an
    upgrade moves it). None when this Python attached to a JVM it did not start."""
    proc = getattr(getattr(spark.sparkContext, "_gateway", None), "proc", None)
    return proc if isinstance(proc, subprocess.Popen) else None


def exit_text(code: int) -> str:
    """A child's return code as words: 'exit code 0', 'killed by SIGKILL'."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def kafka_package() -> str:
    """The Kafka connector matching the installed pyspark, resolved from Maven Central."""
    import pyspark

    return f"{KAFKA_PACKAGE}:{pyspark.__version__}"


def ivy_settings(home: Path) -> Path:
    """Ivy's settings for `spark.jars.packages`, with its cache under `home`."""
    home.mkdir(parents=True, exist_ok=True)
    path = home / "ivysettings.xml"
    text = IVY_SETTINGS.format(cache=home / "cache")
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return path


DECOMMISSION = {
    "spark.decommission.enabled": "true",
    "spark.storage.decommission.enabled": "true",
    "spark.storage.decommission.shuffleBlocks.enabled": "true",
    "spark.executor.decommission.forceKillTimeout": "120s",
    # how often a decommissioning executor looks for blocks left to migrate; it exits only after
    # a pass that found none, so Spark's 30 s default kept each victim 30 s (bench rescale)
    "spark.storage.decommission.replicationReattemptInterval": "2s",
}
"""With executors (Kubernetes, local-cluster): a scale-down decommissions its victims instead of
killing them (`executors.ExecutorScaler`). A decommissioned executor gets no new task, finishes
the ones it runs, hands its shuffle files to the others and exits. A killed one took the map
outputs of the batch in flight with it: the next stage's fetches failed and the batch ran its
map stage again, 5-6 s more in `sluice bench rescale` per kill. An executor still decommissioning
after 120 s is killed by Spark (the scaler's grace, default 30 s, no longer bounds it)."""


CODEGEN_CACHE_ENTRIES = 2000
"""Spark's cache of compiled generated classes (`spark.sql.codegen.cache.maxEntries`, Spark's
default 100, static): keyed by each class's source text, into which a query's literals are
pasted, so a pool of tenants' queries with their own thresholds and keys needs an entry per
class of each (2-5 a query). `sluice bench batch-cost` at 50 queries with distinct literals:
0.88x and 0.90x the CPU per batch of 100 entries in two runs (docs/performance.md)."""
STREAMING_UI = "false"
"""`spark.sql.streaming.ui.enabled`: Spark's Structured Streaming tab records every progress event
in the UI's store; the runtime reads only the UI's stage and executor lists, and gives each query's
progress itself (status, metrics). Off: 0.90x and 0.92x the CPU per batch in two runs
(docs/performance.md)."""


DRIVER_GC_CONF = "spark.sluice.driver.gc"
"""The driver JVM's garbage collector, a key of `DRIVER_GC_OPTIONS` (default `DRIVER_GC`)."""
DRIVER_GC_OPTIONS = {"parallel": "-XX:+UseParallelGC", "g1": "-XX:+UseG1GC"}
DRIVER_GC = "parallel"
"""HotSpot's throughput collector, not its default G1: a pool's driver allocates short-lived
objects for every micro-batch of every query (plans, progress, events), and G1's concurrent
refinement and marking threads cost CPU on top of its pauses. `sluice bench batch-cost` at 100
queries, two runs: 0.78x and 0.76x G1's CPU per batch, its collector threads 2.7-3.1 ms a batch
against 9.9-10.4 (docs/performance.md); `--conf spark.sluice.driver.gc=g1` gives G1 back."""
JIT_ENV = "SLUICE_DRIVER_JIT"
"""`tiered` (the default) or `c1`: the driver JVM's JIT compilers (`JIT_OPTIONS`)."""
JIT_OPTIONS = {"tiered": "", "c1": "-XX:TieredStopAtLevel=1"}
"""The driver JVM's JIT compilers: HotSpot's default (`tiered`: C1, then C2 for hot code), or C1
alone. C2 recompiles Spark's planner for minutes (Catalyst's tree rewrites are megamorphic), so
C1 alone is a warm-up gain and a steady-state loss (and runs a tight task loop in local mode
about 5x slower): the default stays HotSpot's; `c1` suits a runtime that must drain a backlog
right after it starts. Measured with `bench/batch_cpu.py`: docs/performance.md, Density,
"Per-batch costs"."""

EXECUTOR_JIT_ENV = "SLUICE_EXECUTOR_JIT"
"""The executors' JIT choice where the runtime's settings do not give one (`EXECUTOR_JIT_CONF`,
a pool's `spec.executor.jit`): `sluice run` and the benchmarks, like SLUICE_DRIVER_JIT."""
EXECUTOR_JIT_OPTIONS: dict[str, str] = {
    "tiered": JIT_OPTIONS["tiered"], "c1": JIT_OPTIONS["c1"],
    "low": f"-XX:ThreadPriorityPolicy=1 -XX:CompilerThreadPriority={BULK_NICE}"}
"""What a joining executor's JVM spends on compiling is CPU its first tasks and the pool's other
JVMs do not get (on pods 0.6-0.96 of the node's two cores for the first 45-50 s). `c1`: C1 alone,
cheap compiles of slower code; `low`: HotSpot's default compilers at the bulk tasks' nice
(`priority.BULK_NICE`: a thread may always lower itself, so this needs no privilege), below every
task thread at 0 of the same pod. Measured with `sluice bench cameo --executors 2 --executor-jit`
(docs/performance.md, "JVM start")."""

LANE_OPTIONS = " ".join(["-XX:ThreadPriorityPolicy=1", "-XX:JavaPriority1_To_OSPriority=4"]
                        + [f"-XX:JavaPriority{p}_To_OSPriority=0" for p in range(2, 10)])
"""The JVM flags that let a Java thread's priority set its Linux nice value, for priority 10 (HotSpot
maps it to nice -5: against a bulk thread at 0 an urgent one gets three quarters of a shared core)
and priority 1 (nice 4: a bulk task's where the node lets a thread come back to 0 but not rise,
`priority.BULK_NICE`; the same ratio). Every other priority stays at nice 0: by HotSpot's own table the JIT compilers
and the garbage collector's threads (priority 9) would run at -4, above every task (measured
here: cameo's critical filter lost rows to it), and a few of Spark's threads (priority 2) at 2.
HotSpot refuses a mapping below -1, and lowering the bulk tasks instead lost them their CPU to
every other process (docs/architecture.md, "The urgent lane")."""
LANE_ENV = "SLUICE_URGENT_LANE"
"""0 turns a gated pool's urgent lane off (a measurement knob, like SLUICE_JVM_SINK)."""
LANE_SLOTS_PER_CORE = 8
"""Task slots a core with the urgent lane on a local master: bulk tasks beyond one a core wait
in their slots (`UrgentLane`), so slots must outnumber every bulk stage in flight at once with
room left for the urgent ones."""


def urgent_lane() -> bool:
    """A gated pool's urgent lane (`UrgentLane.java`): on unless SLUICE_URGENT_LANE=0, or without
    Sluice's sink jar (its classes do the work)."""
    return os.environ.get(LANE_ENV, "1") != "0" and jvm_sink.jar() is not None


@dataclass(frozen=True, slots=True)
class Lane:
    """A pool's urgent lane as its session starts it (`lane_for`)."""

    on: bool
    bulk_tasks: int
    """The most bulk-band tasks that run at once (0: no turns)."""
    slots: int
    """Task slots of a local master for micro-batches."""
    reserve: int = 0
    """Bulk turns each executor holds back while urgent tasks run in it, where its threads have
    no priorities (`UrgentLane.URGENT_RESERVE`; executor pods only)."""


LANE_CHOICES = URGENT_LANE_CHOICES
"""Who gets the urgent lane (`api.constants`): fifo and fair under `all` get the same slots, bulk
turns and priorities as the gated policies, where they apply."""


def lane_wanted(choice: str, gated: bool) -> bool:
    """Whether a run of a (gated or not) policy asks for the lane under `choice` (LANE_CHOICES)."""
    if choice not in LANE_CHOICES:
        raise ValueError(f"urgent lane {choice!r}: use one of {', '.join(LANE_CHOICES)}.")
    return choice == "all" or (choice == "gated" and gated)


def lane_for(gated: bool, local: bool, cores: int) -> Lane:
    """The lane of a pool on `cores` cores: on for a gated pool (`urgent_lane`); on a local master
    with LANE_SLOTS_PER_CORE slots a core and the bulk bands one task a core."""
    on = gated and urgent_lane()
    bulk = max(cores, 1) if on and local else 0
    return Lane(on, bulk, max(cores, 1) * (LANE_SLOTS_PER_CORE if bulk else 1))


EXECUTOR_CORES = "spark.executor.cores"
EXECUTOR_REQUEST = "spark.kubernetes.executor.request.cores"
EXECUTOR_INSTANCES = "spark.executor.instances"


def executor_lane(gated: bool, conf: dict[str, str]) -> tuple[Lane, dict[str, str]]:
    """The lane of a pool on executor pods (a Kubernetes master) whose settings are `conf`, and
    the settings it changes. Each executor JVM runs the plugin's executor side, so it gets what a
    local master gets on its cores: LANE_SLOTS_PER_CORE task slots a core (`spark.executor.cores`,
    which is Spark's count of slots) and bulk turns one a core of that executor, or the pool's
    `spec.executor.bulkTasks` (BULK_TASKS_CONF, at most BULK_TASKS_PER_CORE a core). The pod still
    asks Kubernetes for the executor's cores (`spark.kubernetes.executor.request.cores`, which
    otherwise follows the slots), and RDDs and sources split by the pool's cores as before; the
    operator sizes pools, capacity and Real-time reservations on the pool's cores, not slots."""
    on = gated and urgent_lane()
    cores = _whole(conf, EXECUTOR_CORES)
    if not on:
        return Lane(on, 0, cores), {}
    changed = {EXECUTOR_CORES: str(cores * LANE_SLOTS_PER_CORE),
               EXECUTOR_REQUEST: conf.get(EXECUTOR_REQUEST, str(cores)),
               "spark.default.parallelism": str(cores * _whole(conf, EXECUTOR_INSTANCES))}
    turns = conf.get(BULK_TASKS_CONF, str(cores))
    if not turns.isdigit() or not 1 <= int(turns) <= cores * BULK_TASKS_PER_CORE:
        raise ValueError(f"--conf {BULK_TASKS_CONF}={turns!r}: give a whole number of bulk turns from 1 to "
                         f"{cores * BULK_TASKS_PER_CORE} ({BULK_TASKS_PER_CORE} a core).")
    held = conf.get(URGENT_RESERVE_CONF, "0")
    if not held.isdigit():
        raise ValueError(f"--conf {URGENT_RESERVE_CONF}={held!r}: give a whole number of turns, 0 or more.")
    bulk = int(turns)
    return Lane(on, bulk, cores * LANE_SLOTS_PER_CORE, min(int(held), bulk - 1)), changed


def _whole(conf: dict[str, str], key: str) -> int:
    """A count of at least 1 among Spark's settings (1 when unset)."""
    text = conf.get(key, "1")
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"--conf {key}={text!r}: give a whole number of at least 1.")
    return int(text)


def lane_sentence(lane: Lane, gated: bool, lever: PoolPriority) -> str:
    """What the urgent lane does in this runtime, in one sentence (a pool's `status.urgentLane`):
    `lever` is the priority lever in force (`priority.decide`)."""
    if not gated:
        return "off: the policy has no gate (fifo and fair run Spark on its own)"
    if not lane.on:
        return f"off: {LANE_ENV}=0, or the runtime has no Sluice sink jar"
    cores = lane.slots // LANE_SLOTS_PER_CORE
    turns = ("urgent bands only, no bulk turns (turns need a local master or executor pods)" if not lane.bulk_tasks
             else "bulk tasks take turns, one a core" if lane.bulk_tasks == cores
             else f"bulk tasks take turns, {lane.bulk_tasks} at once in each executor of {cores} cores")
    said = {"threadNice": "urgent threads at nice -5", "bulkNice": "bulk threads at nice 4 while they run"}
    if lane.bulk_tasks and lane.reserve and lever.mechanism not in said:  # held back only without priorities
        turns += f", {lane.reserve} fewer in an executor while urgent tasks run there"
    return f"on: {turns}; {said.get(lever.mechanism, 'no thread priorities')} ({lever.reason})"


NEVER = "1000000"
"""A failure threshold no stage reaches."""
EXCLUDE_LISTS = {
    "spark.excludeOnFailure.taskAndStage.enabled": "true",
    "spark.excludeOnFailure.task.maxTaskAttemptsPerExecutor": NEVER,
    "spark.excludeOnFailure.task.maxTaskAttemptsPerNode": NEVER,
    "spark.excludeOnFailure.stage.maxFailedTasksPerExecutor": NEVER,
    "spark.excludeOnFailure.stage.maxFailedExecutorsPerNode": NEVER,
}
"""Warm before work (`Warmup.java`) keeps a joining executor out of the urgent bands' task sets
through each task set's exclude list, which Spark makes only with task-and-stage exclusion on;
its failure thresholds are raised out of reach, so a failing task is retried as with exclusion
off and only the warm-up's entries fill the lists. (Application-wide exclusion stays off.)
Executors of their own only (a local master has one, the driver), and only where the warm-up is
on (`WARMUP_CONF` above 0): otherwise every stage would carry an exclude list for nothing."""


def _seconds(text: str, key: str = WARMUP_CONF) -> float:
    """A warm-up setting's seconds (`WARMUP_CONF`, `START_WARMUP_CONF`), or one sentence naming
    the setting (the executors would fail on the first)."""
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not seconds >= 0:  # NaN too
        raise ValueError(f"--conf {key}={text!r}: give seconds, 0 or more (0: no warm-up).")
    return seconds


def start_warmup_seconds(extra: dict[str, str]) -> float:
    """How long the runtime warms up before it serves (`START_WARMUP_CONF`; unset: 0, not at all)."""
    return _seconds(extra.get(START_WARMUP_CONF, "0"), START_WARMUP_CONF)


def async_progress_ms(text: str | None) -> int:
    """`ASYNC_PROGRESS_CONF`'s milliseconds (its default when unset), or one sentence naming the setting."""
    if text is None:
        return ASYNC_PROGRESS_MS
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise ValueError(f"--conf {ASYNC_PROGRESS_CONF}={text!r}: give whole milliseconds, 0 or more (0: off).")
    return value


def check_settings(extra: dict[str, str]) -> None:
    """Sluice's own settings among the runtime's `--conf`, each refused in one sentence before Spark starts."""
    _seconds(extra.get(WARMUP_CONF, "0"))
    start_warmup_seconds(extra)
    async_progress_ms(extra.get(ASYNC_PROGRESS_CONF))
    executor_jit(extra)
    driver_gc(extra)


def driver_gc(extra: dict[str, str]) -> str:
    """The driver's collector: `DRIVER_GC_CONF` when set, else `DRIVER_GC`; one sentence for anything else."""
    chosen = extra.get(DRIVER_GC_CONF, DRIVER_GC).strip()
    if chosen not in DRIVER_GC_OPTIONS:
        raise ValueError(f"--conf {DRIVER_GC_CONF}={chosen!r}: use one of {', '.join(DRIVER_GC_OPTIONS)}.")
    return chosen


def lane_conf(bands: int, bulk_tasks: int) -> dict[str, str]:
    """The urgent lane's settings: its plugin, the urgent bands, and (`bulk_tasks` > 0) how many
    tasks outside them run at once in one JVM (sources and RDDs then split by that, not by the
    slots; `executor_lane` sets the split of a pool of executors)."""
    conf = {"spark.plugins": jvm_sink.LANE_PLUGIN,
            jvm_sink.URGENT_POOLS_CONF: ",".join(band_name(i) for i in range(urgent_bands(bands)))}
    if bulk_tasks > 0:
        conf[jvm_sink.BULK_TASKS_CONF] = str(bulk_tasks)
        conf[jvm_sink.BULK_POOLS_CONF] = ",".join(band_name(i) for i in range(urgent_bands(bands), bands))
        conf["spark.default.parallelism"] = str(bulk_tasks)
    return conf


def executor_jit(extra: dict[str, str]) -> str:
    """The executors' JIT choice (`api.constants.EXECUTOR_JITS`): the runtime's setting
    `EXECUTOR_JIT_CONF`, else `SLUICE_EXECUTOR_JIT`, else `EXECUTOR_JIT`; one sentence
    naming the setting or the variable for anything else."""
    if EXECUTOR_JIT_CONF in extra:
        chosen, named = extra[EXECUTOR_JIT_CONF].strip(), f"--conf {EXECUTOR_JIT_CONF}"
    else:
        chosen, named = os.environ.get(EXECUTOR_JIT_ENV, "").strip() or EXECUTOR_JIT, EXECUTOR_JIT_ENV
    if chosen not in EXECUTOR_JITS:
        raise ValueError(f"{named}={chosen!r}: use one of {', '.join(EXECUTOR_JITS)}.")
    return chosen


def driver_jit() -> str:
    """The driver's JIT choice: `SLUICE_DRIVER_JIT` when set, else HotSpot's tiered compilers."""
    chosen = os.environ.get(JIT_ENV, "").strip() or "tiered"
    if chosen not in JIT_OPTIONS:
        raise RuntimeError(f"{JIT_ENV}={chosen!r}: use one of {', '.join(JIT_OPTIONS)}.")
    return chosen


LOCAL_CLUSTER_MB = 1024
"""Each `local-cluster` worker's memory (MB); its executor's heap is `LOCAL_CLUSTER_EXECUTOR_MEMORY`,
the rest the JVM's overhead."""
LOCAL_CLUSTER_EXECUTOR_MEMORY = "512m"


def local_cluster(executors: int, cores: int = 1, memory_mb: int = LOCAL_CLUSTER_MB) -> str:
    """Spark's `local-cluster` master: a standalone master and `executors` workers on this machine,
    each one executor JVM of `cores` task slots (`sluice run --executors`) in `memory_mb`."""
    if executors < 1 or cores < 1:
        raise ValueError(f"local-cluster needs at least 1 executor of 1 core (got {executors} of {cores}).")
    return f"local-cluster[{executors},{cores},{memory_mb}]"


@dataclass
class SessionConfig:
    master: str = "local[*]"
    app_name: str = "sluice-runtime"
    bands: int = BANDS
    scheduling: str = "FAIR"
    """FAIR (bands) or FIFO (the `fifo` baseline)."""
    shuffle_partitions: int = 4
    kafka: bool = False
    driver_memory: str = "1g"
    ui_port: int = 0
    """0: pick a free port (the status REST API lives on the UI port)."""
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="sluice-")))
    urgent_lane: bool = False
    """Tasks of the urgent bands run at a raised CPU priority (`lane_conf`; gated pools)."""
    bulk_tasks: int = 0
    """With the urgent lane: the most tasks outside the urgent bands that run at once (0: any)."""
    extra: dict[str, str] = field(default_factory=dict)


JVM_NOTICES = (b"WARNING: Using incubator modules: jdk.incubator.vector",)
"""What the JVM prints on every start in normal operation (Spark's launcher adds the incubating
vector module); dropped from the JVM's stderr, everything else passes through."""


@contextlib.contextmanager
def _filtered_jvm_stderr() -> Iterator[None]:
    """The JVM that starts inside this block writes its stderr through a filter thread for its
    whole life; this process's own stderr is back to normal once the block ends."""
    read, write = os.pipe()
    saved = os.dup(2)
    sys.stderr.flush()
    os.dup2(write, 2)
    os.close(write)

    def forward() -> None:
        with os.fdopen(read, "rb") as lines, os.fdopen(os.dup(saved), "wb", buffering=0) as out:
            for line in lines:
                if not line.rstrip(b"\n").startswith(JVM_NOTICES):
                    out.write(line)

    threading.Thread(target=forward, name="sluice-jvm-stderr", daemon=True).start()
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def build_session(config: SessionConfig) -> Any:
    """Start (or reuse) the SparkSession for a pool."""
    from pyspark.sql import SparkSession

    config.workdir.mkdir(parents=True, exist_ok=True)
    allocation = config.workdir / "fairscheduler.xml"
    allocation.write_text(fairscheduler_xml(config.bands))
    os.environ.setdefault("PYSPARK_PIN_THREAD", "true")
    check_settings(config.extra)  # refused here, before any query starts
    lane = lane_conf(config.bands, config.bulk_tasks) if config.urgent_lane else {}
    if lane and not config.master.startswith("local[") and _seconds(config.extra.get(WARMUP_CONF, "0")) > 0:
        lane |= EXCLUDE_LISTS
    jvm_options = LANE_OPTIONS if lane else ""
    builder = (
        SparkSession.builder.master(config.master)
        .appName(config.app_name)
        .config("spark.scheduler.mode", config.scheduling)
        .config("spark.scheduler.allocation.file", str(allocation))
        .config("spark.sql.shuffle.partitions", str(config.shuffle_partitions))
        .config("spark.driver.memory", config.driver_memory)
        .config("spark.driver.extraJavaOptions",
                " ".join(filter(None, ["-Xss16m", f"-Dlog4j2.configurationFile=file:{LOG4J2}", JIT_OPTIONS[driver_jit()],
                                       DRIVER_GC_OPTIONS[driver_gc(config.extra)], jvm_options])))
        .config(DRIVER_GC_CONF, driver_gc(config.extra))
        .config("spark.executor.extraJavaOptions",
                " ".join(filter(None, [f"-Dlog4j2.configurationFile=file:{LOG4J2}", jvm_options,
                                       EXECUTOR_JIT_OPTIONS[executor_jit(config.extra)]])))
        .config("spark.ui.enabled", "true")
        .config("spark.ui.showConsoleProgress", "false")
        # the stage poller reads completed stages every few seconds: keep the list short (cheap to serve)
        .config("spark.ui.retainedStages", "300")
        .config("spark.ui.retainedJobs", "300")
        .config("spark.sql.streaming.stopTimeout", "30s")
        .config("spark.sql.adaptive.enabled", "false")
        .config("spark.sql.codegen.cache.maxEntries", str(CODEGEN_CACHE_ENTRIES))
        .config("spark.sql.streaming.ui.enabled", STREAMING_UI)
        .config("spark.sql.warehouse.dir", str(config.workdir / "warehouse"))
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
    )
    if config.ui_port:
        builder = builder.config("spark.ui.port", str(config.ui_port))
    baked = kafka_jars() if config.kafka else []
    if baked:
        builder = builder.config("spark.jars", ",".join(str(jar) for jar in baked))
    elif config.kafka:
        ivy = Path.home() / ".cache" / "sluice" / "ivy"
        builder = (builder.config("spark.jars.packages", kafka_package())
                   .config("spark.jars.excludes", ",".join(SHIPPED_WITH_PYSPARK))
                   .config("spark.jars.ivy", str(ivy))
                   .config("spark.jars.ivySettings", str(ivy_settings(ivy))))
    executors = {} if config.master.startswith("local[") else DECOMMISSION
    if config.master.startswith("local-cluster["):  # the executor's heap within its worker's memory
        executors = {"spark.executor.memory": LOCAL_CLUSTER_EXECUTOR_MEMORY} | executors
    for key, value in (local_files(config.extra) | executors | jvm_sink.session_conf() | lane | config.extra).items():
        builder = builder.config(key, value)
    if SparkSession.getActiveSession() is None and not _jvm_running():
        with _filtered_jvm_stderr():
            spark = builder.getOrCreate()
    else:
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
