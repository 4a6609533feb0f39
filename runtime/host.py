"""Many tenants' queries in one SparkSession: their lifecycle, on one owner thread.

- **One owner of lifecycle.** Starting, stopping, restarting, suspending, retrying a Pending query
  and noticing a failed one run on the host's lifecycle thread only; callers (the control API,
  `sluice run`, the pod's main loop) submit to it, so a query is never started twice and the control
  API's event loop never calls Spark. Building a stream is `streams`, its interval `interval_control`.
- **One lock for state.** What Spark reports is written by the intake (`intake`: listener bus, stage
  poller), a batch's turn by the gate (`gate`), and read by `reads`. Each holds `QueryHost.lock`
  for in-memory work only, never across a Spark or scheduler call or a wait.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from prometheus_client import CollectorRegistry

from sluice.api.common import query_labels
from sluice.api.query import KafkaSink, StreamingQuery
from sluice.api.wire import QueryPhase
from sluice.scheduler import execution
from sluice.scheduler.core import SchedulerError

from . import codegen, jvm_sink, realtime
from .batch_budget import BatchMeter, machine_busy_seconds, process_cpu
from .gate import FixedPool, Gate, Gatekeeper
from .hosted import RATES_WARMUP, HostedQuery, query_spec
from .intake import Intake
from .interval_control import IntervalControl
from .kafka_check import kafka_problem
from .latency import LatencyWindow
from .metrics import CodegenCollector, LatencyCollector, Metrics
from .pipeline import WARM_UP_ENV, spark_name
from .reads import Reads
from .session import driver_process
from .spark_calls import DriverWatch, between_batches, one_line
from .streams import Warmer, confine, micro_batch_stream, realtime_stream

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
        rates_warmup: float = RATES_WARMUP,
    ) -> None:
        self.spark = spark
        self.warmer = Warmer(warm_up if warm_up is not None else os.environ.get(WARM_UP_ENV, "1") != "0")
        self.files_root = files_root  # each namespace's files under <files_root>/<namespace> (None: anywhere)
        self.checkpoints = checkpoints
        self.scheduler = gate
        self.metrics = metrics or Metrics(CollectorRegistry())
        self.clock = clock
        self.lock = threading.Lock()
        self.queries: dict[str, HostedQuery] = {}
        """Every hosted query by key; changed only on the lifecycle thread, under the lock."""
        self.by_spark_name: dict[str, HostedQuery] = {}
        self.latency_horizon = latency_horizon
        self.rates_warmup = rates_warmup  # DS2 reads each query's batches from this long after its first rows
        self.retry_every = retry_every
        self.batch_meter = BatchMeter()
        """The driver's CPU per batch (what `auto` weighs) and the machine's busy share (what the
        interval rule reads), sampled every lifecycle check."""
        self.intervals = IntervalControl(self.lock, clock, interval_dwell, self.batch_meter)
        self.passes = 0  # lifecycle checks run (each restarts at most one query for its interval)
        self.after_stateful_commit: list[Callable[[], None]] = []
        """Called by the intake once a stateful query's batch has committed (the executor scaler wakes)."""
        self.measure_from = measure_from  # batches committed before it are left out of latency figures
        self.gate = Gate(spark, gate, fixed_pool or (lambda q: None), self.metrics, self.lock, clock)
        self.direct = jvm_sink.enabled() and jvm_sink.loaded(spark)  # noop and Kafka sinks by the JVM sink
        if jvm_sink.enabled() and not self.direct:
            log.warning("Sluice's sink is not on this session's class path; every batch goes through foreachBatch.")
        self._gates = jvm_sink.gates(spark) if self.direct and gate is not None else None
        self._owner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sluice-lifecycle")
        self._closed = threading.Event()
        self.reads = Reads(self)
        self.status, self.statuses = self.reads.status, self.reads.statuses
        self.stateful_batches, self.stateful_queries = self.reads.stateful_batches, self.reads.stateful_queries
        self.metrics.registry.register(LatencyCollector(self.reads.latency_snapshots))
        self.metrics.registry.register(CodegenCollector(lambda: codegen.compiles(spark)))
        self.intake = Intake(self).listen(spark)
        driver = driver_process(spark)
        self.driver = DriverWatch(driver)  # checked every tick: a dead driver ends the host
        self._driver_pid = driver.pid if driver is not None else None
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

    @property
    def broken(self) -> str | None:
        """Why this host can no longer run its queries (its Spark driver is gone), or None."""
        return self.driver.broken

    def _tick(self) -> None:
        while not self._closed.wait(min(self.retry_every, 2.0)) and not self.driver.exited():
            try:
                self.submit(self._refresh).result()
            except Exception as error:
                if self._closed.is_set() or self.driver.lost(error):  # stopping, or no driver left
                    return
                log.warning("lifecycle check failed, tried again in %.0f s: %s", self.retry_every, one_line(error))

    def _add(self, query: StreamingQuery, weight: float) -> HostedQuery:
        query, outside = confine(query, self.files_root)
        old = self.queries.get(query.key)
        if old is not None and old.runs(query, weight):  # a restart would re-run the batch in flight
            return old
        if old is not None:  # stopped while still listed: status never answers 404 mid-update
            self._stop(old)
            self.metrics.forget(*query_labels(query.key))
        window = LatencyWindow(query.spec.sla.latencyTarget.seconds, horizon=self.latency_horizon)
        hosted = HostedQuery(query, window, query_spec(query, weight), rates_warmup=self.rates_warmup)
        with self.lock:
            self.queries[query.key] = hosted
            self.by_spark_name[spark_name(query.key)] = hosted
        self.reads.export_latency(hosted)
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

    def _pending(self, hosted: HostedQuery, why: str) -> None:
        with self.lock:
            hosted.retry_at = self.clock() + self.retry_every
        self._set_phase(hosted, "Pending", why)

    def _start(self, hosted: HostedQuery) -> None:
        query = hosted.query
        with self.lock:
            hosted.group = None  # a restart may replay a batch id: ask afresh
        problem = kafka_problem(query)
        if problem is not None:
            self._pending(hosted, problem)
            return
        mode = self._mode(hosted)
        with self.lock:
            hosted.execution, hosted.execution_reason = mode.mode, mode.reason
        if mode.mode == "realTime":  # no micro-batches: nothing for the scheduler to order
            refused = self._start_realtime(hosted)
            if refused is None:
                return
            if not execution.weighed(query):
                self._pending(hosted, f"{refused} (retrying).")
                return
            with self.lock:  # the budget chose it, but the pool has no slots to reserve: micro-batches
                hosted.execution = "microBatch"
                hosted.execution_reason = f"{mode.reason[:-1]}; the pool refused the reservation ({refused}): micro-batches."
        scheduler = self.scheduler
        try:
            if scheduler is not None and not scheduler.register(hosted.spec):
                with self.lock:
                    hosted.gate_mode = "fail-open"
        except SchedulerError as refused:  # the pool's scheduler cannot take it (yet)
            self._pending(hosted, f"{refused} (retrying).")
            return
        fixed = self.gate.fixed_pool(hosted.spec) if scheduler is None else None
        interval = hosted.interval if hosted.interval is not None and query.spec.trigger is None \
            else self.intervals.choose(hosted, list(self.queries.values()))
        try:
            self.warmer.warm(self.spark, query, gated=scheduler is not None)
            handle = micro_batch_stream(self.spark, hosted, self.gate, self._gates, fixed, self.direct,
                                        str(self.checkpoint(query.key)), interval)
        except Exception as error:  # a source, sink or expression Spark rejects: this query only
            if self._gates is not None:
                self._gates.unregister(query.key)
            self._set_phase(hosted, "Failed", one_line(error))
            log.warning("query %s failed to start: %s", query.key, hosted.message)
            return
        with self.lock:
            hosted.handle = handle
            hosted.spark_id = str(handle.id)
            hosted.thread_cpu = None  # a new stream thread: its CPU counts from its first commit
        self._set_phase(hosted, "Running", "")

    def _mode(self, hosted: HostedQuery) -> execution.ExecutionChoice:
        """How a query runs: its spec's choice, and for a critical query `auto` may run in
        Real-time Mode, its pool's batch budget weighed at its first start here (kept across its
        restarts: a restart for a new interval does not move it between modes)."""
        query = hosted.query
        if not execution.weighed(query):
            return execution.mode_of(query)
        if hosted.execution:
            return execution.ExecutionChoice("realTime" if hosted.execution == "realTime" else "microBatch",
                                             hosted.execution_reason)
        batch_cpu, measured = self.batch_meter.batch_cpu()
        interval = self.intervals.plan(hosted, list(self.queries.values())).interval
        return execution.mode_of(query, execution.Budget(batch_cpu, measured, interval, realtime.slots_of(query)))

    def _start_realtime(self, hosted: HostedQuery) -> str | None:
        """Run a query in Spark's Real-time Mode: no micro-batches, so no gate and no interval;
        its latency comes from a consumer of its sink topic (`sluice.runtime.realtime`). Its task
        slots are reserved with the scheduler first, out of the micro-batch queries' capacity; a
        reservation the scheduler refuses starts nothing and returns the scheduler's sentence."""
        query = hosted.query
        slots = realtime.slots_of(query)
        if self.scheduler is not None:
            try:
                self.scheduler.register(replace(hosted.spec, reserved_slots=slots))
            except SchedulerError as refused:
                return str(refused)
        with self.lock:
            hosted.reserved_slots = slots
        try:
            handle = realtime_stream(self.spark, query, str(self.checkpoint(query.key)))
        except Exception as error:  # Spark refuses it: this query only
            if self.scheduler is not None:
                self.scheduler.unregister(query.key)
            with self.lock:
                hosted.reserved_slots = 0
            self._set_phase(hosted, "Failed", one_line(error))
            log.warning("query %s failed to start in Real-time Mode: %s", query.key, hosted.message)
            return None
        assert isinstance(query.spec.sink, KafkaSink)  # realtime_problem allowed nothing else
        with self.lock:
            hosted.handle = handle
            hosted.interval, hosted.interval_reason = None, "Real-time Mode has no micro-batch interval."
            hosted.probe = realtime.SinkLatency(query.spec.sink, spark_name(query.key),
                                                lambda entry: self.intake.on_realtime(hosted, entry)).start()
        self._set_phase(hosted, "Running", "")
        return None

    def _adapt_interval(self, hosted: HostedQuery) -> bool:
        """Restart a query whose SLA-driven interval should change; True if it did."""
        choice = self.intervals.due(hosted)
        handle = hosted.handle
        if choice is None or (handle is not None and not between_batches(handle)):
            return False  # a batch still in flight after 5 s: never abort one for an interval (next check)
        log.info("query %s: batch interval %.0f ms -> %.0f ms (%s)", hosted.query.key, (hosted.interval or 0) * 1000,
                 choice.interval * 1000, choice.reason)
        self._stop(hosted)
        self.intervals.record(hosted, choice)  # _start keeps it: the choice is made
        with self.lock:
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
            self.by_spark_name.pop(spark_name(key), None)
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
            between_batches(handle)
            try:
                handle.stop()
            except Exception as error:  # stopping a failed query may rethrow its error
                log.info("stopping %s: %s", hosted.query.key, one_line(error))
        with self.lock:
            hosted.stopping = False

    def _stop_all(self) -> None:
        for hosted in list(self.queries.values()):
            self._stop(hosted)
        self.intake.stop(self.spark)

    def _refresh(self) -> None:
        """Retry Pending queries, notice failed ones, and change at most one query's interval (a
        restart holds this thread for seconds, and registrations queue behind it)."""
        self.passes += 1
        if self._driver_pid is not None:
            with self.lock:
                batches = sum(h.batches for h in self.queries.values())
            self.batch_meter.sample(self.clock(), process_cpu(self._driver_pid), batches, machine_busy_seconds())
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
