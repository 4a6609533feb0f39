"""Many tenants' queries in one SparkSession, each micro-batch gated by the scheduler.

The gate is the `foreachBatch` function every sink is wrapped in. Before the batch's action it
asks the scheduler for a grant with cheap facts (rows expected from the input rate, oldest event
from the previous batch's newest), sets `spark.scheduler.pool` to the granted band, runs the sink,
then measures the batch: one aggregation over the persisted batch gives its output rows and
production-time quantiles, from which latency is computed against the commit time. The cost
report travels with the query's next grant request.

A stateful batch may be delayed but never skipped: the gate always runs the action; on shutdown
or scheduler loss it fails open (runs at once in Spark's default pool) and says so.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge

from sluice.api.query import StreamingQuery
from sluice.scheduler.bands import DEFAULT_BAND
from sluice.scheduler.core import Completion, Grant
from sluice.scheduler.policies import BatchRequest, QuerySpec

from .critical_path import BatchTimeline, StageSpan, bottleneck, critical_path, shares
from .kafka_check import kafka_problem
from .latency import GRID, BatchLatency, LatencyWindow, batch_latency
from .pipeline import TS, build, write_batch
from .stages import StageCost, StagePoller

log = logging.getLogger("sluice.runtime")


class Gatekeeper(Protocol):
    """The scheduler as the runtime sees it: the sidecar's client or the in-process core."""

    mode: str

    def register(self, spec: QuerySpec) -> bool: ...
    def unregister(self, key: str) -> bool: ...
    def dispatch(self, request: BatchRequest, completed: Any = ()) -> Grant: ...
    def complete(self, query: str, completed: Any) -> bool: ...


def query_spec(query: StreamingQuery, weight: float = 1.0) -> QuerySpec:
    """What the scheduler needs to know of a query."""
    window = next((s.window for s in query.spec.pipeline if s.window is not None), None)
    mark = next((s.watermark for s in query.spec.pipeline if s.watermark is not None), None)
    return QuerySpec(
        query.key, query.tenant, query.spec.sla.latencyTarget.seconds, weight,
        window.size.seconds if window else None, mark.delay.seconds if mark else 0.0,
    )


def spark_name(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", key.replace("/", "__"))


class Metrics:
    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        self.registry = registry
        labels = ["tenant", "query"]
        self.batches = Counter("sluice_runtime_batches_total", "Micro-batches committed.", labels, registry=registry)
        self.rows = Counter("sluice_runtime_input_rows_total", "Input rows processed.", labels, registry=registry)
        self.latency_p50 = Gauge("sluice_runtime_latency_p50_seconds", "End-to-end latency p50 over the window.", labels, registry=registry)
        self.latency_p99 = Gauge("sluice_runtime_latency_p99_seconds", "End-to-end latency p99 over the window.", labels, registry=registry)
        self.attainment = Gauge("sluice_runtime_sla_attainment_ratio", "Share of output rows within the latency target.", labels, registry=registry)
        self.batch_seconds = Gauge("sluice_runtime_batch_seconds", "Duration of the last batch's action.", labels, registry=registry)
        self.input_rate = Gauge("sluice_runtime_input_rows_per_second", "Input rate.", labels, registry=registry)
        self.state_rows = Gauge("sluice_runtime_state_rows", "Rows held in state stores.", labels, registry=registry)
        self.state_bytes = Gauge("sluice_runtime_state_memory_bytes", "Memory used by state stores.", labels, registry=registry)
        self.gate_wait = Gauge("sluice_runtime_gate_wait_seconds", "Time the last batch waited for its grant.", labels, registry=registry)
        self.task_run = Counter("sluice_runtime_task_run_seconds_total", "Task run time of the query's stages.", labels, registry=registry)
        self.task_cpu = Counter("sluice_runtime_task_cpu_seconds_total", "Task CPU time of the query's stages.", labels, registry=registry)
        self.fetch_wait = Counter("sluice_runtime_shuffle_fetch_wait_seconds_total", "Task time spent waiting for shuffle data.", labels, registry=registry)
        self.stage_records = Counter("sluice_runtime_stage_input_records_total", "Records read by the query's stages.", labels, registry=registry)
        self.phase = Gauge("sluice_runtime_query_up", "1 while the query runs.", labels, registry=registry)

    def forget(self, tenant: str, key: str) -> None:
        for metric in vars(self).values():
            if metric is self.registry:
                continue
            with contextlib.suppress(KeyError):
                metric.remove(tenant, key)


RECENT_BATCHES = 32


@dataclass
class HostedQuery:
    query: StreamingQuery
    window: LatencyWindow
    spec: QuerySpec
    handle: Any = None
    phase: str = "Pending"
    message: str = ""
    batches: int = 0
    input_rows: int = 0
    output_rows: int = 0
    input_rate: float = 0.0
    processing_rate: float = 0.0
    state_rows: int = 0
    state_bytes: int = 0
    last_newest: float | None = None
    last_batch_started: float | None = None
    last_action: float = 0.0
    completions: list[Completion] = field(default_factory=list)
    memory: list[dict[str, Any]] = field(default_factory=list)
    bands: dict[str, int] = field(default_factory=dict)
    band_log: dict[int, str] = field(default_factory=dict)
    """batch id -> band, for the most recent batches."""
    stages: dict[str, float] = field(default_factory=dict)
    """Useful task seconds per stage of the latest measured batch (from Spark's status API)."""
    stages_batch: int = -1
    gate_mode: str = "gated"
    stopping: bool = False
    retry_at: float = 0.0
    newest_input: float | None = None
    """Newest input event time Spark reported (queries with a watermark)."""
    timelines: dict[int, BatchTimeline] = field(default_factory=dict)
    """batch id -> its critical path's parts and its load, for the latest batches (SnailTrail, DS2)."""
    group: Grant | None = None
    """The last grant, if it covers later batches too (k > 1, Drizzle)."""
    grouped: int = 0
    """Batches run under an earlier batch's group grant, without asking."""

    def timeline(self, batch_id: int) -> BatchTimeline:
        found = self.timelines.get(batch_id)
        if found is None:
            found = self.timelines[batch_id] = BatchTimeline()
            while len(self.timelines) > RECENT_BATCHES:
                del self.timelines[min(self.timelines)]
        return found

    def path_shares(self) -> tuple[dict[str, float], int]:
        """Shares of the critical path over recent batches with both progress and stage times."""
        paths = [critical_path(t) for t in list(self.timelines.values()) if t.durations_ms and t.stages]
        return shares(paths), len(paths)

    def measured_load(self) -> dict[str, float]:
        """Input rows and useful task seconds summed over recent batches that have both."""
        done = [(t.rows, t.useful_seconds) for t in list(self.timelines.values()) if t.rows > 0 and t.useful_seconds > 0]
        return {"batches": len(done), "rows": sum(r for r, _ in done), "usefulSeconds": round(sum(u for _, u in done), 4)}


class QueryHost:
    """Hosts a pool's queries. `gate`: the scheduler, or None to run ungated in `fixed_pool`."""

    def __init__(
        self,
        spark: Any,
        checkpoints: Path,
        gate: Gatekeeper | None,
        fixed_pool: Callable[[StreamingQuery], str | None] | None = None,
        metrics: Metrics | None = None,
        clock: Callable[[], float] = time.time,
        latency_horizon: float = 60.0,
        measure_from: float = 0.0,
    ) -> None:
        self.spark = spark
        self.checkpoints = checkpoints
        self.gate = gate
        self.fixed_pool = fixed_pool or (lambda q: None)
        self.metrics = metrics or Metrics(CollectorRegistry())
        self.clock = clock
        self.queries: dict[str, HostedQuery] = {}
        self.latency_horizon = latency_horizon
        self.measure_from = measure_from
        """Batches committed before this wall-clock time are left out of latency figures (warm-up)."""
        self.retry_every = 5.0
        self._lock = threading.RLock()
        self._listener = _attach_listener(spark, self)
        self._stages: StagePoller | None = None
        ui = spark.sparkContext.uiWebUrl
        if ui:
            self._stages = StagePoller(ui, spark.sparkContext.applicationId, self.on_stages, interval=3.0).start()

    # ------------------------------------------------------------------ lifecycle

    def add(self, query: StreamingQuery) -> HostedQuery:
        """Start a query (or restart it with a new spec) from its checkpoint."""
        with self._lock:
            old = self.queries.get(query.key)
            if old is not None:  # stopped while still listed: status never answers 404 mid-update
                self._stop(old)
                self.metrics.forget(old.query.tenant, query.key)
            window = LatencyWindow(query.spec.sla.latencyTarget.seconds, horizon=self.latency_horizon)
            hosted = HostedQuery(query, window, query_spec(query))
            self.queries[query.key] = hosted
        if query.spec.suspend:
            hosted.phase, hosted.message = "Suspended", "spec.suspend is true; the checkpoint is kept."
            return hosted
        self._start(hosted)
        return hosted

    def _start(self, hosted: HostedQuery) -> None:
        query = hosted.query
        hosted.group = None  # a restart may replay a batch id: ask afresh
        problem = kafka_problem(query)
        if problem is not None:
            hosted.phase, hosted.message = "Pending", problem
            hosted.retry_at = self.clock() + self.retry_every
            return
        if self.gate is not None and not self.gate.register(hosted.spec):
            hosted.gate_mode = "fail-open"
        try:
            self.spark.conf.set("spark.sql.shuffle.partitions", str(query.spec.resources.shufflePartitions))
            plan = build(self.spark, query)
            writer = (
                plan.frame.writeStream.queryName(spark_name(query.key))
                .outputMode(plan.output_mode)
                .option("checkpointLocation", str(self.checkpoint(query.key)))
                .foreachBatch(self._gate_for(hosted))
            )
            interval = query.spec.trigger.interval.seconds
            if interval > 0:
                writer = writer.trigger(processingTime=f"{int(interval * 1000)} milliseconds")
            hosted.handle = writer.start()
            hosted.phase, hosted.message = "Running", ""
            self.metrics.phase.labels(query.tenant, query.key).set(1)
        except Exception as error:  # a source, sink or expression Spark rejects: this query only
            hosted.phase, hosted.message = "Failed", _reason(error)
            log.warning("query %s failed to start: %s", query.key, hosted.message)

    def checkpoint(self, key: str) -> Path:
        tenant, name = key.split("/", 1)
        return self.checkpoints / tenant / name

    def suspend(self, key: str, suspended: bool) -> None:
        hosted = self.queries[key]
        if suspended and hosted.phase != "Suspended":
            self._stop(hosted)
            hosted.phase, hosted.message = "Suspended", "suspended; the checkpoint is kept."
            self.metrics.phase.labels(hosted.query.tenant, key).set(0)
        elif not suspended and hosted.phase == "Suspended":
            self._start(hosted)

    def remove(self, key: str, keep_checkpoint: bool = True) -> None:
        with self._lock:
            hosted = self.queries.pop(key, None)
        if hosted is None:
            return
        self._stop(hosted)
        self.metrics.forget(hosted.query.tenant, key)
        if not keep_checkpoint:
            import shutil

            shutil.rmtree(self.checkpoint(key), ignore_errors=True)

    def _stop(self, hosted: HostedQuery) -> None:
        """Stop a query; a batch waiting at the gate is released first (q.stop() waits for it)."""
        hosted.stopping = True
        if self.gate is not None:
            self.flush(hosted.query.key)
            self.gate.unregister(hosted.query.key)
        if hosted.handle is not None:
            try:
                hosted.handle.stop()
            except Exception as error:  # stopping a failed query may rethrow its error
                log.info("stopping %s: %s", hosted.query.key, _reason(error))
            hosted.handle = None
        hosted.stopping = False

    def stop_all(self) -> None:
        for key in list(self.queries):
            self._stop(self.queries[key])
        if self._listener is not None:
            self.spark.streams.removeListener(self._listener)
            self._listener = None
        if self._stages is not None:
            self._stages.stop()
            self._stages = None

    def refresh(self) -> None:
        """Notice queries that died (source unreachable, sink failing, ...); retry Pending ones."""
        for hosted in list(self.queries.values()):
            if hosted.phase == "Pending" and hosted.retry_at and self.clock() >= hosted.retry_at:
                self._start(hosted)
            handle = hosted.handle
            if handle is not None and hosted.phase == "Running" and not handle.isActive:
                error = handle.exception()
                hosted.phase = "Failed"
                hosted.message = _reason(error) if error else "the query stopped"
                self.metrics.phase.labels(hosted.query.tenant, hosted.query.key).set(0)

    # ------------------------------------------------------------------ the gate

    def _gate_for(self, hosted: HostedQuery) -> Callable[[Any, int], None]:
        def gate(frame: Any, batch_id: int) -> None:
            self._run_batch(hosted, frame, batch_id)

        return gate

    def _grant(self, hosted: HostedQuery, batch_id: int, now: float) -> tuple[Grant, float]:
        """Ask for a grant; returns it and the coordination time (asking minus queueing)."""
        rows = 0
        if hosted.last_batch_started is not None and hosted.input_rate > 0:
            rows = int(hosted.input_rate * max(now - hosted.last_batch_started, 0.0))
        # The batch's oldest event is about the newest event the previous batch saw: from Spark's
        # eventTime (watermarked queries) or from the previous batch's output rows.
        oldest = hosted.newest_input if hosted.newest_input is not None else hosted.last_newest
        request = BatchRequest(hosted.query.key, batch_id, rows, oldest)
        if self.gate is None or hosted.stopping:
            return Grant(hosted.query.key, batch_id, self.fixed_pool(hosted.query) or DEFAULT_BAND, 1, 0.0, 0.0, 0.0,
                         fail_open=self.gate is not None), 0.0
        group = hosted.group
        if group is not None and group.batch_id < batch_id <= group.batch_id + group.k - 1:
            hosted.grouped += 1  # covered by the group grant (Drizzle): no ask, same band
            return replace(group, batch_id=batch_id, waited=0.0), 0.0
        completed, hosted.completions = [self._with_tail(hosted, c) for c in hosted.completions], []
        started = time.perf_counter()
        grant = self.gate.dispatch(request, completed)
        asked = time.perf_counter() - started
        hosted.gate_mode = "fail-open" if grant.fail_open else "gated"
        hosted.group = grant if grant.k > 1 and not grant.fail_open else None
        return grant, max(asked - grant.waited, 0.0)

    @staticmethod
    def _with_tail(hosted: HostedQuery, done: Completion) -> Completion:
        """C_path feedback: what followed the action on the batch's critical path (Spark's offset commit)."""
        timeline = hosted.timelines.get(done.batch_id)
        if done.tail is not None or timeline is None or "commitOffsets" not in timeline.durations_ms:
            return done
        return replace(done, tail=timeline.durations_ms["commitOffsets"] / 1000)

    def _run_batch(self, hosted: HostedQuery, frame: Any, batch_id: int) -> None:
        from pyspark.sql import functions as F

        query = hosted.query
        entered = self.clock()
        grant, coordination = self._grant(hosted, batch_id, entered)
        hosted.last_batch_started = entered
        sc = self.spark.sparkContext
        pool = None if (self.gate is None and self.fixed_pool(query) is None) else grant.band
        sc.setLocalProperty("spark.scheduler.pool", pool)
        sc.setJobDescription(f"sluice {query.key} batch {batch_id}")
        hosted.bands[grant.band] = hosted.bands.get(grant.band, 0) + 1
        hosted.band_log[batch_id] = grant.band
        if len(hosted.band_log) > 1000:
            del hosted.band_log[min(hosted.band_log)]
        self.metrics.gate_wait.labels(query.tenant, query.key).set(grant.waited)
        hosted.timeline(batch_id).gate_wait = grant.waited
        began = time.perf_counter()
        if query.spec.sink.type == "memory":
            # one job: collect the batch, measure it in Python
            collected = [row.asDict(recursive=True) for row in frame.collect()]
            committed = self.clock()
            produced = sorted(r.pop(TS).timestamp() for r in collected if r.get(TS) is not None)
            hosted.memory.extend(collected)
            del hosted.memory[: max(0, len(hosted.memory) - 100_000)]
            rows = len(collected)
            quantiles = [produced[min(len(produced) - 1, round(q * (len(produced) - 1)))] for q in GRID] if produced else []
        else:
            cached = frame.persist()
            try:
                if query.spec.sink.type != "noop":
                    write_batch(cached.drop(TS), query, batch_id)
                committed = self.clock()
                # the noop sink's action is this aggregation itself: it computes the whole batch
                facts = cached.agg(
                    F.count(F.lit(1)).alias("n"),
                    F.percentile_approx(F.col(TS).cast("double"), list(GRID), 1000).alias("q"),
                ).collect()[0]
                if query.spec.sink.type == "noop":
                    committed = self.clock()
            finally:
                cached.unpersist()
            rows = int(facts["n"] or 0)
            quantiles = [float(x) for x in (facts["q"] or [])]
        action = time.perf_counter() - began
        sc.setLocalProperty("spark.scheduler.pool", None)
        sc.setJobDescription(None)
        latency: BatchLatency | None = None
        if rows > 0 and len(quantiles) == len(GRID):
            latency = batch_latency(committed, rows, quantiles)
            if committed >= self.measure_from:
                hosted.window.add(latency)
            hosted.last_newest = quantiles[-1]
        elif hosted.last_newest is None:
            hosted.last_newest = entered
        hosted.batches += 1
        hosted.output_rows += rows
        hosted.last_action = action
        worst = max(latency.latencies) if latency else None
        # each batch reports itself; a group's slot frees with its last batch (sent with the next ask)
        done = Completion(query.key, batch_id, action, rows, coordination=coordination, latency=worst)
        if self.gate is not None and not grant.fail_open:
            hosted.completions.append(done)
        labels = (query.tenant, query.key)
        self.metrics.batches.labels(*labels).inc()
        self.metrics.batch_seconds.labels(*labels).set(action)
        summary = hosted.window.summary(self.clock())
        if summary.p50 is not None and summary.p99 is not None:
            self.metrics.latency_p50.labels(*labels).set(summary.p50)
            self.metrics.latency_p99.labels(*labels).set(summary.p99)
        if summary.attainment is not None:
            self.metrics.attainment.labels(*labels).set(summary.attainment)

    def flush(self, key: str) -> None:
        """Send completions still held for the next request (at shutdown)."""
        hosted = self.queries.get(key)
        if hosted and self.gate is not None and hosted.completions:
            self.gate.complete(key, [self._with_tail(hosted, c) for c in hosted.completions])
            hosted.completions = []

    # ------------------------------------------------------------------ status

    def on_progress(self, name: str, progress: Any) -> None:
        hosted = next((h for h in self.queries.values() if spark_name(h.query.key) == name), None)
        if hosted is None:
            return
        rows = int(progress.numInputRows or 0)
        hosted.input_rows += rows
        timeline = hosted.timeline(int(progress.batchId))
        timeline.rows += rows
        timeline.durations_ms = {k: float(v) for k, v in (progress.durationMs or {}).items()}
        hosted.input_rate = float(progress.inputRowsPerSecond or 0.0)
        hosted.processing_rate = float(progress.processedRowsPerSecond or 0.0)
        operators = progress.stateOperators or []
        newest = (progress.eventTime or {}).get("max")
        if newest:  # the newest *input* event (windowed output rows carry window ends instead)
            hosted.newest_input = _epoch(newest)
        hosted.state_rows = sum(int(op.numRowsTotal or 0) for op in operators)
        hosted.state_bytes = sum(int(op.memoryUsedBytes or 0) for op in operators)
        labels = (hosted.query.tenant, hosted.query.key)
        self.metrics.rows.labels(*labels).inc(rows)
        self.metrics.input_rate.labels(*labels).set(hosted.input_rate)
        self.metrics.state_rows.labels(*labels).set(hosted.state_rows)
        self.metrics.state_bytes.labels(*labels).set(hosted.state_bytes)

    def on_stages(self, stages: list[StageCost]) -> None:
        """Spark's task metrics for completed stages, per query and per batch."""
        for stage in stages:
            hosted = self.queries.get(stage.query)
            if hosted is None:
                continue
            labels = (hosted.query.tenant, stage.query)
            self.metrics.task_run.labels(*labels).inc(stage.run_seconds)
            self.metrics.task_cpu.labels(*labels).inc(stage.cpu_seconds)
            self.metrics.fetch_wait.labels(*labels).inc(stage.shuffle_fetch_wait_seconds)
            self.metrics.stage_records.labels(*labels).inc(stage.input_records + stage.shuffle_read_records)
            if stage.batch_id != hosted.stages_batch:
                hosted.stages, hosted.stages_batch = {}, stage.batch_id
            name = f"{stage.stage_id}:{stage.name.split(' at ')[0]}"
            hosted.stages[name] = round(stage.useful_seconds, 4)
            timeline = hosted.timeline(stage.batch_id)
            timeline.useful_seconds += stage.useful_seconds
            if stage.submitted and stage.completed:
                timeline.stages.append(StageSpan(
                    stage.name.split(" at ")[0], stage.submitted, stage.first_task or stage.submitted, stage.completed))

    def status(self, key: str) -> dict[str, Any]:
        hosted = self.queries[key]
        summary = hosted.window.summary(self.clock())
        path, measured = hosted.path_shares()
        p50, p99, maximum = summary.p50, summary.p99, summary.maximum
        return {
            "phase": hosted.phase,
            "message": hosted.message,
            "p50_ms": None if p50 is None else round(p50 * 1000, 1),
            "p99_ms": None if p99 is None else round(p99 * 1000, 1),
            "max_ms": None if maximum is None else round(maximum * 1000, 1),
            "sla_ms": hosted.spec.latency_target * 1000,
            "attainment": summary.attainment,
            "attainment_total": hosted.window.overall_attainment(),
            "rows": hosted.input_rows,
            "output_rows": hosted.output_rows,
            "batches": hosted.batches,
            "input_rate": hosted.input_rate,
            "processing_rate": hosted.processing_rate,
            "state_rows": hosted.state_rows,
            "state_bytes": hosted.state_bytes,
            "scheduler": hosted.gate_mode if self.gate is not None else "ungated",
            "bands": dict(hosted.bands),
            "groupedBatches": hosted.grouped,
            "stages": {"batch": hosted.stages_batch, "usefulSeconds": dict(hosted.stages)},
            "load": hosted.measured_load(),
            "criticalPath": {label: round(part, 4) for label, part in path.items()},
            "bottleneck": bottleneck(path, measured),
        }

    def stateful_batches(self) -> dict[str, int]:
        """Committed batches of each running stateful query (the executor drain paces on them)."""
        return {key: h.batches for key, h in list(self.queries.items()) if h.phase == "Running" and h.query.spec.stateful}

    def statuses(self) -> dict[str, dict[str, Any]]:
        self.refresh()
        return {key: self.status(key) for key in list(self.queries)}


def _epoch(iso: str) -> float:
    """Spark's progress timestamps ('2026-11-21T10:00:00.123Z') as epoch seconds."""
    from datetime import datetime

    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def _reason(error: BaseException) -> str:
    """One line of an exception from Spark (its first meaningful line)."""
    text = str(getattr(error, "desc", None) or error).strip()
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), type(error).__name__)
    return line[:500]


def _attach_listener(spark: Any, host: QueryHost) -> Any:
    from pyspark.sql.streaming.listener import StreamingQueryListener

    class Listener(StreamingQueryListener):
        def onQueryStarted(self, event: Any) -> None:
            return None

        def onQueryProgress(self, event: Any) -> None:
            progress = event.progress
            host.on_progress(progress.name, progress)

        def onQueryIdle(self, event: Any) -> None:
            return None

        def onQueryTerminated(self, event: Any) -> None:
            return None

    listener = Listener()
    spark.streams.addListener(listener)
    return listener
