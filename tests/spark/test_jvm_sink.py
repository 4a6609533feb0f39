"""Sluice's JVM sink (`runtime/jvm_sink.py`, `runtime/java/`): noop and Kafka queries written by
Spark in the batch's one plan, gated and measured inside that write, on a real local Spark."""

from __future__ import annotations

import json
import re
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from sluice.runtime import jvm_sink
from sluice.runtime.jvm_sink import SinkMetric
from sluice.scheduler.core import Scheduler
from sluice.scheduler.local import LocalScheduler
from sluice.testing.waiting import wait_for

from .test_runtime import files_source, iso, query, write_rows

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _reports(hosted: Any) -> list[dict[str, str]]:
    """The sink's report of every batch Spark still remembers (its progress's sink.metrics)."""
    return [dict(p.sink.metrics) for p in hosted.handle.recentProgress if SinkMetric.COMMITTED in (p.sink.metrics or {})]


def test_the_batch_id_key_is_spark_s(spark: Any) -> None:
    """Spark internal (`BatchIds.java`): the local property MicroBatchExecution names each batch
    with. An upgrade that renames it fails here, not as gates asked for batch -1."""
    assert jvm_sink.loaded(spark), "the session started without Sluice's sink on its class path"
    spark_key = spark._jvm.org.apache.spark.sql.execution.streaming.runtime.MicroBatchExecution.BATCH_ID_KEY()
    assert jvm_sink.batch_id_key(spark) == spark_key


def test_ages_are_measured_inside_the_write_oldest_first(host_factory: Any, tmp_path: Path) -> None:
    """One batch of 40 rows produced 0.5 s apart: the runtime's latency figures, from the ages the
    sink's tasks noted, match the rows' own production times (oldest = the highest latency)."""
    data = tmp_path / "in"
    host = host_factory(None)
    hosted = host.add(query("ages", "t", files_source(data), [{"select": ["id", "produced_at"]}],
                            sink={"type": "noop"}, sla="60s"))
    assert hosted.phase == "Running", hosted.message
    t0 = time.time()
    write_rows(data, "all.json", [{"id": k, "user": "u", "amount": 1.0, "produced_at": iso(t0 - 0.5 * k)}
                                  for k in range(40)])
    wait_for(lambda: hosted.output_rows == 40, 60, "the batch's progress")
    assert hosted.handle.lastProgress["sink"]["description"].startswith("sluice(")
    report = _reports(hosted)[-1]
    assert report[SinkMetric.ASKED] == report[SinkMetric.BATCH]  # the batch id the sink read is Spark's
    committed = int(report[SinkMetric.COMMITTED]) / 1000
    newest, oldest = committed - iso_time(t0), committed - iso_time(t0 - 19.5)
    status = host.status("t/ages")
    assert status.output_rows == 40 and status.batches == 1
    # the oldest and newest rows are exact (the sink keeps each task's minimum and maximum); the
    # median is within the histogram's 1% of its age
    assert status.max_ms is not None and abs(status.max_ms / 1000 - oldest) < 0.005
    assert status.p50_ms is not None
    middle = (newest + oldest) / 2
    assert abs(status.p50_ms / 1000 - middle) <= 0.01 * middle + 0.5, (status.p50_ms, middle)


def test_each_commit_reports_the_stream_thread_s_cpu_and_the_host_takes_the_difference(host_factory: Any,
                                                                                        tmp_path: Path) -> None:
    """The driver's work on the CPU (`SinkMetric.THREAD_CPU`): the stream thread's CPU time at each
    commit, growing from one batch to the next; the host keeps a batch's share (its commit's less
    the one before) on its timeline, which the work fit reads as `driver_cpu`."""
    data = tmp_path / "in"
    host = host_factory(None)
    hosted = host.add(query("cpu", "t", files_source(data), [{"select": ["id", "produced_at"]}],
                            sink={"type": "noop"}, sla="60s"))
    assert hosted.phase == "Running", hosted.message
    for batch in range(3):
        write_rows(data, f"{batch}.json", [{"id": k, "user": "u", "amount": 1.0, "produced_at": iso(time.time())}
                                           for k in range(10)])
        wait_for(lambda b=batch: hosted.output_rows == 10 * (b + 1), 60, f"batch {batch}'s progress")
    reports = _reports(hosted)
    cpu = [int(r[SinkMetric.THREAD_CPU]) for r in reports]
    assert len(cpu) == 3 and 0 < cpu[0] < cpu[1] < cpu[2], cpu  # nanoseconds, cumulative on one thread
    timelines = [hosted.timelines[int(r[SinkMetric.BATCH])] for r in reports]
    assert timelines[0].driver_cpu is None  # no commit before the first on this thread
    assert [t.driver_cpu for t in timelines[1:]] == pytest.approx([(cpu[1] - cpu[0]) / 1e9, (cpu[2] - cpu[1]) / 1e9])


def iso_time(t: float) -> float:
    """A production time as the rows carry it (`iso` keeps milliseconds)."""
    return int(t * 1000) / 1000


def test_gated_batches_run_in_their_band_named_for_the_stage_poller(spark: Any, host_factory: Any) -> None:
    """Two noop queries under cameo: the sink asks the gate before each batch, the batch's jobs run
    in the granted FAIR pool under the runtime's job description, and each batch frees its slot
    when its progress arrives."""
    core = Scheduler("cameo", capacity=2)
    host = host_factory(LocalScheduler(core))
    urgent = host.add(query("urgent", "pay", {"type": "rate", "rowsPerSecond": 50}, [{"filter": "value >= 0"}],
                            sink={"type": "noop"}, sla="500ms", critical=True))
    bulk = host.add(query("bulk", "ana", {"type": "rate", "rowsPerSecond": 50}, [{"filter": "value >= 0"}],
                          sink={"type": "noop"}, sla="10m"))
    wait_for(lambda: urgent.batches >= 4 and bulk.batches >= 4, 90, "batches of both queries")
    assert set(urgent.band_log.values()) == {"band0"} and max(bulk.band_log.values()) >= "band6"
    for hosted in (urgent, bulk):  # every reported batch ran in the pool its grant named
        for report in _reports(hosted):
            assert report[SinkMetric.ASKED] == report[SinkMetric.BATCH]
            batch = int(report[SinkMetric.BATCH])
            if batch in hosted.band_log:
                assert report[SinkMetric.POOL] == hosted.band_log[batch]
    base, app = spark.sparkContext.uiWebUrl, spark.sparkContext.applicationId
    stages = json.loads(urllib.request.urlopen(f"{base}/api/v1/applications/{app}/stages", timeout=10).read())
    seen = 0
    for stage in stages:
        match = re.search(r"sluice (\S+) batch (\d+)", stage.get("description") or "")
        hosted = {"pay/urgent": urgent, "ana/bulk": bulk}.get(match.group(1)) if match else None
        if match and hosted is not None and int(match.group(2)) in hosted.band_log:
            assert stage["schedulingPool"] == hosted.band_log[int(match.group(2))]
            seen += 1
    assert seen >= 4
    wait_for(lambda: urgent.stages and bulk.stages, 15, "stage metrics per query")
    host.remove("pay/urgent")
    host.remove("ana/bulk")
    assert core.in_flight == 0 and not urgent.asked and not bulk.asked


def test_a_query_that_gives_no_timestamp_column_last_fails_alone(spark: Any, tmp_path: Path) -> None:
    """The sink refuses rows without `_sluice_ts` last, in one sentence, before any batch runs."""
    frame = spark.readStream.format("rate").option("rowsPerSecond", 1).load()
    handle = (frame.writeStream.format(jvm_sink.PROVIDER).option("sluice.delegate", "noop")
              .option("checkpointLocation", str(tmp_path / "ck")).start())
    with pytest.raises(Exception, match="the rows' last column must be _sluice_ts"):
        handle.awaitTermination(60)


LANE_SCRIPT = """
import json, sys, threading, time
from pathlib import Path
from sluice.runtime import jvm_sink
from sluice.runtime.host import QueryHost
from sluice.runtime.session import SessionConfig, build_session
from sluice.scheduler.core import Scheduler
from sluice.scheduler.local import LocalScheduler
from tests.spark.test_runtime import query

work = Path(sys.argv[1])
spark = build_session(SessionConfig(master="local[8]", urgent_lane=True, bulk_tasks=2, workdir=work))
sc, jvm = spark.sparkContext, spark.sparkContext._jvm
lane = jvm.dev.sluice.sink.UrgentLane
out = {"status": jvm_sink.lane_status(spark), "tasks": {}}


def run(pool, tasks, ms):
    # per task: when it ended (epoch ms) and its thread's nice value, read inside the task
    sc.setLocalProperty("spark.scheduler.pool", pool)
    rows = spark.range(0, tasks, 1, tasks).selectExpr(
        f"reflect('java.lang.Thread', 'sleep', cast({ms} as long)) AS slept",
        "reflect('dev.sluice.sink.UrgentLane', 'niceOfTask', id) AS nice",
        "reflect('java.lang.System', 'currentTimeMillis') AS ended").collect()
    sc.setLocalProperty("spark.scheduler.pool", None)
    return [(int(r.ended) / 1000, int(r.nice)) for r in rows]


for pool in ("band7", "band6", "band5", "band0", "default", None):
    out["tasks"][str(pool)] = sorted({nice for _, nice in run(pool, 4, 0)})
def behind_band7(waiting, pool, ms):
    # six 0.6 s band7 tasks (two at a time); once `waiting` of them wait for a turn, two tasks of
    # `pool` run: (band7 end times, the other job's end times, tasks waiting when it was sent)
    bulk = []
    worker = threading.Thread(target=lambda: bulk.extend(run("band7", 6, 600)))
    worker.start()
    deadline = time.time() + 30
    while lane.bulkWaiting() < waiting and time.time() < deadline:
        time.sleep(0.01)
    queued = lane.bulkWaiting()
    other = run(pool, 2, ms)
    worker.join()
    return sorted(t for t, _ in bulk), sorted(t for t, _ in other), queued


out["bulk_ends"], out["urgent_ends"], out["waiting"] = behind_band7(1, "band0", 0)
# a batch's bulk tasks' waits for a turn, summed under its jobs' description for its commit
for pool, tag in (("band7", "sluice t/turns batch 7"), ("band0", "sluice t/other batch 7")):
    sc.setLocalProperty("spark.job.description", tag)
    run(pool, 6, 300)
    sc.setLocalProperty("spark.job.description", None)
    out.setdefault("turn_waits", []).extend([lane.takeTurnWait(tag), lane.takeTurnWait(tag)])
out["band7_ends"], out["band6_ends"], _ = behind_band7(4, "band6", 100)
host = QueryHost(spark, work / "checkpoints", LocalScheduler(Scheduler("cameo", capacity=4)))
rate = {"type": "rate", "rowsPerSecond": 20}
for name, sla in (("urgent", "1s"), ("bulk", "10m")):
    host.add(query(name, "t", rate, [{"filter": "value >= 0"}], sink={"type": "noop"}, sla=sla,
                   critical=name == "urgent"))
deadline = time.time() + 90
while time.time() < deadline and min(h.batches for h in host.queries.values()) < 4:
    time.sleep(0.5)
out["bands"] = {key: sorted(set(h.band_log.values())) for key, h in host.queries.items()}
out["batch_turn_waits"] = [t.turn_wait for t in host.queries["t/bulk"].timelines.values() if t.committed]
threads = jvm.java.lang.Thread.getAllStackTraces().keySet().toArray()
out["stream_threads"] = {t.getName().split(" [")[0]: t.getPriority() for t in threads
                         if t.getName().startswith("stream execution thread for")}
host.stop_all()
spark.stop()
print("RESULT " + json.dumps(out))
"""


def test_the_urgent_lane_raises_urgent_tasks_and_bulk_tasks_take_turns(tmp_path: Path) -> None:
    """Spark internals (`UrgentLane.java`): an executor plugin's `onTaskStart` runs on the task's
    own thread with its `TaskContext` (and the job's local properties) set, before the task's
    work. In a JVM of its own with the urgent lane (8 slots, bulk tasks 2 at a time):
    - a task of an urgent band runs at nice -5 as the kernel reports it (`/proc/thread-self/stat`,
      read inside the task), every other task at 0;
    - six bulk tasks of 0.6 s end two by two (with eight slots and no turns they would end
      together), and two urgent tasks sent while bulk ones wait for their turn end before the
      bulk job's last pair;
    - two tasks of band6 sent while four of band7 wait for their turn get the next turns (they
      end before the band7 job's last pair; in arrival order they would end after it);
    - six bulk tasks of 0.3 s of one batch (its jobs' description) wait for their turns 0.3 s
      (two), 0.6 s (two): 1.8 s in all, taken once by its commit (`takeTurnWait`, then 0); an
      urgent batch's never wait; a gated bulk query's commits report each batch's wait;
    - an urgent query's stream thread plans its next batch at Java priority 10, a bulk one's at 5.
    An upgrade that changes the plugin's calls fails here. (Tests run as root here; without
    CAP_SYS_NICE the lane says its priorities are off.)"""
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, "-c", LANE_SCRIPT, str(tmp_path)], capture_output=True, text=True,
                          timeout=240, cwd=root, env={**os.environ, "PYTHONPATH": str(root)})
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    out = json.loads(lines[-1].removeprefix("RESULT "))
    assert out["status"] == "on"
    assert out["tasks"] == {"band7": [0], "band6": [0], "band5": [-5], "band0": [-5], "default": [0], "None": [0]}
    ends = out["bulk_ends"]
    assert len(ends) == 6 and out["waiting"] >= 1
    assert ends[2] - ends[1] >= 0.5 and ends[4] - ends[3] >= 0.5, ends  # two at a time, 0.6 s each
    assert max(out["urgent_ends"]) < ends[4], (out["urgent_ends"], ends)
    assert len(out["band7_ends"]) == 6 and max(out["band6_ends"]) < out["band7_ends"][4], out
    assert out["bands"]["t/urgent"] and max(out["bands"]["t/urgent"]) <= "band5"
    assert out["bands"]["t/bulk"] and min(out["bands"]["t/bulk"]) >= "band6"
    assert sorted(out["stream_threads"].values()) == [5, 10], out["stream_threads"]
    bulk_wait, again, urgent_wait, _ = out["turn_waits"]
    assert 1.5e9 <= bulk_wait <= 3.0e9 and again == 0 and urgent_wait == 0, out["turn_waits"]
    waits = out["batch_turn_waits"]
    assert waits and all(w is not None and w >= 0 for w in waits), waits


@pytest.mark.parametrize(("capability", "mechanism"), [(True, "threadNice"), (False, "none")])
def test_an_executor_jvm_finds_the_lever_the_kernel_allows(capability: bool, mechanism: str) -> None:
    """`UrgentLane.trial` in a JVM started with the lane's options: as root, a thread rises to nice
    -5 and comes back; without CAP_SYS_NICE, as in a pool pod, and with this machine's RLIMIT_NICE
    (0 unless the node raises it), it may neither rise nor come back from nice 4, and every
    priority is left alone. (`tests/unit/test_priority.py` tries RLIMIT_NICE 20 and 25 where the
    machine lets a process be given them.) A JDK or plugin change that moves either fails here."""
    import os
    import resource
    import shutil
    import subprocess

    import pyspark

    from sluice.runtime.session import LANE_OPTIONS

    if os.geteuid() != 0:
        pytest.fail("run as root, as make test does: the case with the capability needs it")
    soft = resource.getrlimit(resource.RLIMIT_NICE)[0]
    if soft >= 20:
        pytest.fail(f"this test expects the kernel's default RLIMIT_NICE (0); this process has {soft}")
    jar = jvm_sink.jar()
    assert jar is not None, "the Sluice sink jar did not build"
    java = str(Path(os.environ["JAVA_HOME"]) / "bin" / "java") if os.environ.get("JAVA_HOME") else shutil.which("java")
    assert java is not None
    classpath = f"{jar}:{Path(pyspark.__file__).parent / 'jars'}/*"
    drop = [] if capability else ["setpriv", "--bounding-set=-sys_nice", "--inh-caps=-sys_nice", "--"]
    proc = subprocess.run([*drop, java, *LANE_OPTIONS.split(), "-cp", classpath, "dev.sluice.sink.UrgentLane"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    said = proc.stdout.strip().splitlines()[-1]
    assert said.split(":")[0] == mechanism, said
    if not capability:
        assert "runs at nice 0, not -5" in said and "not 0 (it needs RLIMIT_NICE 20)" in said, said


RESERVE_SCRIPT = """
import json, sys, threading, time
from pathlib import Path
from sluice.api.constants import URGENT_RESERVE_CONF
from sluice.runtime import jvm_sink
from sluice.runtime.session import SessionConfig, build_session

spark = build_session(SessionConfig(master="local[8]", urgent_lane=True, bulk_tasks=2, workdir=Path(sys.argv[1]),
                                    extra={URGENT_RESERVE_CONF: "1"}))
sc = spark.sparkContext
lane = sc._jvm.dev.sluice.sink.UrgentLane
out = {"status": jvm_sink.lane_status(spark)}


def run(pool, tasks, ms):
    sc.setLocalProperty("spark.scheduler.pool", pool)
    spark.range(0, tasks, 1, tasks).selectExpr(f"reflect('java.lang.Thread', 'sleep', cast({ms} as long))").collect()
    sc.setLocalProperty("spark.scheduler.pool", None)


run("band7", 4, 0)  # the JVM's lane started, both bands' jobs planned once
run("band0", 1, 0)
time.sleep(1.5)  # the urgent task's hold over
# twenty 0.5 s bulk tasks, two turns; once two run, one urgent task of 1.2 s: the running bulk
# and urgent tasks as the turns count them, sampled every 10 ms
worker = threading.Thread(target=run, args=("band7", 20, 500))
worker.start()
while lane.bulkRunning() < 2:
    time.sleep(0.005)
samples = []
stop = threading.Event()


def sample():
    while not stop.is_set():
        samples.append((time.time(), lane.bulkRunning(), lane.urgentRunning()))
        time.sleep(0.01)


sampler = threading.Thread(target=sample)
sampler.start()
run("band0", 1, 1200)
worker.join()
stop.set()
sampler.join()
out["samples"] = samples
spark.stop()
print("RESULT " + json.dumps(out))
"""


def test_without_thread_priorities_an_executor_holds_a_bulk_turn_back_while_urgent_tasks_run(
        tmp_path: Path) -> None:
    """`UrgentLane` with `spark.sluice.urgentReserve` 1 in a JVM that may not change a thread's
    priority (CAP_SYS_NICE dropped, as in a pool pod): two bulk turns. Once an urgent task starts,
    no new bulk task takes the second turn: from when the two running bulk tasks (0.5 s each) have
    ended until a second after the urgent one (1.2 s) ends, one bulk task runs at a time; once that
    second has passed, two run again. Times come from the turns' own counts, sampled every 10 ms.
    (As root, with priorities, nothing is held back: the lane test above runs two at a time beside
    urgent tasks.)"""
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    drop = ["setpriv", "--bounding-set=-sys_nice", "--inh-caps=-sys_nice", "--"]
    proc = subprocess.run([*drop, sys.executable, "-c", RESERVE_SCRIPT, str(tmp_path)], capture_output=True,
                          text=True, timeout=240, cwd=root, env={**os.environ, "PYTHONPATH": str(root)})
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    out = json.loads(lines[-1].removeprefix("RESULT "))
    assert out["status"] != "on" and "runs at nice 0, not -5" in out["status"], out["status"]
    samples = out["samples"]
    urgent = [t for t, _, running in samples if running > 0]
    assert urgent and max(urgent) - min(urgent) >= 1.0, urgent  # the urgent task ran 1.2 s
    began, ended = min(urgent), max(urgent)
    held = [bulk for t, bulk, _ in samples if began + 0.6 <= t <= ended + 0.8]
    assert held and max(held) == 1, held
    after = [bulk for t, bulk, _ in samples if t >= ended + 1.2]
    assert 2 in after, after
