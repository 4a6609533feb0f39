"""What Spark reports of the hosted queries: each batch's progress, idle queries, stage metrics.

The intake is the one writer of a query's measured state (rates, rows, timelines, latency window,
state size, stage costs). It runs on Spark's listener bus and the stage poller's thread, holds the
host's lock for in-memory writes only, and tells the scheduler which batches completed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sluice.api.common import query_labels
from sluice.api.constants import GRID
from sluice.scheduler import intervals

from .batching import gives_group_back
from .gate import with_progress
from .host_state import HostState
from .hosted import COLD_BATCHES, HostedQuery
from .jvm_sink import SinkMetric
from .kafka_lag import kafka_position
from .latency import BatchLatency, batch_latency
from .listener import listen
from .pipeline import OBSERVED
from .stages import StageCost, StagePoller


class Intake:
    """The host's listener: Spark's reports in, the hosted queries' measured fields out."""

    def __init__(self, host: HostState) -> None:
        self.host = host
        self._listener: Any = None
        self._stages: StagePoller | None = None

    def listen(self, spark: Any) -> Intake:
        """Start hearing Spark: its streaming query listener and, where its UI runs, the stage poller."""
        self._listener = listen(spark, on_progress=self.on_progress, on_idle=self.on_idle)
        ui = spark.sparkContext.uiWebUrl
        if ui:
            self._stages = StagePoller(ui, spark.sparkContext.applicationId, self.on_stages, interval=3.0).start()
        return self

    def stop(self, spark: Any) -> None:
        if self._listener is not None:
            spark.streams.removeListener(self._listener)
            self._listener = None
        if self._stages is not None:
            self._stages.stop()
            self._stages = None

    def on_realtime(self, hosted: HostedQuery, entry: BatchLatency) -> None:
        """A Real-time query's latency entry, read at its sink topic (`realtime.SinkLatency`)."""
        with self.host.lock:
            if entry.committed >= self.host.measure_from:
                hosted.window.add(entry)
            hosted.output_rows += entry.rows

    def on_idle(self, spark_id: str) -> None:
        """Spark reports a query idle (no new data; since Spark 3.5 no progress event says so): its
        input rate is zero now, not the last batch's. DS2 sizes on these rates."""
        host = self.host
        with host.lock:
            for hosted in host.queries.values():
                if hosted.spark_id == spark_id:
                    hosted.input_rate = hosted.processing_rate = 0.0
                    hosted.offsets.idle()  # no new data: nothing produced, nothing behind
                    host.metrics.input_rate.labels(*query_labels(hosted.query.key)).set(0.0)

    def on_progress(self, name: str, progress: Any) -> None:
        """A batch's StreamingQueryProgress (from Spark's listener bus): rates, phase times, state,
        and the batch's latency from the production times Spark observed inside its write."""
        host = self.host
        rows = int(progress.numInputRows or 0)
        newest = (progress.eventTime or {}).get("max")
        oldest_input = (progress.eventTime or {}).get("min")
        operators = progress.stateOperators or []
        observed = (progress.observedMetrics or {}).get(OBSERVED)
        output = int(observed["n"] or 0) if observed is not None else 0
        produced = [float(x) for x in (observed["q"] or [])] if observed is not None else []
        written = sink_report(progress)  # the JVM sink's batches: output, ages and times from its commit
        if written is not None:
            output, produced = written.rows, written.produced
        position = kafka_position((str(s.description or ""), s.latestOffset, s.endOffset) for s in progress.sources or [])
        with host.lock:
            hosted = host.by_spark_name.get(name)
            if hosted is None:
                return
            hosted.input_rows += rows
            timeline_id = int(progress.batchId)
            timeline = hosted.timeline(timeline_id)
            timeline.rows += rows
            timeline.durations_ms = {k: float(v) for k, v in (progress.durationMs or {}).items()}
            if rows > 0 and len(hosted.cold_ms) < COLD_BATCHES:  # its cost as `batch_costs` takes it
                timeline.cold = True
                ms = timeline.durations_ms
                hosted.cold_ms.append(round(max(ms.get("triggerExecution", 0.0) - ms.get("commitOffsets", 0.0)
                                                - timeline.gate_wait * 1000, 0.0), 1))
            if written is not None:
                timeline.committed = written.committed
                timeline.turn_wait = written.turn_wait
                if written.thread_cpu is not None:  # the driver's CPU since the last commit (a new thread: none)
                    last_cpu, hosted.thread_cpu = hosted.thread_cpu, written.thread_cpu
                    if last_cpu is not None and written.thread_cpu >= last_cpu:
                        timeline.driver_cpu = written.thread_cpu - last_cpu
                if hosted.last_newest is None:
                    hosted.last_newest = written.began
                host.gate.finish(hosted, timeline_id, written.committed - written.began)
            if rows > 0 and hosted.input_since is None:  # its first batch with rows (DS2's warm-up counts from it)
                hosted.input_since = timeline.committed
            hosted.output_rows += output
            if timeline.committed is not None and output > 0 and len(produced) == len(GRID):
                latency = batch_latency(timeline.committed, output, produced)
                if timeline.committed >= host.measure_from:
                    hosted.window.add(latency)
                    hosted.log_phases(timeline)
                hosted.last_newest = produced[-1]
                timeline.latency = max(latency.latencies)
            if rows > 0 and progress.timestamp and hosted.interval is not None:
                # the source's lag: its oldest input event, else (no watermark) its oldest output row's;
                # not from rows older than the query's (re)start (a restart's backlog is no lag)
                oldest = _epoch(oldest_input) if oldest_input else (
                    produced[0] if hosted.spec.window_size is None and output > 0 and len(produced) == len(GRID) else None)
                if oldest is not None and oldest >= hosted.interval_since:
                    before = hosted.timelines.get(timeline_id - 1)
                    took = before.durations_ms.get("triggerExecution") if before is not None else None
                    overrun = 0.0 if took is None else took / 1000 - hosted.interval
                    timeline.lag = intervals.lag_of(_epoch(progress.timestamp), oldest, hosted.interval, overrun)
                    if timeline.lag is not None and not timeline.cold and "triggerExecution" in timeline.durations_ms:
                        # its oldest row's wait past the interval (a late predecessor's overrun
                        # too) and its trigger up to the sink's write, where latencies are taken
                        ms = timeline.durations_ms
                        hosted.overshoots.append(timeline.lag + max(overrun, 0.0)
                                                 + (ms["triggerExecution"] - ms.get("commitOffsets", 0.0)) / 1000)
            hosted.input_rate = float(progress.inputRowsPerSecond or 0.0)
            hosted.processing_rate = float(progress.processedRowsPerSecond or 0.0)
            if position is not None and progress.timestamp:
                hosted.offsets.observe(_epoch(progress.timestamp), position)
            lag = hosted.offsets.lag
            if newest:  # the newest *input* event (windowed output rows carry window ends instead)
                hosted.newest_input = _epoch(newest)
            hosted.state_rows = sum(int(op.numRowsTotal or 0) for op in operators)
            hosted.state_bytes = sum(int(op.memoryUsedBytes or 0) for op in operators)
            labels = query_labels(hosted.query.key)
            rate, state_rows, state_bytes = hosted.input_rate, hosted.state_rows, hosted.state_bytes
            stateful = hosted.query.spec.stateful
            # the batch's slot frees now that its progress is known, not with the query's next ask:
            # a query batching every 60 s held its slot a minute after its batch had finished,
            # and every other batch waited in the gate (the critical path's "gate wait", 52-94%)
            done, hosted.completions = ([c for c in hosted.completions if c.batch_id <= timeline_id],
                                        [c for c in hosted.completions if c.batch_id > timeline_id])
            done = [with_progress(hosted, c) for c in done]
            group = hosted.group
            if group is not None and gives_group_back(group.batch_id, group.last, timeline_id,
                                                      timeline.durations_ms.get("triggerExecution"),
                                                      hosted.interval, max(hosted.timelines)):
                hosted.group = None  # a trigger wait follows: the slot goes back now, the next batch asks
                done = [replace(c, ends_group=True) if c.batch_id == timeline_id else c for c in done]
        if done and host.scheduler is not None:
            host.scheduler.complete(hosted.query.key, done)
        if stateful:
            for wake in host.after_stateful_commit:
                wake()
        if written is not None:
            host.metrics.batches.labels(*labels).inc()
            host.metrics.batch_seconds.labels(*labels).set(written.committed - written.began)
        host.metrics.rows.labels(*labels).inc(rows)
        host.metrics.input_rate.labels(*labels).set(rate)
        host.metrics.state_rows.labels(*labels).set(state_rows)
        host.metrics.state_bytes.labels(*labels).set(state_bytes)
        if lag is not None:
            host.metrics.kafka_lag.labels(*labels).set(lag)

    def on_stages(self, stages: list[StageCost]) -> None:
        """Spark's task metrics for completed stages, per query and per batch."""
        host = self.host
        for stage in stages:
            with host.lock:
                hosted = host.queries.get(stage.query)
                if hosted is None:
                    continue
                if stage.batch_id != hosted.stages_batch:
                    hosted.stages, hosted.stages_batch = {}, stage.batch_id
                name = stage.name.split(" at ")[0]
                hosted.stages[f"{stage.stage_id}:{name}"] = round(stage.useful_seconds, 4)
                timeline = hosted.timeline(stage.batch_id)
                timeline.useful_seconds += stage.useful_seconds
                timeline.cpu_seconds += stage.cpu_seconds
                timeline.run_seconds += stage.run_seconds
                timeline.tasks = max(timeline.tasks, stage.tasks)
                if stage.span is not None:
                    timeline.stages.append(stage.span)
                labels = query_labels(stage.query)
            host.metrics.task_run.labels(*labels).inc(stage.run_seconds)
            host.metrics.task_cpu.labels(*labels).inc(stage.cpu_seconds)
            host.metrics.fetch_wait.labels(*labels).inc(stage.shuffle_fetch_wait_seconds)
            host.metrics.stage_records.labels(*labels).inc(stage.input_records + stage.shuffle_read_records)


@dataclass(frozen=True, slots=True)
class SinkReport:
    """A batch as the JVM sink's commit reported it (`jvm_sink.SinkMetric`), in epoch seconds."""

    rows: int
    began: float
    committed: float
    produced: list[float]
    """Production times of its rows at each GRID quantile, oldest first (empty: no rows)."""
    thread_cpu: float | None = None
    """Seconds of CPU the query's stream thread had used by the commit (None: not known)."""
    turn_wait: float | None = None
    """Seconds the batch's bulk tasks waited for a turn of the urgent lane (None: not seen)."""


def sink_report(progress: Any) -> SinkReport | None:
    metrics = (progress.sink.metrics if progress.sink is not None else None) or {}
    if SinkMetric.COMMITTED not in metrics or metrics.get(SinkMetric.BATCH) != str(progress.batchId):
        return None  # not the JVM sink's, or an earlier batch's report
    began = int(metrics[SinkMetric.BEGAN]) / 1000
    ages = [float(a) / 1000 for a in metrics[SinkMetric.AGES].split(",") if a]
    cpu = int(metrics.get(SinkMetric.THREAD_CPU, "-1"))
    turns = int(metrics.get(SinkMetric.TURN_WAIT, "-1"))
    return SinkReport(int(metrics[SinkMetric.ROWS]), began, int(metrics[SinkMetric.COMMITTED]) / 1000,
                      [began - age for age in ages], cpu / 1e9 if cpu >= 0 else None,
                      turns / 1e9 if turns >= 0 else None)


def _epoch(iso: str) -> float:
    """Spark's progress timestamps ('2026-11-21T10:00:00.123Z') as epoch seconds."""
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
