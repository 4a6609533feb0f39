"""Many tenants' queries in one SparkSession: their lifecycle, and what Spark reports of them.

Concurrency (one model, two rules):
- **One owner of lifecycle.** Starting, stopping, restarting, suspending, retrying a Pending
  query and noticing a failed one run on one thread only: the host's lifecycle thread. Callers
  (the control API, `sluice run`, the pod's main loop) submit to it and wait for the result, so a
  query can never be started twice and the control API's event loop never calls Spark. The same
  thread retries Pending queries and notices failed ones every `retry_every` seconds.
- **One lock for state.** `HostedQuery` fields are written by the gate (Spark's batch threads),
  the progress listener (Spark's listener bus) and the stage poller, and read by status calls.
  Every one of them holds `QueryHost.lock` for in-memory reads and writes only, never across a
  Spark call, a scheduler call or a wait, so no thread can block another for longer than a
  copy. (Stopping a query waits for its running batch: the lock is not held then.)
"""

from __future__ import annotations

import logging
import math
import os
import shutil
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from prometheus_client import CollectorRegistry

from sluice.api.common import query_labels, shown
from sluice.api.constants import BANDS
from sluice.api.files import FilesOutsideRoot, confine_query, tenant_root
from sluice.api.query import FilesSink, FilesSource, KafkaSink, StreamingQuery
from sluice.api.runtime import QueryPhase, QueryStatus
from sluice.scheduler import execution, intervals
from sluice.scheduler.bands import band_name
from sluice.scheduler.core import SchedulerError

from . import jvm_sink, realtime
from .gate import FixedPool, Gate, Gatekeeper, JvmGate, with_progress
from .hosted import HostedQuery, query_spec
from .jvm_sink import SinkMetric
from .kafka_check import kafka_problem
from .kafka_lag import kafka_position
from .latency import GRID, BatchLatency, LatencyWindow, Summary, batch_latency
from .listener import listen
from .megaphone import StatefulQuery
from .metrics import LatencyCollector, LatencySnapshot, Metrics
from .pipeline import (
    OBSERVED,
    WARM_UP_ENV,
    build,
    direct_frame,
    direct_sink,
    spark_name,
    warm_shape,
    warm_up,
)
from .session import driver_process, exit_text
from .spark_pools import ensure_pool
from .stages import StageCost, StagePoller, job_description

log = logging.getLogger("sluice.runtime")
T = TypeVar("T")


class QueryHost:
    """Hosts a pool's queries. `gate`: the scheduler, or None to run ungated in `fixed_pool`."""

    def __init__(
        self,
        spark: Any,
        checkpoints: Path,
        gate: Gatekeeper | None,
        fixed_pool: FixedPool | None = None,
        metrics: Metrics | None = None,
        clock: Callable[[], float] = time.time,
        latency_horizon: float = 60.0,
        measure_from: float = 0.0,
        retry_every: float = 5.0,
        interval_dwell: float = 30.0,
        files_root: str | None = None,
        warm_up: bool | None = None,
    ) -> None:
        self.spark = spark
        self.warm_up = warm_up if warm_up is not None else os.environ.get(WARM_UP_ENV, "1") != "0"
        """Run a stateful query's steps once on synthetic rows before its stream first starts
        (`pipeline.warm_up`): its first micro-batches then skip the JVM's cold start. Default: on
        unless `SLUICE_WARM_UP=0`. One warm-up serves every query of its shape (`warm_shape`)."""
        self._warmed: set[str] = set()
        self.files_root = files_root
        """Each namespace's `files` paths are confined to `<files_root>/<namespace>` (None: anywhere)."""
        self.checkpoints = checkpoints
        self.scheduler = gate
        self.metrics = metrics or Metrics(CollectorRegistry())
        self.metrics.registry.register(LatencyCollector(self.latency_snapshots))
        self.clock = clock
        self.lock = threading.Lock()
        self.queries: dict[str, HostedQuery] = {}
        """Every hosted query by key; changed only on the lifecycle thread, under the lock."""
        self._by_spark_name: dict[str, HostedQuery] = {}
        self.latency_horizon = latency_horizon
        self.retry_every = retry_every
        self.interval_dwell = interval_dwell
        """Seconds a query keeps an SLA-driven interval before it may change (a change restarts it)."""
        self.passes = 0
        """Lifecycle checks run (each restarts at most one query for its interval)."""
        self.after_stateful_commit: list[Callable[[], None]] = []
        """Called (from Spark's listener thread) once a stateful query's batch has committed: the
        executor scaler wakes so a state move lands while the next batch is still planning."""
        self.measure_from = measure_from
        """Batches committed before this wall-clock time are left out of latency figures (warm-up)."""
        self.gate = Gate(spark, gate, fixed_pool or (lambda q: None), self.metrics, self.lock, clock)
        self.direct = jvm_sink.enabled() and jvm_sink.loaded(spark)
        """Noop and Kafka sinks are written by Sluice's JVM sink (else every sink by foreachBatch)."""
        if jvm_sink.enabled() and not self.direct:
            log.warning("Sluice's sink is not on this session's class path; every batch goes through foreachBatch.")
        self._gates = jvm_sink.gates(spark) if self.direct and gate is not None else None
        self._owner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sluice-lifecycle")
        self._closed = threading.Event()
        self._listener = listen(spark, on_progress=self.on_progress, on_idle=self.on_idle)
        self._stages: StagePoller | None = None
        ui = spark.sparkContext.uiWebUrl
        if ui:
            self._stages = StagePoller(ui, spark.sparkContext.applicationId, self.on_stages, interval=3.0).start()
        self._driver = driver_process(spark)
        """The driver JVM's process (None if this Python did not start it): its exit is noticed at once."""
        self.broken: str | None = None
        """Why this host can no longer run its queries (its Spark driver is gone), or None."""
        self.on_broken: list[Callable[[], None]] = []
        """Called once, from the lifecycle ticker, when `broken` is set (the runtime process exits)."""
        self._ticker = threading.Thread(target=self._tick, name="sluice-lifecycle-tick", daemon=True)
        self._ticker.start()

    # ------------------------------------------------------------------ lifecycle (the owner thread)

    def submit(self, work: Callable[[], T]) -> Future[T]:
        """Run `work` on the lifecycle thread; the future holds its result."""
        return self._owner.submit(work)

    def post_add(self, query: StreamingQuery, weight: float = 1.0) -> Future[HostedQuery]:
        """Start a query (or restart it with a new spec) from its checkpoint. `weight`: its
        tenant's quota weight on the pool (Spark's FAIR pool weight under `fair`)."""
        return self.submit(lambda: self._add(query, weight))

    def post_remove(self, key: str, keep_checkpoint: bool = True) -> Future[bool]:
        """Stop and forget a query; False if it was not hosted."""
        return self.submit(lambda: self._remove(key, keep_checkpoint))

    def post_suspend(self, key: str, suspended: bool) -> Future[bool]:
        """Suspend or resume a query; False if it is not hosted."""
        return self.submit(lambda: self._suspend(key, suspended))

    def add(self, query: StreamingQuery, weight: float = 1.0) -> HostedQuery:
        return self.post_add(query, weight).result()

    def remove(self, key: str, keep_checkpoint: bool = True) -> bool:
        return self.post_remove(key, keep_checkpoint).result()

    def suspend(self, key: str, suspended: bool) -> bool:
        return self.post_suspend(key, suspended).result()

    def refresh(self) -> None:
        """Notice queries that died (source unreachable, sink failing, ...); retry Pending ones."""
        self.submit(self._refresh).result()

    def stop_all(self) -> None:
        """Stop every query and the host's threads (the SparkSession stays)."""
        if self._closed.is_set():
            return
        self._closed.set()
        self._ticker.join(timeout=5)
        self.submit(self._stop_all).result()
        self._owner.shutdown(wait=True)

    def _tick(self) -> None:
        while not self._closed.wait(min(self.retry_every, 2.0)):
            if self._driver is not None and (code := self._driver.poll()) is not None:
                self._break(f"exited ({exit_text(code)})")
                return
            try:
                self.submit(self._refresh).result()
            except Exception as error:
                if self._closed.is_set():  # stop_all meanwhile: the session is stopping
                    return
                if not driver_gone(error):
                    log.warning("lifecycle check failed, tried again in %.0f s: %s", self.retry_every, one_line(error))
                    continue
                self._break(f"stopped answering ({one_line(error)})")
                return

    def _break(self, what: str) -> None:
        self.broken = f"the Spark driver {what}; every query of this runtime has stopped, so the runtime must restart"
        log.error("%s", self.broken)
        for callback in self.on_broken:
            callback()

    def _add(self, query: StreamingQuery, weight: float) -> HostedQuery:
        outside = None
        if self.files_root is not None:  # a tenant's files stay under <root>/<namespace>
            try:
                query = confine_query(query, self.files_root)
                for part in (query.spec.source, query.spec.sink):
                    if isinstance(part, FilesSource | FilesSink):
                        _confine_real(part.path, query.tenant, self.files_root)
            except FilesOutsideRoot as refused:
                outside = str(refused)
        old = self.queries.get(query.key)
        if (old is not None and old.phase == "Running" and old.spec == query_spec(query, weight)
                and old.query.model_dump(mode="json") == query.model_dump(mode="json")):
            # the same registration again (an operator restart resumes every query): a restart
            # would re-run the batch in flight, so keep it running
            return old
        if old is not None:  # stopped while still listed: status never answers 404 mid-update
            self._stop(old)
            self.metrics.forget(*query_labels(query.key))
        window = LatencyWindow(query.spec.sla.latencyTarget.seconds, horizon=self.latency_horizon)
        hosted = HostedQuery(query, window, query_spec(query, weight))
        with self.lock:
            self.queries[query.key] = hosted
            self._by_spark_name[spark_name(query.key)] = hosted
        self._export_latency(hosted)
        if outside is not None:
            self._set_phase(hosted, "Failed", f"{outside}.")
            return hosted
        if query.spec.suspend:
            self._set_phase(hosted, "Suspended", "spec.suspend is true; the checkpoint is kept.")
            return hosted
        self._start(hosted)
        return hosted

    def _set_phase(self, hosted: HostedQuery, phase: QueryPhase, message: str) -> None:
        with self.lock:
            hosted.phase, hosted.message = phase, message
        self.metrics.phase.labels(*query_labels(hosted.query.key)).set(1 if phase == "Running" else 0)

    def _start(self, hosted: HostedQuery) -> None:
        query = hosted.query
        with self.lock:
            hosted.group = None  # a restart may replay a batch id: ask afresh
        problem = kafka_problem(query)
        if problem is not None:
            with self.lock:
                hosted.retry_at = self.clock() + self.retry_every
            self._set_phase(hosted, "Pending", problem)
            return
        mode = execution.mode_of(query)
        with self.lock:
            hosted.execution, hosted.execution_reason = mode.mode, mode.reason
        if mode.mode == "realTime":  # no micro-batches: nothing for the scheduler to order
            self._start_realtime(hosted)
            return
        scheduler = self.scheduler
        try:
            if scheduler is not None and not scheduler.register(hosted.spec):
                with self.lock:
                    hosted.gate_mode = "fail-open"
        except SchedulerError as refused:  # the pool's scheduler cannot take it (yet)
            with self.lock:
                hosted.retry_at = self.clock() + self.retry_every
            self._set_phase(hosted, "Pending", f"{refused} (retrying).")
            return
        fixed = self.gate.fixed_pool(hosted.spec) if scheduler is None else None
        try:
            if fixed is not None:  # before its first batch names it (else Spark makes it at weight 1)
                ensure_pool(self.spark, fixed.name, fixed.weight, fair_inside=True)
            self.spark.conf.set("spark.sql.shuffle.partitions", str(query.spec.resources.shufflePartitions))
            if self.warm_up and query.spec.stateful and (shape := warm_shape(query)) not in self._warmed:
                self._warmed.add(shape)
                started = time.monotonic()
                # gated: in the least urgent band, so that bulk turns pace it behind running batches
                pool = band_name(BANDS - 1) if scheduler is not None else None
                try:
                    warm_up(self.spark, query, pool)
                    log.info("query %s warmed up in %.1f s", query.key, time.monotonic() - started)
                except Exception as error:  # best effort: the stream's own start reports real errors
                    log.info("query %s: warm-up skipped (%s)", query.key, one_line(error))
            if self.direct and direct_sink(query):  # Spark writes it; the JVM sink asks the gate
                plan = build(self.spark, query, measured=False, keep_ts=True)
                frame, options = direct_frame(plan.frame, query)
                options |= {"sluice.query": query.key, "sluice.grid": ",".join(str(1 - q) for q in GRID),
                            "sluice.description": job_description(query.key)}
                if fixed is not None:
                    options["sluice.pool"] = fixed.name
                if self._gates is not None:
                    self._gates.register(query.key, JvmGate(self.gate, hosted))
                writer = frame.writeStream.format(jvm_sink.PROVIDER).options(**options)
            else:
                plan = build(self.spark, query)
                writer = plan.frame.writeStream.foreachBatch(self.gate.for_query(hosted))
            writer = (writer.queryName(spark_name(query.key)).outputMode(plan.output_mode)
                      .option("checkpointLocation", str(self.checkpoint(query.key))))
            interval = hosted.interval if hosted.interval is not None and query.spec.trigger is None \
                else self._choose_interval(hosted)
            if interval > 0:
                writer = writer.trigger(processingTime=f"{int(interval * 1000)} milliseconds")
            handle = writer.start()
        except Exception as error:  # a source, sink or expression Spark rejects: this query only
            if self._gates is not None:
                self._gates.unregister(query.key)
            self._set_phase(hosted, "Failed", one_line(error))
            log.warning("query %s failed to start: %s", query.key, hosted.message)
            return
        with self.lock:
            hosted.handle = handle
            hosted.spark_id = str(handle.id)
        self._set_phase(hosted, "Running", "")

    def _start_realtime(self, hosted: HostedQuery) -> None:
        """Run a query in Spark's Real-time Mode: no micro-batches, so no gate and no interval;
        its latency comes from a consumer of its sink topic (`sluice.runtime.realtime`). Its task
        slots are reserved with the scheduler first, out of the micro-batch queries' capacity; a
        reservation the scheduler refuses leaves it Pending with the scheduler's sentence."""
        query = hosted.query
        slots = realtime.slots_of(query)
        if self.scheduler is not None:
            try:
                self.scheduler.register(replace(hosted.spec, reserved_slots=slots))
            except SchedulerError as refused:
                with self.lock:
                    hosted.retry_at = self.clock() + self.retry_every
                self._set_phase(hosted, "Pending", f"{refused} (retrying).")
                return
        with self.lock:
            hosted.reserved_slots = slots
        try:
            plan = build(self.spark, query, measured=False, keep_ts=True)
            handle = realtime.writer(plan.frame, query, str(self.checkpoint(query.key))).queryName(
                spark_name(query.key)).start()
        except Exception as error:  # Spark refuses it: this query only
            if self.scheduler is not None:
                self.scheduler.unregister(query.key)
            with self.lock:
                hosted.reserved_slots = 0
            self._set_phase(hosted, "Failed", one_line(error))
            log.warning("query %s failed to start in Real-time Mode: %s", query.key, hosted.message)
            return
        assert isinstance(query.spec.sink, KafkaSink)  # realtime_problem allowed nothing else

        def report(entry: BatchLatency) -> None:
            with self.lock:
                if entry.committed >= self.measure_from:
                    hosted.window.add(entry)
                hosted.output_rows += entry.rows

        with self.lock:
            hosted.handle = handle
            hosted.interval, hosted.interval_reason = None, "Real-time Mode has no micro-batch interval."
            hosted.probe = realtime.SinkLatency(query.spec.sink, spark_name(query.key), report).start()
        self._set_phase(hosted, "Running", "")

    def _choose_interval(self, hosted: HostedQuery) -> float:
        """The interval to start with: spec.trigger, else the SLA's (pure `intervals.next_interval`)."""
        trigger = hosted.query.spec.trigger
        if trigger is not None:
            choice = intervals.Choice(trigger.interval.seconds, "spec.trigger sets it.")
        else:
            with self.lock:
                costs = self._costs_of(hosted)
                current = hosted.interval
            choice = (intervals.first(hosted.spec.latency_target, costs, self._delay(hosted)) if current is None
                      else intervals.next_interval(current, hosted.spec.latency_target, costs, self._delay(hosted)))
        with self.lock:
            hosted.interval, hosted.interval_reason = choice.interval, choice.reason
            hosted.interval_since = self.clock()
        return choice.interval

    @staticmethod
    def _delay(hosted: HostedQuery) -> float | None:
        """A windowed aggregation's watermark delay; None for other queries (see `intervals`)."""
        return hosted.spec.watermark_delay if hosted.spec.window_size is not None else None

    def _costs_of(self, hosted: HostedQuery) -> intervals.Costs:
        """What the interval rests on: the recent batches' measured costs, or before any, Spark's
        known floor, a cautious cost per row and the spec's expected rate."""
        found = intervals.measured(hosted.batch_costs(), hosted.input_rate, hosted.recent_gate_wait(),
                                   hosted.recent_commit())
        if found is not None:
            return found
        rate = hosted.input_rate or hosted.query.spec.resources.expectedRate or 0.0
        return intervals.Costs(intervals.FIXED_PRIOR, intervals.PER_ROW_PRIOR, rate, 0.0, intervals.COMMIT_PRIOR)

    def _adapt_interval(self, hosted: HostedQuery) -> bool:
        """Restart a query whose SLA-driven interval should change (rarely: hysteresis and a dwell);
        True if it did."""
        if hosted.query.spec.trigger is not None or hosted.phase != "Running" or hosted.interval is None \
                or hosted.execution == "realTime":
            return False
        key = hosted.query.key
        if self.clock() - hosted.interval_since < self.interval_dwell:
            return False
        with self.lock:
            if len(hosted.batch_costs(since=hosted.interval_since)) < 3:
                return False  # too little measured at this interval
            costs = self._costs_of(hosted)
        choice = intervals.next_interval(hosted.interval, hosted.spec.latency_target, costs, self._delay(hosted))
        if abs(choice.interval - hosted.interval) < 1e-3:
            with self.lock:
                hosted.interval_reason = choice.reason
            return False
        handle = hosted.handle
        if handle is not None and not _between_batches(handle):
            return False  # a batch still in flight after 5 s: never abort one for an interval (next check)
        log.info("query %s: batch interval %.0f ms -> %.0f ms (%s)", key, hosted.interval * 1000,
                 choice.interval * 1000, choice.reason)
        self._stop(hosted)
        with self.lock:  # _start keeps it: the choice is made
            hosted.interval, hosted.interval_reason, hosted.interval_since = choice.interval, choice.reason, self.clock()
            hosted.interval_passes.append(self.passes)
        self._start(hosted)
        return True

    def checkpoint(self, key: str) -> Path:
        tenant, name = key.split("/", 1)
        return self.checkpoints / tenant / name

    def _suspend(self, key: str, suspended: bool) -> bool:
        hosted = self.queries.get(key)
        if hosted is None:
            return False
        if suspended and hosted.phase != "Suspended":
            self._stop(hosted)
            self._set_phase(hosted, "Suspended", "suspended; the checkpoint is kept.")
        elif not suspended and hosted.phase == "Suspended":
            self._start(hosted)
        return True

    def _remove(self, key: str, keep_checkpoint: bool) -> bool:
        hosted = self.queries.get(key)
        if hosted is None:
            return False
        self._stop(hosted)
        with self.lock:
            del self.queries[key]
            self._by_spark_name.pop(spark_name(key), None)
        self.metrics.forget(*query_labels(key))
        if not keep_checkpoint:
            shutil.rmtree(self.checkpoint(key), ignore_errors=True)
        return True

    def _stop(self, hosted: HostedQuery) -> None:
        """Stop a query; a batch waiting at the gate is released first (q.stop() waits for it)."""
        with self.lock:
            hosted.stopping = True
            handle, hosted.handle = hosted.handle, None
            probe, hosted.probe = hosted.probe, None
        if probe is not None:
            probe.stop()
        if self.scheduler is not None:
            self.gate.flush(hosted)
            self.scheduler.unregister(hosted.query.key)
        if self._gates is not None:
            self._gates.unregister(hosted.query.key)
        with self.lock:
            hosted.reserved_slots = 0
        if handle is not None:
            _between_batches(handle)
            try:
                handle.stop()
            except Exception as error:  # stopping a failed query may rethrow its error
                log.info("stopping %s: %s", hosted.query.key, one_line(error))
        with self.lock:
            hosted.stopping = False

    def _stop_all(self) -> None:
        for hosted in list(self.queries.values()):
            self._stop(hosted)
        if self._listener is not None:
            self.spark.streams.removeListener(self._listener)
            self._listener = None
        if self._stages is not None:
            self._stages.stop()
            self._stages = None

    def _refresh(self) -> None:
        """Retry Pending queries, notice failed ones, and change at most one query's interval: a
        restart holds this thread for seconds (the batch in flight, the stop, the new plan), and
        registrations queue behind it (at 44 queries, many restarts in one check held a new
        query's registration past a minute)."""
        self.passes += 1
        restarted = False
        for hosted in list(self.queries.values()):
            if hosted.phase == "Pending" and hosted.retry_at and self.clock() >= hosted.retry_at:
                self._start(hosted)
            handle = hosted.handle
            if handle is not None and hosted.phase == "Running" and not handle.isActive:
                error = handle.exception()
                self._set_phase(hosted, "Failed", one_line(error) if error else "the query stopped")
            if not restarted:
                restarted = self._adapt_interval(hosted)

    # ------------------------------------------------------------------ what Spark reports

    def _export_latency(self, hosted: HostedQuery) -> None:
        """The latency gauges read the window when Prometheus scrapes, never on the batch path."""
        labels = query_labels(hosted.query.key)

        def read(pick: Callable[[Summary], float | None]) -> Callable[[], float]:
            def value() -> float:
                with self.lock:
                    figure = pick(hosted.window.summary(self.clock()))
                return math.nan if figure is None else figure

            return value

        self.metrics.latency_p50.labels(*labels).set_function(read(lambda s: s.p50))
        self.metrics.latency_p99.labels(*labels).set_function(read(lambda s: s.p99))
        self.metrics.attainment.labels(*labels).set_function(read(lambda s: s.attainment))

    def latency_snapshots(self) -> list[LatencySnapshot]:
        """Each query's latency bookkeeping, for the scrape-time collector."""
        with self.lock:
            return [LatencySnapshot(query_labels(key), h.window.target, tuple(h.window.buckets), h.window.latency_sum,
                                    float(h.window.all_rows), h.window.all_within,
                                    tuple(sorted(h.path_shares()[0].items())))
                    for key, h in self.queries.items()]

    def on_idle(self, spark_id: str) -> None:
        """Spark reports a query idle (no new data; since Spark 3.5 no progress event says so): its
        input rate is zero now, not the last batch's. DS2 sizes on these rates."""
        with self.lock:
            for hosted in self.queries.values():
                if hosted.spark_id == spark_id:
                    hosted.input_rate = hosted.processing_rate = 0.0
                    hosted.offsets.idle()  # no new data: nothing produced, nothing behind
                    self.metrics.input_rate.labels(*query_labels(hosted.query.key)).set(0.0)

    def on_progress(self, name: str, progress: Any) -> None:
        """A batch's StreamingQueryProgress (from Spark's listener bus): rates, phase times, state,
        and the batch's latency from the production times Spark observed inside its write."""
        rows = int(progress.numInputRows or 0)
        newest = (progress.eventTime or {}).get("max")
        operators = progress.stateOperators or []
        observed = (progress.observedMetrics or {}).get(OBSERVED)
        output = int(observed["n"] or 0) if observed is not None else 0
        produced = [float(x) for x in (observed["q"] or [])] if observed is not None else []
        written = _sink_report(progress)  # the JVM sink's batches: output, ages and times from its commit
        if written is not None:
            output, produced = written.rows, written.produced
        position = kafka_position((str(s.description or ""), s.latestOffset, s.endOffset) for s in progress.sources or [])
        with self.lock:
            hosted = self._by_spark_name.get(name)
            if hosted is None:
                return
            hosted.input_rows += rows
            timeline_id = int(progress.batchId)
            timeline = hosted.timeline(timeline_id)
            timeline.rows += rows
            timeline.durations_ms = {k: float(v) for k, v in (progress.durationMs or {}).items()}
            if written is not None:
                timeline.committed = written.committed
                if hosted.last_newest is None:
                    hosted.last_newest = written.began
                self.gate.finish(hosted, timeline_id, written.committed - written.began)
            hosted.output_rows += output
            if timeline.committed is not None and output > 0 and len(produced) == len(GRID):
                latency = batch_latency(timeline.committed, output, produced)
                if timeline.committed >= self.measure_from:
                    hosted.window.add(latency)
                    hosted.log_phases(timeline)
                hosted.last_newest = produced[-1]
                timeline.latency = max(latency.latencies)
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
        if done and self.scheduler is not None:
            self.scheduler.complete(hosted.query.key, done)
        if stateful:
            for wake in self.after_stateful_commit:
                wake()
        if written is not None:
            self.metrics.batches.labels(*labels).inc()
            self.metrics.batch_seconds.labels(*labels).set(written.committed - written.began)
        self.metrics.rows.labels(*labels).inc(rows)
        self.metrics.input_rate.labels(*labels).set(rate)
        self.metrics.state_rows.labels(*labels).set(state_rows)
        self.metrics.state_bytes.labels(*labels).set(state_bytes)
        if lag is not None:
            self.metrics.kafka_lag.labels(*labels).set(lag)

    def on_stages(self, stages: list[StageCost]) -> None:
        """Spark's task metrics for completed stages, per query and per batch."""
        for stage in stages:
            with self.lock:
                hosted = self.queries.get(stage.query)
                if hosted is None:
                    continue
                if stage.batch_id != hosted.stages_batch:
                    hosted.stages, hosted.stages_batch = {}, stage.batch_id
                name = stage.name.split(" at ")[0]
                hosted.stages[f"{stage.stage_id}:{name}"] = round(stage.useful_seconds, 4)
                timeline = hosted.timeline(stage.batch_id)
                timeline.useful_seconds += stage.useful_seconds
                if stage.span is not None:
                    timeline.stages.append(stage.span)
                labels = query_labels(stage.query)
            self.metrics.task_run.labels(*labels).inc(stage.run_seconds)
            self.metrics.task_cpu.labels(*labels).inc(stage.cpu_seconds)
            self.metrics.fetch_wait.labels(*labels).inc(stage.shuffle_fetch_wait_seconds)
            self.metrics.stage_records.labels(*labels).inc(stage.input_records + stage.shuffle_read_records)

    # ------------------------------------------------------------------ status (reads only)

    def status(self, key: str) -> QueryStatus:
        """A hosted query's status; KeyError if it is not hosted."""
        with self.lock:
            return self.queries[key].status(self.clock(), self.scheduler is not None)

    def statuses(self) -> dict[str, QueryStatus]:
        now, gated = self.clock(), self.scheduler is not None
        with self.lock:
            return {key: hosted.status(now, gated) for key, hosted in self.queries.items()}

    def stateful_batches(self) -> dict[str, int]:
        """Committed batches of each running stateful query (the executor drain paces on them)."""
        with self.lock:
            return {key: h.batches for key, h in self.queries.items() if h.phase == "Running" and h.query.spec.stateful}

    def stateful_queries(self) -> list[StatefulQuery]:
        """The running stateful queries with Spark's handle and their SLA slack (state moves pace on them)."""
        with self.lock:
            running = [(key, h) for key, h in self.queries.items()
                       if h.phase == "Running" and h.query.spec.stateful and h.handle is not None]
            return [StatefulQuery(key, h.handle, h.batches, h.spec.latency_target - _recent_latency(h), _recent_batches(h))
                    for key, h in running]


@dataclass(frozen=True, slots=True)
class SinkReport:
    """A batch as the JVM sink's commit reported it (`jvm_sink.SinkMetric`), in epoch seconds."""

    rows: int
    began: float
    committed: float
    produced: list[float]
    """Production times of its rows at each GRID quantile, oldest first (empty: no rows)."""


def _sink_report(progress: Any) -> SinkReport | None:
    metrics = (progress.sink.metrics if progress.sink is not None else None) or {}
    if SinkMetric.COMMITTED not in metrics or metrics.get(SinkMetric.BATCH) != str(progress.batchId):
        return None  # not the JVM sink's, or an earlier batch's report
    began = int(metrics[SinkMetric.BEGAN]) / 1000
    ages = [float(a) / 1000 for a in metrics[SinkMetric.AGES].split(",") if a]
    return SinkReport(int(metrics[SinkMetric.ROWS]), began, int(metrics[SinkMetric.COMMITTED]) / 1000,
                      [began - age for age in ages])


def _recent_latency(hosted: HostedQuery, batches: int = 3) -> float:
    """The worst row latency of the query's last few measured batches (0 before any): what a state
    move's budget is judged against, as it reacts within a few batches (the status window's p99
    spans a minute, and a start-up backlog would hold it high that long)."""
    measured = [t.latency for _, t in sorted(hosted.timelines.items()) if t.latency is not None]
    return max(measured[-batches:], default=0.0)


def _recent_batches(hosted: HostedQuery, batches: int = 8) -> tuple[tuple[int, float], ...]:
    """(batch id, seconds) of the query's last few batches with a known duration (what a state
    move's cost is measured on)."""
    done = [(b, t.durations_ms["triggerExecution"] / 1000) for b, t in sorted(hosted.timelines.items())
            if "triggerExecution" in t.durations_ms]
    return tuple(done[-batches:])


def _epoch(iso: str) -> float:
    """Spark's progress timestamps ('2026-11-21T10:00:00.123Z') as epoch seconds."""
    from datetime import datetime

    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def driver_gone(error: BaseException) -> bool:
    """The JVM behind the session no longer answers: py4j lost its connection (the driver exited, or
    its gateway died with it), as opposed to a call that failed inside a live driver."""
    from py4j.protocol import Py4JNetworkError

    return isinstance(error, Py4JNetworkError | ConnectionError) or "stopped SparkContext" in str(error)


def one_line(error: BaseException) -> str:
    """One line of an exception from Spark (its first meaningful line)."""
    text = str(getattr(error, "desc", None) or error).strip()
    lines = [ln.strip().removeprefix(": ") for ln in text.splitlines() if ln.strip()]
    # py4j's first line only names the call ("An error occurred while calling o225.start."): skip it
    meaningful = [ln for ln in lines if not ln.startswith("An error occurred while calling")]
    return (meaningful or lines or [type(error).__name__])[0][:500]


def _between_batches(handle: Any, timeout: float = 5.0) -> bool:
    """Wait (a little) for the batch in flight to commit: stopping a query mid-batch makes Spark
    abort its write and log two ERROR lines for what is a normal stop, and replays the batch on
    restart (a Kafka sink then holds its rows twice). True if no batch is in flight."""
    deadline = time.monotonic() + timeout
    try:
        while handle.isActive and handle.status.get("isTriggerActive"):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.005)
    except Exception:  # a query that failed meanwhile: stop it anyway
        return True
    return True


def _confine_real(path: str, namespace: str, root: str) -> None:
    """Symbolic links along a confined path must not lead out of the tenant's root either (the
    runtime checks this on its own filesystem before it starts the query)."""
    own = os.path.realpath(tenant_root(root, namespace))
    real = os.path.realpath(path)
    if real != own and not real.startswith(own + os.sep):
        raise FilesOutsideRoot(f"'{shown(path)}' leads through a symbolic link to {shown(real)}, outside the files "
                               f"root of namespace '{namespace}'; write a path under it")
