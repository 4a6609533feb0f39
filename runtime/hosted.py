"""What the runtime keeps per hosted query, and its status as the control API reports it.

A `HostedQuery` is plain state. The host's lock guards every field (see `sluice.runtime.host`):
the gate, the progress listener and the stage poller write it, the control API reads it, and
only the host's lifecycle thread starts and stops the query behind it.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import ValidationError

from sluice.api.query import StreamingQuery
from sluice.api.wire import BatchCosts, Load, QueryPhase, QueryStatus, SchedulerMode, StageTimes
from sluice.scheduler import intervals
from sluice.scheduler.core import Completion, Grant
from sluice.scheduler.costs import WorkFigures, WorkSample, fit_work
from sluice.scheduler.policies import QuerySpec

from .critical_path import BatchTimeline, bottleneck, critical_path, driver_seconds, shares
from .kafka_lag import SourceOffsets
from .latency import LatencyWindow

Traced = tuple[BatchTimeline, list[tuple[str, float]]]
"""A batch and its critical path."""

RECENT_BATCHES = 32
"""Batches whose timelines (critical path, DS2 load) are kept per query."""
LARGEST_KEPT = 8
"""Warm batches with the most rows kept for the work fit once they leave the recent ones: a
burst's large batches, whose sizes separate a batch's fixed cost from its per-row cost after
the burst has passed (`HostedQuery.largest`)."""
COLD_BATCHES = 3
"""A query's first batches with rows whose time is kept apart (`HostedQuery.cold_ms`)."""
RATES_WARMUP = 45.0
"""Seconds after a query's first batch with rows whose batches DS2 does not read (`measured_load`):
the JVMs' compilers are still at work on its code then, on the cores its tasks need (on pods they
took 0.6-0.96 of the node's 2 cores for the first 45-50 s of every run, docs/performance.md), and
its tasks run interpreted. A two-tenants pod run (2026-12-06, speed 0.44x) grew its pool at 36 s on
5.3 and 13.0 cores needed, on a 2-core node. Flink's autoscaler likewise decides nothing in a
stabilization period after a job starts (`job.autoscaler.stabilization.interval`)."""
BAND_LOG = 1000
"""Batches whose FAIR band is kept per query."""
PHASE_LOG = 5000
"""Measured batches whose phase times (Spark's durationMs and the gate's wait) are kept per query."""
MEMORY_ROWS = 100_000
"""Rows a memory sink keeps (the newest)."""


def query_spec(query: StreamingQuery, weight: float = 1.0) -> QuerySpec:
    """What the scheduler needs to know of a query."""
    window = next((s.window for s in query.spec.pipeline if s.window is not None), None)
    mark = next((s.watermark for s in query.spec.pipeline if s.watermark is not None), None)
    return QuerySpec(
        query.key, query.tenant, query.spec.sla.latencyTarget.seconds, weight,
        window.size.seconds if window else None, mark.delay.seconds if mark else 0.0,
        critical=query.spec.sla.critical,
    )


@dataclass
class HostedQuery:
    query: StreamingQuery
    window: LatencyWindow
    spec: QuerySpec
    handle: Any = None
    """Spark's StreamingQuery, while it runs."""
    spark_id: str = ""
    """Spark's id of the query (kept in its checkpoint), for the listener's idle events."""
    phase: QueryPhase = "Pending"
    message: str = ""
    batches: int = 0
    input_rows: int = 0
    input_since: float | None = None
    """When its first batch with rows committed (epoch seconds; None: none yet)."""
    rates_warmup: float = RATES_WARMUP
    """Seconds after `input_since` whose batches DS2 does not read (the host's; `RATES_WARMUP`)."""
    output_rows: int = 0
    input_rate: float = 0.0
    processing_rate: float = 0.0
    state_rows: int = 0
    state_bytes: int = 0
    last_newest: float | None = None
    """Newest production time among the last measured batch's output rows."""
    last_batch_started: float | None = None
    asked: dict[int, tuple[int, float]] = field(default_factory=dict)
    """Batches the JVM sink asked for and the scheduler granted, not yet reported: batch id ->
    (expected rows, coordination seconds)."""
    completions: list[Completion] = field(default_factory=list)
    """Completed batches not yet reported to the scheduler (sent when their progress arrives, else
    with the next ask)."""
    memory: list[dict[str, Any]] = field(default_factory=list)
    bands: dict[str, int] = field(default_factory=dict)
    band_log: dict[int, str] = field(default_factory=dict)
    """batch id -> band, for the most recent batches."""
    grant_log: dict[int, tuple[float, float, float]] = field(default_factory=dict)
    """batch id -> (when it was granted, its slack then, seconds it waited), for the batches of
    `band_log`: what the band was chosen from (`sluice run --timeline` reports them)."""
    stages: dict[str, float] = field(default_factory=dict)
    """Useful task seconds per stage of the latest measured batch (from Spark's status API)."""
    stages_batch: int = -1
    gate_mode: SchedulerMode = "gated"
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
    interval: float | None = None
    """The micro-batch interval in force (seconds); None before the first start."""
    interval_reason: str = ""
    interval_since: float = 0.0
    """When the query last started with its interval (the next change waits a while)."""
    interval_passes: list[int] = field(default_factory=list)
    """The lifecycle checks (by number) in which its interval changed (each change restarts it)."""
    execution: str = ""
    """microBatch or realTime, once started."""
    execution_reason: str = ""
    probe: Any = None
    """A Real-time query's sink latency consumer, while it runs."""
    reserved_slots: int = 0
    """Task slots a running Real-time query holds (reserved with the scheduler)."""
    offsets: SourceOffsets = field(default_factory=SourceOffsets)
    """A Kafka source's lag and producer rate, from each batch's latest and end offsets."""
    phase_log: dict[str, deque[float]] = field(default_factory=dict)
    """Phase -> milliseconds of the latest measured batches (`sluice run --report` prints their quantiles)."""
    overshoots: deque[float] = field(default_factory=lambda: deque(maxlen=intervals.OVERSHOOTS))
    """Seconds each recent warm batch took its oldest row past the interval: its source lag, a late
    predecessor's overrun and its trigger time up to the sink's write (`intervals.Costs.overshoots`)."""
    largest: list[BatchTimeline] = field(default_factory=list)
    """The run's warm batches with the most rows that have left `timelines` (at most
    `LARGEST_KEPT`): the work fit reads them beside the recent ones."""
    cold_ms: list[float] = field(default_factory=list)
    """The cost of its first `COLD_BATCHES` batches that read rows, as `batch_costs` takes a batch's
    (`triggerExecution` less the offset commit and the gate's wait): a cold start's, which
    `sluice run --report` records for what-if."""
    thread_cpu: float | None = None
    """The stream thread's CPU seconds at the last batch's commit (the JVM sink's)."""

    def runs(self, query: StreamingQuery, weight: float) -> bool:
        """Running as registered now: the same registration again (an operator restart resumes
        every query) changes nothing."""
        return (self.phase == "Running" and self.spec == query_spec(query, weight)
                and self.query.model_dump(mode="json") == query.model_dump(mode="json"))

    def timeline(self, batch_id: int) -> BatchTimeline:
        found = self.timelines.get(batch_id)
        if found is None:
            found = self.timelines[batch_id] = BatchTimeline()
            while len(self.timelines) > RECENT_BATCHES:
                self.keep_if_largest(self.timelines.pop(min(self.timelines)))
        return found

    def keep_if_largest(self, leaving: BatchTimeline) -> None:
        """A batch leaving the recent ones stays for the work fit if it is among the run's
        `LARGEST_KEPT` warm batches with task CPU by rows (a comparison; the fit is off the batch path)."""
        if leaving.cold or leaving.rows <= 0 or leaving.cpu_seconds <= 0 or not leaving.durations_ms or not leaving.stages:
            return
        if len(self.largest) < LARGEST_KEPT:
            self.largest.append(leaving)
            return
        smallest = min(range(len(self.largest)), key=lambda i: self.largest[i].rows)
        if leaving.rows > self.largest[smallest].rows:
            self.largest[smallest] = leaving

    def record_band(self, batch_id: int, band: str, granted: float, slack: float, waited: float) -> None:
        self.bands[band] = self.bands.get(band, 0) + 1
        self.band_log[batch_id] = band
        self.grant_log[batch_id] = (granted, slack, waited)
        if len(self.band_log) > BAND_LOG:  # batch ids only grow: the first inserted is the oldest
            oldest = next(iter(self.band_log))
            del self.band_log[oldest]
            self.grant_log.pop(oldest, None)

    def batch_costs(self, since: float = 0.0, warm: bool = False) -> list[tuple[int, float]]:
        """(input rows, seconds) of recent batches committed since `since` (`warm`: not its cold
        start's): each batch's own cost, its trigger time without the offset commit and without its
        wait at the gate."""
        out = []
        for t in self.timelines.values():
            ms = t.durations_ms
            if t.rows > 0 and "triggerExecution" in ms and t.committed is not None and t.committed >= since \
                    and not (warm and t.cold):
                cost = ms["triggerExecution"] / 1000 - ms.get("commitOffsets", 0.0) / 1000 - t.gate_wait
                out.append((int(t.rows), max(cost, 0.0)))
        return out

    def paths(self) -> list[Traced]:
        """Recent batches with both progress and stage times, each with its critical path."""
        return [(t, critical_path(t)) for t in self.timelines.values() if t.durations_ms and t.stages]

    def work_samples(self, paths: list[Traced]) -> list[WorkSample]:
        """The batches of `paths` with task CPU, as the work fit reads them."""
        return [WorkSample(int(t.rows), driver_seconds(path), t.cpu_seconds, t.run_seconds, t.tasks, t.driver_cpu,
                           t.turn_wait)
                for t, path in paths if t.rows > 0 and t.cpu_seconds > 0]

    def work_input(self, paths: list[Traced] | None = None) -> tuple[list[WorkSample], list[WorkSample]]:
        """The work fit's input: the recent batches' samples, and the run's largest older ones kept."""
        recent = self.work_samples(self.paths() if paths is None else paths)
        return recent, self.work_samples([(t, critical_path(t)) for t in self.largest])

    def recent_commit(self) -> float:
        """Median offset commit time over the recent batches (0 before any)."""
        commits = sorted(t.durations_ms["commitOffsets"] / 1000 for t in self.timelines.values()
                         if "commitOffsets" in t.durations_ms)
        return commits[len(commits) // 2] if commits else 0.0

    @property
    def delay(self) -> float | None:
        """A windowed aggregation's watermark delay; None for other queries (see `intervals`)."""
        return self.spec.watermark_delay if self.spec.window_size is not None else None

    def recent_lag(self) -> float | None:
        """The source's lag over the recent batches (`intervals.source_lag`); None before any."""
        return intervals.source_lag([t.lag for t in self.timelines.values() if t.lag is not None])

    def recent_gate_wait(self) -> float:
        """Mean wait for a grant over the recent batches (the queueing term of the interval)."""
        waits = [t.gate_wait for t in self.timelines.values()]
        return sum(waits) / len(waits) if waits else 0.0

    def log_phases(self, timeline: BatchTimeline) -> None:
        """Keep a measured batch's phase times: Spark's durationMs, `gateWait` and `gateAsk`."""
        for phase, ms in (*timeline.durations_ms.items(), ("gateWait", timeline.gate_wait * 1000),
                          ("gateAsk", timeline.gate_ask * 1000)):
            self.phase_log.setdefault(phase, deque(maxlen=PHASE_LOG)).append(ms)

    def phase_quantiles(self) -> dict[str, dict[str, float]]:
        """p50 and p90 milliseconds of each logged phase."""
        out = {}
        for phase, values in self.phase_log.items():
            ordered = sorted(values)
            out[phase] = {"p50": round(ordered[len(ordered) // 2], 1), "p90": round(ordered[int(len(ordered) * 0.9)], 1)}
        return out

    def keep_rows(self, rows: list[dict[str, Any]]) -> None:
        self.memory.extend(rows)
        del self.memory[: max(0, len(self.memory) - MEMORY_ROWS)]

    def path_shares(self, paths: list[Traced] | None = None) -> tuple[dict[str, float], int]:
        """Shares of the critical path over recent batches with both progress and stage times."""
        found = self.paths() if paths is None else paths
        return shares(path for _, path in found), len(found)

    def measured_load(self) -> Load:
        """Input rows and working task seconds (`BatchTimeline.working_seconds`) summed over recent
        batches that have both, leaving out those committed within `rates_warmup` of its first
        batch with rows."""
        warm = None if self.input_since is None else self.input_since + self.rates_warmup
        done = [(int(t.rows), round(t.working_seconds, 4)) for _, t in sorted(self.timelines.items())
                if t.rows > 0 and t.working_seconds > 0 and (warm is None or t.committed is None or t.committed >= warm)]
        return Load(batches=len(done), rows=sum(r for r, _ in done), usefulSeconds=round(sum(u for _, u in done), 4),
                    perBatch=done)

    def status(self, now: float, gated: bool) -> QueryStatus:
        """The query's status at `now`; `gated`: the host has a scheduler (else 'ungated')."""
        summary = self.window.summary(now)
        paths = self.paths()
        path, measured = self.path_shares(paths)
        return QueryStatus(
            phase=self.phase, message=self.message,
            p50_ms=_ms(summary.p50), p99_ms=_ms(summary.p99), max_ms=_ms(summary.maximum),
            sla_ms=self.spec.latency_target * 1000,
            attainment=summary.attainment, attainment_total=self.window.overall_attainment(),
            measured_rows=float(self.window.all_rows), rows_within=round(self.window.all_within, 3),
            rows=self.input_rows, output_rows=self.output_rows, batches=self.batches,
            input_rate=self.input_rate, processing_rate=self.processing_rate,
            kafka_lag=self.offsets.lag, producer_rate=self.offsets.producer_rate,
            state_rows=self.state_rows, state_bytes=self.state_bytes,
            scheduler=self.gate_mode if gated and self.execution != "realTime" else "ungated",
            bands=dict(self.bands), groupedBatches=self.grouped,
            stages=StageTimes(batch=self.stages_batch, usefulSeconds=dict(self.stages)),
            load=self.measured_load(),
            criticalPath={label: round(part, 4) for label, part in path.items()},
            bottleneck=bottleneck(path, measured),
            interval_ms=None if self.interval is None else round(self.interval * 1000, 1),
            interval_reason=self.interval_reason, interval_restarts=len(self.interval_passes),
            execution=self.execution, execution_reason=self.execution_reason,
            reserved_slots=self.reserved_slots, costs=self.costs(paths),
            critical=self.query.spec.sla.critical,
            trigger_ms=None if self.query.spec.trigger is None else self.query.spec.trigger.interval.seconds * 1000,
            window_ms=None if self.spec.window_size is None else self.spec.window_size * 1000,
            watermark_delay_ms=self.spec.watermark_delay * 1000, cold_ms=list(self.cold_ms),
        )

    def costs(self, paths: list[Traced] | None = None) -> BatchCosts | None:
        """The batches' fixed and per-row cost, commit and input rate, as the interval choice
        measures them; None before 3 measured batches."""
        batches = self.batch_costs()
        found = intervals.measured(batches, self.input_rate, self.recent_gate_wait(), self.recent_commit(),
                                   self.recent_lag() or 0.0)
        if found is None:
            return None
        recent, kept = self.work_input(paths)
        work = fit_work(recent + kept, kept=len(kept))
        figures: WorkFigures = {} if work is None else work.figures()
        spread = intervals.spread(self.batch_costs(warm=True), found)
        try:
            return BatchCosts(fixed_ms=round(found.fixed * 1000, 3), per_row_us=round(found.per_row * 1e6, 4),
                              commit_ms=round(found.commit * 1000, 3), queueing_ms=round(found.queueing * 1000, 3),
                              lag_ms=round(found.lag * 1000, 3),
                              spread=None if spread is None else round(spread, 3),
                              input_rate=round(found.rate, 3), batches=len(batches),
                              interval_ms=None if self.interval is None else round(self.interval * 1000, 1),
                              worst_case_ms=None if self.interval is None else round(
                                  intervals.worst_case(self.interval, found, self.delay) * 1000, 1),
                              late_share=None if self.interval is None or self.delay is not None else (
                                  intervals.late_share(self.interval, self.spec.latency_target,
                                                       replace(found, overshoots=tuple(self.overshoots)))),
                              **figures)
        except ValidationError:  # BatchCosts' bounds: a status never fails on a figure Spark reported as NaN
            return None


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 1)
