"""The runtime on real Spark (local mode): builder, gate, bands, fail-open, latency, restart, failures."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sluice.api.constants import BANDS, EXECUTOR_JIT_CONF
from sluice.api.query import StreamingQuery, Trigger
from sluice.api.wire import QueryStatus
from sluice.runtime import jvm_sink
from sluice.runtime.host import QueryHost
from sluice.runtime.priority import BULK_NICE
from sluice.runtime.session import CHECKPOINT_MANAGER, EXECUTOR_JIT_ENV, JIT_ENV, driver_jit
from sluice.scheduler import intervals
from sluice.scheduler.bands import band_for_slack, band_name
from sluice.scheduler.client import SchedulerClient
from sluice.scheduler.core import Completion, Scheduler
from sluice.scheduler.local import LocalScheduler
from sluice.scheduler.policies import BatchRequest, QuerySpec
from sluice.testing.waiting import wait_for

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SCHEMA = "id INT, user STRING, amount DOUBLE, produced_at TIMESTAMP"


def query(name: str, namespace: str, source: dict[str, Any], pipeline: list[dict[str, Any]],
          sink: dict[str, Any] | None = None, sla: str = "2s", critical: bool = False) -> StreamingQuery:
    return StreamingQuery.model_validate({
        "apiVersion": "sluice.dev/v1alpha1", "kind": "StreamingQuery",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"pool": "test", "source": source, "pipeline": pipeline, "sink": sink or {"type": "memory"},
                 "sla": {"latencyTarget": sla, "critical": critical}, "trigger": {"interval": "200ms"}, "resources": {"shufflePartitions": 2}},
    })


def files_source(path: Path) -> dict[str, Any]:
    path.mkdir(parents=True, exist_ok=True)  # Spark's file source needs its directory to exist
    return {"type": "files", "format": "json", "path": str(path), "schema": SCHEMA, "eventTime": "produced_at"}


def write_rows(folder: Path, name: str, rows: list[dict[str, Any]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder.parent / f".{name}.tmp"
    tmp.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    tmp.rename(folder / name)  # atomic: Spark never sees half a file


def iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int((t % 1) * 1000):03d}Z"


def test_builder_runs_every_step_kind(host_factory: Any, tmp_path: Path) -> None:
    data = tmp_path / "in"
    now = time.time()
    t0 = (int(now) // 10) * 10 - 60  # a window well in the past
    rows = [{"id": i, "user": f"u{i % 2}", "amount": float(i), "produced_at": iso(t0 + i * 0.1)} for i in range(20)]
    write_rows(data, "a.json", rows)
    stateless = query("shape", "t1", files_source(data), [
        {"filter": "amount >= 10"},
        {"withColumn": {"name": "doubled", "expr": "amount * 2"}},
        {"select": ["id", "upper(user) AS user", "doubled"]},
    ])
    windowed = query("agg", "t2", files_source(data), [
        {"watermark": {"column": "produced_at", "delay": "1s"}},
        {"window": {"column": "produced_at", "size": "10s"}},
        {"groupBy": ["window", "user"]},
        {"aggregate": [
            {"fn": "count", "name": "n"}, {"fn": "sum", "column": "amount"}, {"fn": "avg", "column": "amount"},
            {"fn": "min", "column": "amount"}, {"fn": "max", "column": "amount"},
            {"fn": "approx_percentile", "column": "amount", "percentile": 0.5, "name": "median"},
        ]},
    ])
    host = host_factory(LocalScheduler(Scheduler("cameo", capacity=2)))
    a, b = host.add(stateless), host.add(windowed)
    wait_for(lambda: len(a.memory) == 10, what="the filtered rows")
    assert sorted(r["id"] for r in a.memory) == list(range(10, 20))
    assert {r["user"] for r in a.memory} == {"U0", "U1"}
    assert all(r["doubled"] == 2 * r["id"] for r in a.memory)
    assert set(a.memory[0]) == {"id", "user", "doubled"}  # the hidden latency column never reaches the sink
    # a later event moves the watermark past the window: it closes and is emitted once (append mode)
    write_rows(data, "b.json", [{"id": 99, "user": "u9", "amount": 0.0, "produced_at": iso(t0 + 30)}])
    wait_for(lambda: len(b.memory) >= 2, what="the closed window")
    by_user = {r["user"]: r for r in b.memory if r["user"] in ("u0", "u1")}
    assert by_user["u0"]["n"] == 10 and by_user["u0"]["sum_amount"] == sum(range(0, 20, 2))
    assert by_user["u1"]["min_amount"] == 1.0 and by_user["u1"]["max_amount"] == 19.0
    assert by_user["u1"]["avg_amount"] == pytest.approx(10.0)
    assert by_user["u0"]["median"] in (8.0, 10.0)


def test_a_stateful_query_runs_its_steps_on_synthetic_rows_before_its_stream_starts(
        spark: Any, host_factory: Any, tmp_path: Path) -> None:
    """`pipeline.warm_up`: a static frame shaped like the source (its columns, values of their
    types, times of the last `rows` milliseconds) goes through the query's own steps once; the
    host does it for a stateful query before its stream first starts, not for a stateless one."""
    from sluice.runtime.pipeline import TS, synthetic, warm_shape, warm_up

    kafka = query("k", "t", {"type": "kafka", "bootstrapServers": "127.0.0.1:9", "topic": "x",
                             "schema": "key STRING, seq BIGINT, produced_at TIMESTAMP, amount DOUBLE, tags ARRAY<STRING>"},
                  [{"filter": "amount > 10"}])
    started = time.time()
    rows = synthetic(spark, kafka, 50).collect()
    assert len(rows) == 50 and list(rows[0].asDict()) == ["key", "seq", "produced_at", "amount", "tags", TS]
    assert {r.key for r in rows} == {str(i) for i in range(50)} and all(r.tags is None for r in rows)
    assert all(started - 5 < r.produced_at.timestamp() <= time.time() + 1 for r in rows)
    data = tmp_path / "in"
    windowed = query("agg", "t", files_source(data), [
        {"watermark": {"column": "produced_at", "delay": "1s"}},
        {"window": {"column": "produced_at", "size": "10s"}},
        {"groupBy": ["window", "user"]},
        {"aggregate": [{"fn": "count", "name": "n"},
                       {"fn": "approx_percentile", "column": "amount", "percentile": 0.99, "name": "p99"}]},
    ])
    jobs = len(spark.sparkContext.statusTracker().getJobIdsForGroup(None))
    spark.sparkContext.setLocalProperty("spark.scheduler.pool", "mine")
    warm_up(spark, windowed, "band7", rows=500)
    assert len(spark.sparkContext.statusTracker().getJobIdsForGroup(None)) > jobs  # it ran in Spark
    assert spark.sparkContext.getLocalProperty("spark.scheduler.pool") == "mine"  # the thread's pool is back
    spark.sparkContext.setLocalProperty("spark.scheduler.pool", None)
    host = host_factory(None)
    host.add(windowed)
    host.add(query("plain", "t", files_source(data), [{"filter": "amount > 1"}]))
    assert host.warmer._warmed == {warm_shape(windowed)}
    assert host.status("t/agg").phase == "Running" and host.status("t/plain").phase == "Running"
    # another tenant's copy of the pipeline is warm already; a different window is not
    host.add(query("agg", "u", files_source(data), windowed.model_dump(mode="json", by_alias=True)["spec"]["pipeline"]))
    assert len(host.warmer._warmed) == 1
    wider = windowed.model_dump(mode="json", by_alias=True)["spec"]["pipeline"]
    wider[1]["window"]["size"] = "20s"
    host.add(query("wide", "u", files_source(data), wider))
    assert len(host.warmer._warmed) == 2


def test_batches_run_in_the_band_the_scheduler_chose(spark: Any, host_factory: Any, tmp_path: Path) -> None:
    urgent_in, bulk_in = tmp_path / "urgent", tmp_path / "bulk"
    host = host_factory(LocalScheduler(Scheduler("cameo", capacity=2)))
    urgent = host.add(query("urgent", "pay", files_source(urgent_in), [{"filter": "amount > 0"}], sla="100ms",
                            critical=True))
    bulk = host.add(query("bulk", "ana", files_source(bulk_in), [{"filter": "amount > 0"}], sla="10m"))
    for i in range(3):
        now = time.time()
        write_rows(urgent_in, f"{i}.json", [{"id": i, "user": "u", "amount": 1.0, "produced_at": iso(now)}])
        write_rows(bulk_in, f"{i}.json", [{"id": i, "user": "u", "amount": 1.0, "produced_at": iso(now)}])
        time.sleep(1.0)
    wait_for(lambda: len(urgent.memory) == 3 and len(bulk.memory) == 3, what="both queries' rows")
    # the tight SLA lands in the most urgent band, the loose one in a low band
    assert set(urgent.band_log.values()) == {"band0"}
    assert max(bulk.band_log.values()) >= "band6"
    # each band is the one the slack recorded with its grant earns (what `--timeline` reports)
    for hosted in (urgent, bulk):
        assert set(hosted.grant_log) == set(hosted.band_log)
        for batch, (granted, slack, waited) in hosted.grant_log.items():
            assert hosted.band_log[batch] == band_name(band_for_slack(slack, BANDS))
            assert waited >= 0 and abs(granted - time.time()) < 600
    base = spark.sparkContext.uiWebUrl
    app = spark.sparkContext.applicationId
    stages = json.loads(urllib.request.urlopen(f"{base}/api/v1/applications/{app}/stages", timeout=10).read())
    seen = set()
    for stage in stages:
        match = re.search(r"sluice (\S+) batch (\d+)", stage.get("description") or "")
        if not match:
            continue
        hosted = {"pay/urgent": urgent, "ana/bulk": bulk}.get(match.group(1))
        if hosted is None or int(match.group(2)) not in hosted.band_log:
            continue
        assert stage["schedulingPool"] == hosted.band_log[int(match.group(2))]
        seen.add((match.group(1), int(match.group(2))))
    # Spark's status API shows the stages of every batch in its granted pool
    assert seen == {("pay/urgent", b) for b in urgent.band_log} | {("ana/bulk", b) for b in bulk.band_log}
    # the stage poller attributes the same stages' task metrics to the queries
    wait_for(lambda: urgent.stages and bulk.stages, 15, "stage metrics per query")
    assert all(seconds >= 0 for seconds in urgent.stages.values())
    assert host.status("pay/urgent").stages.batch in urgent.band_log


def test_a_batch_frees_its_slot_when_it_is_done_not_at_the_next_batch(host_factory: Any) -> None:
    """A query batching every 30 s gives its scheduler slot back within seconds of its batch
    (when the batch's progress arrives), not 30 s later with its next ask: with one slot, every
    other query's batches would wait for it (the density benchmark's gate waits)."""
    core = Scheduler("cameo", capacity=1)
    host = host_factory(LocalScheduler(core))
    manifest = query("slow", "t1", {"type": "rate", "rowsPerSecond": 5}, [{"filter": "value >= 0"}],
                     {"type": "noop"}, sla="120s").model_dump(mode="json", exclude_none=True)
    manifest["spec"]["trigger"] = {"interval": "30s"}
    host.add(StreamingQuery.model_validate(manifest))
    wait_for(lambda: host.status("t1/slow").batches >= 1, 60, "the first batch")
    wait_for(lambda: core.in_flight == 0, 10, "the finished batch's slot to be free", every=0.05)
    assert host.status("t1/slow").batches == 1  # freed by this batch, well before the next one


def test_gate_delays_a_stateful_batch_and_it_still_commits(host_factory: Any, tmp_path: Path) -> None:
    data = tmp_path / "in"
    core = Scheduler("cameo", capacity=1)
    gate = LocalScheduler(core)
    gate.register(QuerySpec("x/holder", "x", 60.0))
    holder = gate.dispatch(BatchRequest("x/holder", 1))  # occupies the only slot
    host = host_factory(gate)
    t0 = (int(time.time()) // 10) * 10 - 60
    hosted = host.add(query("agg", "t", files_source(data), [
        {"watermark": {"column": "produced_at", "delay": "1s"}},
        {"window": {"column": "produced_at", "size": "10s"}},
        {"groupBy": ["window"]}, {"aggregate": [{"fn": "count", "name": "n"}]},
    ]))
    write_rows(data, "a.json", [{"id": i, "user": "u", "amount": 1.0, "produced_at": iso(t0 + i)} for i in range(5)])
    time.sleep(3)
    assert hosted.batches == 0 and core.pending_count() == 1  # held at the gate, not skipped
    released = time.time()
    gate.complete("x/holder", [Completion("x/holder", holder.batch_id, seconds=0.1)])
    wait_for(lambda: hosted.batches >= 1, what="the delayed batch")
    assert time.time() - released < 30
    write_rows(data, "b.json", [{"id": 9, "user": "u", "amount": 1.0, "produced_at": iso(t0 + 30)}])
    wait_for(lambda: any(r["n"] == 5 for r in hosted.memory), what="the window after the delay")
    assert hosted.phase == "Running"


def _sidecar(port: int = 0) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-m", "sluice.scheduler", "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline() if proc.stdout else ""
    match = re.search(r"listening on (\S+)", line)
    assert match, line
    return proc, match.group(1)


@pytest.mark.chaos
def test_fail_open_when_the_scheduler_is_killed(host_factory: Any, tmp_path: Path) -> None:
    from prometheus_client import REGISTRY

    def fail_opens() -> float:
        return REGISTRY.get_sample_value("sluice_runtime_scheduler_fail_open_total") or 0.0

    data = tmp_path / "in"
    proc, url = _sidecar()
    try:
        host = host_factory(SchedulerClient(url, timeout=1.0))
        hosted = host.add(query("q", "t", files_source(data), [{"filter": "amount > 0"}]))
        write_rows(data, "0.json", [{"id": 0, "user": "u", "amount": 1.0, "produced_at": iso(time.time())}])
        wait_for(lambda: len(hosted.memory) == 1, what="a gated batch")
        assert host.status("t/q").scheduler == "gated"
        proc.kill()
        proc.wait(10)
        before = fail_opens()
        write_rows(data, "1.json", [{"id": 1, "user": "u", "amount": 1.0, "produced_at": iso(time.time())}])
        wait_for(lambda: len(hosted.memory) == 2, what="a batch after the scheduler died")
        assert host.status("t/q").scheduler == "fail-open" and fail_opens() > before  # in status and in metrics
        assert hosted.band_log[max(hosted.band_log)] == "default"
        # the sidecar comes back (its container restarts) knowing nothing: the runtime registers
        # the query again on its next batch, and batches are gated again
        proc, again = _sidecar(int(url.rsplit(":", 1)[1]))
        assert again == url
        write_rows(data, "2.json", [{"id": 2, "user": "u", "amount": 1.0, "produced_at": iso(time.time())}])
        wait_for(lambda: len(hosted.memory) == 3, what="a batch after the scheduler came back")
        assert host.status("t/q").scheduler == "gated"
        state = json.loads(urllib.request.urlopen(f"{url}/v1/state", timeout=5).read())
        assert "t/q" in state["queries"] and state["queries"]["t/q"]["grants"] >= 1
    finally:
        proc.kill()


def _visible_rows(hosted: Any, out: Path | None, read: set[Path]) -> list[dict[str, Any]]:
    """Rows the sink shows now: the memory sink's list, or the files sink's finished batch folders
    not in `read` (each folder is read once, so the watcher's own reading, which holds the GIL,
    does not grow with the batches and delay the runtime's stamps)."""
    if out is None:
        return list(hosted.memory)
    rows = []
    for done in out.glob("batch_id=*/_SUCCESS"):
        if done in read:
            continue
        read.add(done)
        for part in done.parent.glob("part-*.json"):
            rows += [json.loads(line) for line in part.read_text().splitlines() if line.strip()]
    return rows


@pytest.mark.parametrize("sink", ["memory", "files"])
def test_latency_matches_an_independent_measurement(host_factory: Any, tmp_path: Path, sink: str) -> None:
    """The memory sink is measured in Python; every other sink inside its own write (observe)."""
    data, out = tmp_path / "in", (tmp_path / "out" if sink == "files" else None)
    host = host_factory(LocalScheduler(Scheduler("cameo", capacity=2)))
    spec = {"type": "files", "format": "json", "path": str(out)} if out else None
    hosted = host.add(query("lat", "t", files_source(data), [{"select": ["id", "produced_at"]}], sink=spec))
    seen: dict[int, float] = {}

    def watch() -> None:  # the test's own clock: when does each row become visible at the sink?
        read: set[Path] = set()
        while len(seen) < 40:
            for row in _visible_rows(hosted, out, read):
                seen.setdefault(row["id"], time.time())
            time.sleep(0.01)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    produced: dict[int, float] = {}
    for i in range(40):
        produced[i] = time.time()
        write_rows(data, f"{i}.json", [{"id": i, "user": "u", "amount": 1.0, "produced_at": iso(produced[i])}])
        time.sleep(0.25 if i % 5 else 1.5)  # some quiet, some queued
    watcher.join(60)
    assert len(seen) == 40, f"only {len(seen)} of 40 rows reached the sink"
    independent = sorted(seen[i] - produced[i] for i in produced)
    # the latency of a batch is computed when its progress arrives, just after its commit
    wait_for(lambda: hosted.output_rows == 40, 10, "every batch's progress")
    status = host.status("t/lat")
    assert status.p50_ms is not None and status.max_ms is not None
    p50 = status.p50_ms / 1000
    ind_p50 = independent[len(independent) // 2]
    # the runtime measures at commit, the watcher a little later (it polls every 10 ms, and the
    # files watcher also reads what it found)
    assert ind_p50 - 0.35 <= p50 <= ind_p50 + 0.05, (p50, ind_p50)
    assert status.max_ms / 1000 <= independent[-1] + 0.05


def test_checkpoints_go_through_hadoop_s_filesystem_api_on_raw_local_files(spark: Any, tmp_path: Path) -> None:
    """Spark and Hadoop internals named in `session.RAW_LOCAL_FILES`: an upgrade that moves the
    checkpoint writer's class, or stops honouring the settings, fails here (the settings cut the
    processes Hadoop runs for each checkpoint file from about 20 to 4 a micro-batch; Sluice's
    writer, a subclass of Spark's, to none)."""
    conf = spark._jsparkSession.sessionState().newHadoopConf()
    path = spark._jvm.org.apache.hadoop.fs.Path(str(tmp_path))
    checkpointing = spark._jvm.org.apache.spark.sql.execution.streaming.checkpointing
    manager = checkpointing.CheckpointFileManager.create(path, conf)
    assert jvm_sink.loaded(spark), "Sluice's jar is not on the test session's class path"
    assert manager.getClass().getName() == jvm_sink.CHECKPOINT_MANAGER
    assert manager.getClass().getSuperclass().getName() == CHECKPOINT_MANAGER
    assert path.getFileSystem(conf).getClass().getName() == "org.apache.hadoop.fs.RawLocalFileSystem"


def _last_pid() -> int:
    return int(Path("/proc/sys/kernel/ns_last_pid").read_text())


def test_sluice_s_checkpoint_writer_writes_atomically_and_starts_no_process(spark: Any, tmp_path: Path) -> None:
    """`NioCheckpointFileManager`: the file appears whole under its name only when closed, a
    cancelled one leaves nothing (not even its temporary file), an existing one is kept unless
    overwriting is asked, and 40 writes start no process, where Spark's own writer on the same filesystem starts one a file (Hadoop's
    `chmod`; the kernel's last PID counts them, with the JVM's threads)."""
    from py4j.protocol import Py4JJavaError

    conf = spark._jsparkSession.sessionState().newHadoopConf()
    jvm = spark._jvm
    ours = jvm.dev.sluice.checkpoint.NioCheckpointFileManager(jvm.org.apache.hadoop.fs.Path(str(tmp_path / "a")), conf)
    spark_s = jvm.org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager(
        jvm.org.apache.hadoop.fs.Path(str(tmp_path / "b")), conf)

    def write(manager: Any, name: str, body: bytes, overwrite: bool = False) -> Any:
        stream = manager.createAtomic(jvm.org.apache.hadoop.fs.Path(name), overwrite)
        stream.write(body)
        return stream

    target = tmp_path / "a" / "sub" / "0"
    stream = write(ours, str(target), b"first")
    assert not target.exists()
    stream.close()
    assert target.read_bytes() == b"first"
    with pytest.raises(Py4JJavaError, match="FileAlreadyExistsException"):
        write(ours, str(target), b"second").close()
    assert target.read_bytes() == b"first"
    write(ours, str(target), b"third", overwrite=True).close()
    assert target.read_bytes() == b"third"
    write(ours, str(tmp_path / "a" / "cancelled" / "0"), b"never").cancel()
    assert list((tmp_path / "a" / "cancelled").iterdir()) == []  # no temporary file left either
    assert oct(target.stat().st_mode & 0o777) == oct(0o666 & ~_umask())

    def processes(manager: Any, folder: str) -> int:
        before = _last_pid()
        for i in range(40):
            write(manager, str(tmp_path / folder / "many" / str(i)), b"x").close()
        return _last_pid() - before

    assert processes(spark_s, "b") >= 40  # the measure sees Hadoop's chmods
    assert processes(ours, "a") < 10


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_batch_costs_spark_defaults_side_reverts_settings_sluice_really_changes(spark: Any) -> None:
    """`sluice bench batch-cost` compares Sluice's session with Spark's defaults of the settings
    Sluice changes for cheaper batches (`batch_cost.SPARK_DEFAULTS`): each one is set otherwise in
    Sluice's session, and each class it names is one this Spark has (an upgrade that moves one fails here)."""
    from sluice.bench.batch_cost import SPARK_DEFAULTS

    for key, default in SPARK_DEFAULTS.items():
        assert spark.conf.get(key, None) not in (None, default), key
        if default.startswith("org.apache."):
            assert spark._jvm.java.lang.Class.forName(default).getName() == default


def test_hadoop_s_local_filesystem_is_not_the_raw_one_so_rocksdb_keeps_hadoop_s_default(spark: Any) -> None:
    """Why `session.local_files` leaves `fs.file.impl` alone for the RocksDB state store: Hadoop's
    `FileSystem.getLocal` (which RocksDB's state commit takes) casts the local filesystem to
    `LocalFileSystem`, and the raw one is not one. If an upgrade stops casting, this fails and
    the exception can go."""
    from py4j.protocol import Py4JJavaError

    jvm = spark._jvm
    conf = jvm.org.apache.hadoop.conf.Configuration()
    conf.set("fs.file.impl", "org.apache.hadoop.fs.RawLocalFileSystem")
    conf.set("fs.file.impl.disable.cache", "true")
    with pytest.raises(Py4JJavaError, match="ClassCastException"):
        jvm.org.apache.hadoop.fs.FileSystem.getLocal(conf)
    conf.set("fs.file.impl", "org.apache.hadoop.fs.LocalFileSystem")
    assert jvm.org.apache.hadoop.fs.FileSystem.getLocal(conf).getClass().getName() == "org.apache.hadoop.fs.LocalFileSystem"


def test_restart_from_checkpoint_loses_nothing(spark: Any, host_factory: Any, tmp_path: Path) -> None:
    data, out, checkpoints = tmp_path / "in", tmp_path / "out", tmp_path / "ck"
    sink = {"type": "files", "format": "parquet", "path": str(out)}
    spec = query("copy", "t", files_source(data), [{"filter": "amount >= 0"}], sink=sink)
    first = host_factory(None, checkpoints)
    hosted = first.add(spec)
    write_rows(data, "a.json", [{"id": i, "user": "u", "amount": 1.0, "produced_at": iso(time.time())} for i in range(50)])
    wait_for(lambda: hosted.output_rows == 50, what="the first 50 rows")
    first.stop_all()
    offsets = checkpoints / "t" / "copy" / "offsets"
    assert (offsets / "0").is_file()
    assert not list(offsets.glob(".*.crc"))  # the session's raw local files: no checksum side files
    write_rows(data, "b.json", [{"id": 50 + i, "user": "u", "amount": 1.0, "produced_at": iso(time.time())} for i in range(70)])
    second = host_factory(None, checkpoints)
    again = second.add(spec)
    # (if the stop fell between a batch's write and its commit, Spark replays that batch: the
    # batch-id sink directories make the replay overwrite, never duplicate)
    wait_for(lambda: again.output_rows >= 70, what="the rows written while stopped")
    ids = [r["id"] for r in spark.read.parquet(str(out)).select("id").collect()]
    assert sorted(ids) == list(range(120))  # every row exactly once across the restart


def test_registering_the_same_query_again_keeps_it_running(host_factory: Any, tmp_path: Path) -> None:
    """An operator restart registers every query again: the same registration must not restart
    the query (a restart re-runs the batch in flight, doubling rows at an at-least-once sink)."""
    data = tmp_path / "in"
    spec = query("keep", "t", files_source(data), [{"filter": "amount >= 0"}])
    host = host_factory(None, tmp_path / "ck")
    hosted = host.add(spec)
    wait_for(lambda: hosted.phase == "Running" and hosted.handle is not None, what="the query running")
    first = hosted.handle.id
    assert host.add(spec) is hosted and hosted.handle.id == first
    changed = query("keep", "t", files_source(data), [{"filter": "amount >= 1"}])
    restarted = host.add(changed)
    assert restarted is not hosted  # a changed spec restarts it, from its checkpoint
    wait_for(lambda: restarted.phase == "Running" and restarted.handle is not None, what="the changed query running")
    assert restarted.handle.id == first  # Spark's query id lives in the checkpoint: the same query resumed


def test_an_idle_query_reports_no_input(spark: Any, host_factory: Any, tmp_path: Path) -> None:
    """Since Spark 3.5 an idle query sends no progress event, only an idle one: its input rate must
    fall to zero then, or DS2 keeps sizing the pool for the last batch's rate forever."""
    data = tmp_path / "in"
    spark.conf.set("spark.sql.streaming.noDataProgressEventInterval", "500ms")
    try:
        host = host_factory(None, tmp_path / "ck")
        host.add(query("idle", "t", files_source(data), [{"filter": "amount >= 0"}]))
        for n in range(1, 30):  # Spark's first batch reports no rate (no earlier trigger to measure from)
            write_rows(data, f"{n}.json", [{"id": i, "user": "u", "amount": 1.0, "produced_at": iso(time.time())}
                                          for i in range(10)])
            if host.status("t/idle").input_rate > 0:
                break
            time.sleep(0.5)
        assert host.status("t/idle").input_rate > 0, "no batch reported an input rate"
        wait_for(lambda: host.status("t/idle").input_rate == 0, timeout=15, what="the rate falling to zero while idle")
    finally:
        spark.conf.unset("spark.sql.streaming.noDataProgressEventInterval")


def test_a_failing_query_fails_alone(host_factory: Any, tmp_path: Path) -> None:
    good_in = tmp_path / "good"
    host = host_factory(LocalScheduler(Scheduler("cameo", capacity=2)))
    good = host.add(query("good", "t", files_source(good_in), [{"filter": "amount > 0"}]))
    # a schema naming `id` twice (Spark matches names without case): valid for Sluice's checks,
    # refused by Spark's analyzer when the filter reads it
    twice = {**files_source(tmp_path / "bad"), "schema": SCHEMA + ", ID INT"}
    bad = host.add(query("bad", "t", twice, [{"filter": "id > 1"}]))
    assert bad.phase == "Failed" and "AMBIGUOUS_REFERENCE" in bad.message
    write_rows(good_in, "a.json", [{"id": 1, "user": "u", "amount": 1.0, "produced_at": iso(time.time())}])
    wait_for(lambda: len(good.memory) == 1, what="the healthy query")
    host.remove("t/bad")
    assert "t/bad" not in host.queries and good.phase == "Running"
    host.suspend("t/good", True)
    assert good.phase == "Suspended" and good.handle is None
    host.suspend("t/good", False)
    write_rows(good_in, "b.json", [{"id": 2, "user": "u", "amount": 1.0, "produced_at": iso(time.time())}])
    wait_for(lambda: len(good.memory) == 2, what="the resumed query")


def test_critical_path_of_real_batches_names_a_bottleneck(host_factory: Any, tmp_path: Path) -> None:
    from sluice.runtime.critical_path import critical_path

    data = tmp_path / "in"
    seen: list[Completion] = []

    class Recording(LocalScheduler):
        def dispatch(self, request: BatchRequest, completed: Any = ()) -> Any:
            seen.extend(completed)
            return super().dispatch(request, completed)

        def complete(self, query: str, completed: Any) -> bool:  # as its progress arrives
            seen.extend(completed)
            return super().complete(query, completed)

    host = host_factory(Recording(Scheduler("cameo", capacity=2)))
    hosted = host.add(query("path", "t", files_source(data), [{"groupBy": ["user"]}, {"aggregate": [{"fn": "count", "name": "n"}]}]))
    for round_ in range(3):
        write_rows(data, f"r{round_}.json", [{"id": i, "user": f"u{i % 4}", "amount": 1.0, "produced_at": iso(time.time())}
                                             for i in range(40)])
        # the batch's progress (its phase times) has arrived before the next batch asks
        wait_for(lambda r=round_: sum(1 for t in hosted.timelines.values() if t.durations_ms) > r,  # type: ignore[misc]
                 what=f"batch {round_}'s progress")
    status = wait_for_status(host, "t/path", lambda s: len(s.criticalPath) > 0 and bool(s.bottleneck), timeout=30)
    shares = status.criticalPath
    assert sum(shares.values()) == pytest.approx(1.0, abs=1e-3)
    assert any(label.startswith("stage ") for label in shares)  # Spark's stage times made it onto the path
    assert {"offsets", "planning", "driver"} <= set(shares)
    assert status.bottleneck.startswith(next(iter(shares))) and "% of the critical path" in status.bottleneck
    # each measured batch's path covers its whole trigger time exactly (Spark's own figure)
    measured = [t for t in hosted.timelines.values() if t.durations_ms and t.stages]
    for timeline in measured:
        # (to the status API's millisecond rounding)
        assert sum(s for _, s in critical_path(timeline)) == pytest.approx(timeline.durations_ms["triggerExecution"] / 1000, abs=0.01)
    # C_path feedback: completions carry the batch's offset commit time as the tail after the action
    tails = [(c.tail, hosted.timelines[c.batch_id].durations_ms["commitOffsets"] / 1000) for c in seen if c.tail is not None]
    assert len(tails) >= 2 and all(sent == pytest.approx(measured_) for sent, measured_ in tails)


def wait_for_status(host: QueryHost, key: str, ok: Callable[[QueryStatus], Any], timeout: float) -> QueryStatus:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = host.status(key)
        if ok(status):
            return status
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {key}'s status: {host.status(key)}")


def test_group_grants_let_back_to_back_batches_run_without_asking(host_factory: Any, tmp_path: Path) -> None:
    from sluice.scheduler.core import GroupTuning

    # a tuning that always finds asking too costly, so k doubles with every group: 1, 2, 4, 4, ...
    core = Scheduler("cameo", capacity=2, group=GroupTuning(k_max=4, grow_above=-1.0, shrink_below=-1.0))
    host = host_factory(LocalScheduler(core))
    data = tmp_path / "in"
    for round_ in range(9):  # nine files read one a batch, with no trigger wait: back to back
        write_rows(data, f"r{round_}.json", [{"id": round_ * 10 + i, "user": "u", "amount": 1.0, "produced_at": iso(time.time())}
                                             for i in range(10)])
    spec = query("grouped", "t", {**files_source(data), "maxFilesPerTrigger": 1}, [{"filter": "amount > 0"}])
    spec.spec.trigger = Trigger.model_validate({"interval": "0s"})
    hosted = host.add(spec)
    wait_for(lambda: hosted.batches >= 9, what="nine batches")
    asked = core.queries["t/grouped"].grants
    assert hosted.batches == 9 and asked + hosted.grouped == 9
    # groups of 1, 2, 4, ... (a band change between groups takes one off k), so most batches never ask
    assert hosted.grouped >= 3 and asked <= 6
    assert sorted(r["id"] for r in hosted.memory) == list(range(90))  # every batch ran and committed
    assert host.status("t/grouped").groupedBatches == hosted.grouped


def test_a_group_is_given_back_at_a_trigger_wait(host_factory: Any, tmp_path: Path) -> None:
    from sluice.scheduler.core import GroupTuning

    core = Scheduler("cameo", capacity=2, group=GroupTuning(k_max=4, grow_above=-1.0, shrink_below=-1.0))
    host = host_factory(LocalScheduler(core))
    data = tmp_path / "in"
    waits = query("waits", "t", files_source(data), [{"filter": "amount > 0"}])
    # a 2 s trigger: batches here take 0.3-0.7 s once warm (the first about 4 s), so a wait follows each
    waits.spec.trigger = Trigger.model_validate({"interval": "2s"})
    hosted = host.add(waits)
    for round_ in range(9):  # each file after the previous batch's progress: a trigger wait between batches
        write_rows(data, f"r{round_}.json", [{"id": round_ * 10 + i, "user": "u", "amount": 1.0, "produced_at": iso(time.time())}
                                             for i in range(10)])
        wait_for(lambda r=round_: (t := hosted.timelines.get(r)) is not None and "triggerExecution" in t.durations_ms,
                 what=f"batch {round_}'s progress")  # type: ignore[misc]
    asked = core.queries["t/waits"].grants
    took = [hosted.timelines[b].durations_ms["triggerExecution"] for b in range(9)]
    assert hosted.batches == 9 and asked + hosted.grouped == 9
    # a batch runs under a group only after one that took its whole interval (no wait followed it);
    # with the groups held across waits, k doubling every group made at least 3 of 9 skip asking
    assert hosted.grouped <= sum(ms >= 2000 for ms in took), (hosted.grouped, took)
    assert sorted(r["id"] for r in hosted.memory) == list(range(90))


def test_without_a_trigger_the_interval_comes_from_the_sla_and_adapts_to_measured_costs(host_factory: Any,
                                                                                       tmp_path: Path) -> None:
    data = tmp_path / "in"
    host = host_factory(LocalScheduler(Scheduler("cameo", capacity=2)), retry_every=0.5, interval_dwell=5.0)
    # before any batch: Spark's floor (150 ms), the cautious prior per row and the spec's expected rate
    # (40,000 rows/s) give (0.8 x 4 s - 0.15 - 0.05) / (1 + 20e-6 x 40,000) = 1.667 s; unmeasured, a
    # query starts at most at 1 s
    auto = query("auto", "t", files_source(data), [{"filter": "amount > 0"}], sla="4s")
    auto.spec.trigger = None
    auto.spec.resources.expectedRate = 40_000
    hosted = host.add(auto)
    first = host.status("t/auto")
    # the query's own interval: a stable share of up to 5% off (`intervals.staggered`)
    assert first.interval_ms == pytest.approx(intervals.staggered(1.0, "t/auto") * 1000, abs=0.1)
    assert "the SLA alone would allow 1667 ms" in first.interval_reason
    # a twin, ready to change in the same lifecycle check: a check restarts one query at most
    data2 = tmp_path / "in-twin"
    twin_query = query("twin", "t", files_source(data2), [{"filter": "amount > 0"}], sla="4s")
    twin_query.spec.trigger = None
    twin_query.spec.resources.expectedRate = 40_000
    twin = host.add(twin_query)
    with host.lock:  # as if both started together: both may change in the same check, after 5 s
        hosted.interval_since = twin.interval_since = max(hosted.interval_since, twin.interval_since)
    fixed = host.add(query("fixed", "t", files_source(tmp_path / "in2"), [{"filter": "amount > 0"}]))
    assert host.status("t/fixed").interval_ms == 200 and host.status("t/fixed").interval_reason == "spec.trigger sets it."
    # the measured input is tiny (5 rows/s) and the batches cheap (well under a second): the best
    # interval grows past the 25% band, so the query restarts once with it, from its checkpoint,
    # losing nothing (at 10-15 rows/s, a batch's cost fitted per row put it near the band's edge)
    for round_ in range(8):
        for folder in (data, data2):
            write_rows(folder, f"{round_}.json", [{"id": round_ * 10 + i, "user": "u", "amount": 1.0,
                                                   "produced_at": iso(time.time())} for i in range(5)])
        time.sleep(1.0)
    wait_for(lambda: (hosted.interval or 0) > 1.25 and (twin.interval or 0) > 1.25, 60,
             "both intervals to follow the measured costs")
    assert hosted.phase == "Running" and fixed.phase == "Running" and twin.phase == "Running"
    changed = host.status("t/auto")
    assert changed.interval_ms is not None and changed.interval_ms > 1250 and "4000 ms SLA" in changed.interval_reason
    assert changed.interval_restarts == len(hosted.interval_passes) >= 1
    assert not set(hosted.interval_passes) & set(twin.interval_passes), (hosted.interval_passes, twin.interval_passes)
    write_rows(data, "last.json", [{"id": 999, "user": "u", "amount": 1.0, "produced_at": iso(time.time())}])
    wait_for(lambda: len(hosted.memory) == 41, 30, "every row after the restart")
    assert sorted(r["id"] for r in hosted.memory) == [r * 10 + i for r in range(8) for i in range(5)] + [999]


def test_a_query_with_a_measured_twin_starts_where_the_twin_runs(host_factory: Any, tmp_path: Path) -> None:
    """Started at the cap, a pool's new bulk queries each restarted once measured (40-42 restarts
    as the density benchmark went from 50 to 100 queries); a running twin (the same pipeline, its
    literals aside) with measured costs gives a new query its first interval instead."""
    from sluice.runtime.interval_control import measured_costs

    host = host_factory(LocalScheduler(Scheduler("cameo", capacity=2)), retry_every=0.5, interval_dwell=600.0)

    def auto(name: str, sla: str, pipeline: list[dict[str, Any]] | None = None) -> StreamingQuery:
        made = query(name, "t", files_source(tmp_path / name), pipeline or [{"filter": "amount > 0"}], sla=sla)
        made.spec.trigger = None
        return made

    seed = host.add(auto("seed", "4s"))
    # unmeasured: the cap (a quarter of 4 s), as its own
    assert host.status("t/seed").interval_ms == pytest.approx(intervals.staggered(1.0, "t/seed") * 1000, abs=0.1)
    for round_ in range(3):  # three batches, each measured (progress in, write committed) before the next
        write_rows(tmp_path / "seed", f"{round_}.json", [{"id": round_ * 10 + i, "user": "u", "amount": 1.0,
                                                          "produced_at": iso(time.time())} for i in range(5)])
        wait_for(lambda n=round_: sum(rows for rows, _ in seed.batch_costs()) == 5 * (n + 1), 60,  # type: ignore[misc]
                 f"the seed's batch {round_} measured")
    with host.lock:  # no more rows, so no more batches: its costs stay as the twin reads them
        costs = measured_costs(seed)
    assert costs is not None
    twin = host.add(auto("twin", "4s", [{"filter": "amount > 2.5"}]))  # its own literals
    assert seed.interval is not None
    expected = intervals.seeded(4.0, costs, None, "t/seed", seed.interval)  # the seed runs at the cap
    assert expected.interval > 1.0  # above the cap: the seed's cheap batches allow more
    assert twin.interval == pytest.approx(intervals.staggered(expected.interval, "t/twin"))
    assert twin.interval_reason == expected.reason
    assert twin.interval_reason.startswith("as t/seed runs (the same pipeline, literals aside)")
    # another SLA: the seed's costs, its own SLA's choice
    other = host.add(auto("other", "8s"))
    assert other.interval == pytest.approx(intervals.staggered(intervals.seeded(8.0, costs, None, "t/seed", None).interval,
                                                               "t/other"))
    assert other.interval_reason.startswith("from t/seed's batches (the same pipeline, literals aside, another SLA)")
    # another pipeline is no twin: the cap until its own batches are measured
    alone = host.add(auto("alone", "8s", [{"filter": "amount > 0"}, {"select": ["id", "amount"]}]))
    assert alone.interval == intervals.staggered(2.0, "t/alone") and "until its batches are measured" in alone.interval_reason
    write_rows(tmp_path / "twin", "0.json", [{"id": 1, "user": "u", "amount": 5.0, "produced_at": iso(time.time())}])
    wait_for(lambda: len(twin.memory) == 1, 60, "the twin's first row")


def test_a_rate_source_s_whole_seconds_are_its_lag_and_its_interval_leaves_room_for_them(host_factory: Any) -> None:
    """Spark's rate source offers a row once its second has passed. The held-out filter
    (1.5 s SLA, no trigger) ran at 1 s and measured p99 1.46-1.62 s where the rule, blind to
    that wait, predicted 1.09 s; the rule now knows it before any batch and measures it after."""
    host = host_factory(LocalScheduler(Scheduler("cameo", capacity=2)), retry_every=0.5)
    ticks = query("ticks", "t", {"type": "rate", "rowsPerSecond": 200}, [{"filter": "value >= 0"}], {"type": "noop"},
                  sla="1500ms")
    ticks.spec.trigger = None
    hosted = host.add(ticks)
    # before any batch: 0.8 x 1.5 s less a whole second's lag, Spark's floor and the commit leave
    # nothing: the least interval that keeps up, saying why
    first = host.status("t/ticks")
    assert first.interval_ms == 200 and "readable up to 1000 ms after it is produced" in first.interval_reason
    wait_for(lambda: len([t for t in hosted.timelines.values() if t.lag is not None]) >= 4, 60,
             "four batches with a measured lag")
    with host.lock:
        lags = [t.lag for t in hosted.timelines.values() if t.lag is not None]
    # each batch reads the second that passed since the last: its oldest row is about a second
    # old at the trigger, 0.8 s of it beyond the 0.2 s interval (plus the trigger's phase); a batch
    # after one that ran past the interval (a cold start's) has that overrun taken out (`lag_of`)
    assert all(0.0 <= lag < 1.5 for lag in lags) and 0.5 < sorted(lags)[len(lags) // 2] < 1.5, lags
    costs = host.status("t/ticks").costs
    assert costs is not None and 500 < costs.lag_ms < 1500, costs
    # the rule's worst case at the interval in force holds the lag, the interval and a batch
    assert costs.worst_case_ms is not None and costs.worst_case_ms > costs.lag_ms + 200 + costs.fixed_ms, costs
    # each warm batch's overshoot past the interval: its lag and its trigger to the sink's write,
    # which the rule reads as the share of rows late at an interval
    wait_for(lambda: len(hosted.overshoots) >= intervals.SPREAD_BATCHES, 60, "eight batches' overshoots")
    with host.lock:
        overshoots = list(hosted.overshoots)
    assert all(0.5 < over < 5.0 for over in overshoots), overshoots  # the lag alone is 0.5-1.5 s
    late = host.status("t/ticks").costs
    assert late is not None and late.late_share is not None and 0.0 <= late.late_share <= 1.0, late


def _mark_tasks(spark: Any, pool: str, label: str, tasks: int, marks: Path) -> None:
    """Run `tasks` tasks of 0.3 s in FAIR pool `pool`; each writes when it started."""
    folder = str(marks)

    def work(index: int) -> None:
        import time as clock
        from pathlib import Path as Folder

        Folder(folder, f"{label}-{index}").write_text(repr(clock.time()))
        clock.sleep(0.3)

    spark.sparkContext.setLocalProperty("spark.scheduler.pool", pool)
    try:
        spark.sparkContext.parallelize(range(tasks), tasks).foreach(work)
    finally:  # the calling thread's later jobs go back to the default pool
        spark.sparkContext.setLocalProperty("spark.scheduler.pool", None)


def test_an_urgent_band_takes_every_freed_slot_before_a_bulk_band(spark: Any, tmp_path: Path) -> None:
    """With weights alone, a bulk band with no task running (0/1) beats an urgent band running one
    (1/16) at each free slot, so on two cores an urgent batch got one core at best. The urgent
    bands' minimum share (`bands.URGENT_MIN_SHARE`) makes Spark serve them first."""
    from sluice.scheduler.bands import urgent_bands

    urgent, bulk = f"band{urgent_bands(8) - 1}", "band7"  # the least urgent urgent band against the bulk one
    marks = tmp_path / "marks"
    marks.mkdir()
    first = threading.Thread(target=_mark_tasks, args=(spark, bulk, "bulk", 16, marks))
    first.start()
    wait_for(lambda: len(list(marks.glob("bulk-*"))) >= 2, 60, "two bulk tasks running")
    _mark_tasks(spark, urgent, "urgent", 6, marks)
    first.join(60)
    started = {f.name: float(f.read_text()) for f in marks.iterdir()}
    assert len(started) == 22
    urgent_starts = sorted(t for name, t in started.items() if name.startswith("urgent"))
    # every slot freed while urgent tasks waited went to them: no bulk task started in between
    between = [name for name, t in started.items() if name.startswith("bulk") and urgent_starts[0] < t < urgent_starts[-1]]
    assert between == [], (between, urgent_starts)


def test_spark_pool_internals_the_runtime_relies_on(spark: Any) -> None:
    """`sluice.runtime.spark_pools` reaches into Spark's task scheduler: fail loudly if an upgrade moves it."""
    from sluice.runtime.spark_pools import ensure_pool, pool_weight

    assert ensure_pool(spark, "internals_w7", 7, fair_inside=True) is True
    assert ensure_pool(spark, "internals_w7", 7) is False  # already there: kept as it is
    assert pool_weight(spark, "internals_w7") == 7
    root = spark.sparkContext._jsc.sc().taskScheduler().rootPool()
    assert str(root.getSchedulableByName("internals_w7").schedulingMode()) == "FAIR"
    assert pool_weight(spark, "band0") == 128  # the allocation file's ladder is read the same way
    assert pool_weight(spark, "no-such-pool") is None


def test_under_fair_a_tenant_runs_in_its_own_pool_at_its_quota_weight(spark: Any, host_factory: Any,
                                                                        tmp_path: Path) -> None:
    from sluice.runtime.policy import mode_of
    from sluice.runtime.spark_pools import pool_weight

    data = tmp_path / "in"
    host = host_factory(None, fixed_pool=mode_of("fair").fixed_pool)
    hosted = host.add(query("weighted", "gold", files_source(data), [{"filter": "amount > 0"}]), weight=2.5)
    write_rows(data, "a.json", [{"id": 1, "user": "u", "amount": 1.0, "produced_at": iso(time.time())}])
    wait_for(lambda: len(hosted.memory) == 1, what="the row")
    assert pool_weight(spark, "tenant_gold_w250") == 250  # made before its first batch, at the tenant's weight
    base, app = spark.sparkContext.uiWebUrl, spark.sparkContext.applicationId
    stages = json.loads(urllib.request.urlopen(f"{base}/api/v1/applications/{app}/stages", timeout=10).read())
    pools = {s["schedulingPool"] for s in stages if "sluice gold/weighted batch" in (s.get("description") or "")}
    assert pools == {"tenant_gold_w250"}


def test_files_stay_under_the_tenants_root_even_through_a_symbolic_link(host_factory: Any, tmp_path: Path) -> None:
    root = tmp_path / "files"
    (root / "team-a").mkdir(parents=True)
    (root / "team-b" / "secret").mkdir(parents=True)
    os.symlink(root / "team-b" / "secret", root / "team-a" / "shortcut")
    host = host_factory(files_root=str(root))
    rows = {"type": "rate", "rowsPerSecond": 10}
    inside = host.add(query("inside", "team-a", rows, [{"filter": "value >= 0"}], {"type": "files", "format": "json", "path": "out"}))
    assert inside.phase == "Running", inside.message
    assert inside.query.spec.sink.path == str(root / "team-a" / "out")  # type: ignore[union-attr]  # relative: under the root
    wait_for(lambda: list((root / "team-a" / "out").glob("batch_id=*/part-*.json")), 60, "the sink's first files")
    climbing = host.add(query("climbing", "team-a", rows, [{"filter": "value >= 0"}],
                              {"type": "files", "format": "json", "path": "../team-b/secret"}))
    assert climbing.phase == "Failed" and climbing.handle is None
    assert climbing.message.startswith("spec.sink.path: '../team-b/secret' is outside the files root of namespace 'team-a'")
    linked = host.add(query("linked", "team-a", files_source(root / "team-a" / "shortcut"), [{"filter": "amount > 1"}]))
    assert linked.phase == "Failed" and "symbolic link" in linked.message, linked.message
    assert not list((root / "team-b" / "secret").iterdir())  # nothing was written there


def test_the_driver_jvm_runs_the_jit_compilers_the_session_chose(spark: Any) -> None:
    """`session.JIT_OPTIONS` reach the driver JVM: HotSpot's own flag, read through its diagnostic
    bean, is what `driver_jit` chose (C1 alone: TieredStopAtLevel 1; HotSpot's default: 4)."""
    jvm = spark._jvm
    bean = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(
        jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean"))
    level = bean.getVMOption("TieredStopAtLevel").getValue()
    chosen = driver_jit()
    assert level == ("1" if chosen == "c1" else "4"), (chosen, level)


def test_the_driver_jvm_runs_the_collector_the_session_chose(spark: Any) -> None:
    """`session.DRIVER_GC_OPTIONS` reach the driver JVM: its collectors' own names, read through
    the JVM's management beans (HotSpot's throughput collector: PS Scavenge and PS MarkSweep)."""
    from sluice.runtime.session import DRIVER_GC_CONF

    jvm = spark._jvm
    names = {bean.getName() for bean in jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()}
    chosen = spark.conf.get(DRIVER_GC_CONF)
    if chosen == "parallel":
        assert names == {"PS Scavenge", "PS MarkSweep"}, names
    else:
        assert "G1 Young Generation" in names and "PS Scavenge" not in names, (chosen, names)


def test_sluice_driver_jit_c1_reaches_a_new_driver_jvm(tmp_path: Path) -> None:
    """The other choice, in a process of its own (one JVM a process): `SLUICE_DRIVER_JIT=c1` starts
    the driver with C1 alone."""
    script = (
        "from pathlib import Path\n"
        "from sluice.runtime.session import SessionConfig, build_session\n"
        f"spark = build_session(SessionConfig(master='local[1]', workdir=Path({str(tmp_path)!r})))\n"
        "jvm = spark._jvm\n"
        "bean = jvm.java.lang.management.ManagementFactory.getPlatformMXBean("
        "jvm.java.lang.Class.forName('com.sun.management.HotSpotDiagnosticMXBean'))\n"
        "print('level', bean.getVMOption('TieredStopAtLevel').getValue())\n"
        "spark.stop()\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=180,
                          env={**os.environ, JIT_ENV: "c1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "level 1" in proc.stdout.splitlines(), proc.stdout


COMPILERS_NICE = """
import json, os
from pathlib import Path

def compilers(pid):  # nice of each JIT compiler thread of the process `pid`
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        name = (task / "comm").read_text().strip()
        if name.startswith(("C1 CompilerThre", "C2 CompilerThre")):
            out.append(int((task / "stat").read_text().rpartition(")")[2].split()[16]))
    return out

def executor_jvm(_):  # run in a Python worker: its nearest java ancestor is the executor's JVM
    pid = os.getpid()
    while Path(f"/proc/{pid}/comm").read_text().strip() != "java":
        pid = int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])
    return compilers(pid)
"""


def test_sluice_executor_jit_low_puts_only_the_executors_compilers_at_the_bulk_tasks_nice(tmp_path: Path) -> None:
    """`spark.sluice.executor.jit=low` (a pool's `spec.executor.jit`, as the operator passes it)
    reaches an executor JVM of its own (local-cluster): its JIT compiler threads run at
    `BULK_NICE`, read from /proc inside a task, while the driver's stay at 0."""
    script = COMPILERS_NICE + (
        "from sluice.runtime.session import SessionConfig, build_session\n"
        f"spark = build_session(SessionConfig(master='local-cluster[1,1,1024]', workdir=Path({str(tmp_path)!r}), "
        f"extra={{{EXECUTOR_JIT_CONF!r}: 'low'}}))\n"
        "seen = spark.sparkContext.parallelize([0], 1).map(executor_jvm).collect()[0]\n"
        "driver = compilers(spark._jvm.java.lang.ProcessHandle.current().pid())\n"
        "print(json.dumps({'executor': seen, 'driver': driver}))\n"
        "spark.stop()\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=240,
                          env={k: v for k, v in os.environ.items() if k != EXECUTOR_JIT_ENV})
    assert proc.returncode == 0, proc.stderr[-2000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["executor"] and set(seen["executor"]) == {BULK_NICE}, seen
    assert seen["driver"] and set(seen["driver"]) == {0}, seen
