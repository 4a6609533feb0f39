"""Every wire contract, typed on both sides: the pool runtime's control API (operator <-> runtime)
and the scheduler sidecar's (runtime <-> scheduler).

Durations on every wire are milliseconds (`..._ms`, `...Ms`); instants are wall-clock epoch
seconds (`...Time`, `deadline`); the models of the manifests carry durations as `Duration`.

The runtime's control API (`sluice.runtime.control`) answers with these models and the operator's
runtime client (`sluice.operator.runtime_client`) reads them back with the same models. What a
client sends is checked strictly (unknown fields are errors); what it reads ignores fields it
does not know, so a newer runtime can add a field without breaking an older operator.

Rates are rows per second. The control API's field names are the runtime report's (`sluice run --report`) for the
figures both carry.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from .pool import PoolPriority

QueryPhase = Literal["Pending", "Running", "Failed", "Suspended"]
"""Pending: waiting to start (its source is not reachable yet; retried). Running. Failed: Spark
refused or stopped it (the message says why). Suspended: stopped by spec.suspend, checkpoint kept."""
SchedulerMode = Literal["gated", "fail-open", "ungated"]
"""gated: the scheduler orders the query's batches. fail-open: the scheduler is unreachable and
batches run at once. ungated: the policy (fifo, fair) has no gate."""


class Request(BaseModel):
    """A body the runtime reads: unknown fields are errors."""

    model_config = ConfigDict(extra="forbid")


class Answer(BaseModel):
    """A body the operator reads: unknown fields are ignored (a newer runtime may add some)."""

    model_config = ConfigDict(extra="ignore")


class Load(Answer):
    """Recent batches that have both Spark's progress and its task metrics (DS2's observation)."""

    batches: int = 0
    rows: int = 0
    usefulSeconds: float = 0.0
    """DS2's useful task seconds summed over those batches: the tasks' CPU time (run time minus
    shuffle fetch wait where Spark gave no CPU time)."""
    perBatch: list[tuple[int, float]] = Field(default_factory=list)
    """(input rows, useful task seconds) of each of those batches, oldest first."""


class BatchCosts(Answer):
    """A query's measured batch costs over its recent batches (`intervals.measured`, as the
    runtime's interval choice sees them): what `sluice simulate --costs` and the operator's
    SLA-aware sizing simulate it with."""

    fixed_ms: float = Field(ge=0, allow_inf_nan=False)
    """What a batch costs whatever its rows (wall time from its start to its action's end)."""
    per_row_us: float = Field(ge=0, allow_inf_nan=False)
    """What each input row adds."""
    commit_ms: float = Field(ge=0, allow_inf_nan=False)
    """The offset commit after the action."""
    queueing_ms: float = Field(default=0, ge=0, allow_inf_nan=False)
    """Recent wait at the gate (not simulated: a recording without it reads as 0)."""
    lag_ms: float = Field(default=0, ge=0, allow_inf_nan=False)
    """The source's lag: how long after its production a row became readable, at the interval rule's
    quantile of recent batches (the simulation's triggers read rows produced up to their time less it)."""
    input_rate: float = Field(ge=0, allow_inf_nan=False)
    """Rows per second the query read."""
    batches: int = Field(default=0, ge=0)
    interval_ms: float | None = None
    """The interval in force."""
    spread: float | None = Field(default=None, ge=1, allow_inf_nan=False)
    """How much its warm batches' costs vary beyond their rows: the 90th percentile of each one's
    cost over the fitted cost of its rows, over the median of the same (None: fewer than 8 warm
    batches). What-if draws each simulated batch's work from it."""
    worst_case_ms: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    """The interval rule's worst latency at that interval from these costs (`intervals.worst_case`),
    to hold against the measured p99 and maximum."""
    late_share: float | None = Field(default=None, ge=0, le=1, allow_inf_nan=False)
    """The share of rows its recent batches' overshoots predict late at that interval
    (`intervals.late_share`; None: a windowed aggregation, or fewer than 8 batches seen)."""
    driver_ms: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    """The batch's work on the driver's thread (offsets, planning, between jobs), from its quieter
    batches; with the task figures below, what the what-if's model of the cores runs (None: no
    stage times yet)."""
    driver_cpu_ms: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    """The driver's work on the CPU: the median batch's CPU time on its query's stream thread (no
    wait for a core in it; None where the JVM sink did not report it)."""
    task_cpu_ms: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    """Task CPU a batch costs whatever its rows (core-milliseconds: no wait for a core in it)."""
    task_cpu_per_row_us: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    """Task CPU each input row adds (core-microseconds)."""
    tasks: int | None = Field(default=None, ge=1)
    """Tasks a batch's widest stage has: the cores it can use at once."""
    task_run_ratio: float | None = Field(default=None, ge=1, allow_inf_nan=False)
    """Task run time to task CPU time in the quieter batches: what a task spends off the CPU
    (I/O, shuffle and state-store writes), as a factor on its CPU."""
    fit: str = ""
    """One sentence: the batches the work figures came from and how they were fitted."""


class StageTimes(Answer):
    """Useful task seconds per stage of the latest measured batch."""

    batch: int = -1
    usefulSeconds: dict[str, float] = Field(default_factory=dict)


class QueryStatus(Answer):
    """What the runtime knows of one hosted query."""

    phase: QueryPhase
    message: str = ""
    p50_ms: float | None = None
    p99_ms: float | None = None
    max_ms: float | None = None
    sla_ms: float
    attainment: float | None = None
    """Share of output rows within the SLA over the latency window."""
    attainment_total: float | None = None
    """The same since the query started (the run report's figure)."""
    measured_rows: float = 0.0
    """Output rows whose latency was measured since the query started (a benchmark's step
    attainment is the difference of two readings of this and `rows_within`)."""
    rows_within: float = 0.0
    """Of those, the rows within the SLA."""
    rows: int = 0
    """Input rows."""
    output_rows: int = 0
    batches: int = 0
    input_rate: float = 0.0
    processing_rate: float = 0.0
    kafka_lag: int | None = None
    """Kafka sources: rows behind the latest offsets when the last batch was planned."""
    producer_rate: float | None = None
    """Kafka sources: rows per second appended to the query's topic partitions (latest offsets over time)."""
    state_rows: int = 0
    state_bytes: int = 0
    scheduler: SchedulerMode = "ungated"
    bands: dict[str, int] = Field(default_factory=dict)
    """Batches run in each FAIR band."""
    groupedBatches: int = 0
    """Batches run under an earlier batch's group grant (Drizzle), without asking."""
    stages: StageTimes = Field(default_factory=StageTimes)
    load: Load = Field(default_factory=Load)
    criticalPath: dict[str, float] = Field(default_factory=dict)
    """Share of recent batches' critical path per part (SnailTrail)."""
    bottleneck: str = ""
    interval_ms: float | None = None
    """The micro-batch interval in force."""
    interval_reason: str = ""
    """Why that interval: spec.trigger, or the SLA and the measured batch costs."""
    interval_restarts: int = 0
    """Restarts to change the SLA-driven interval since the query was added."""
    execution: str = ""
    """microBatch or realTime (Spark's Real-time Mode), once started."""
    execution_reason: str = ""
    """Why that mode, in one sentence."""
    reserved_slots: int = Field(default=0, ge=0)
    """Task slots a Real-time query holds while it runs, out of the pool's capacity."""
    costs: BatchCosts | None = None
    """Measured batch costs, once 3 batches are measured."""
    critical: bool = False
    """spec.sla.critical: the query's goal is 99% of rows within the SLA (else 95%)."""
    trigger_ms: float | None = None
    """spec.trigger's interval, if set (else the runtime chooses it from the SLA)."""
    window_ms: float | None = None
    """The tumbling window of a windowed aggregation."""
    watermark_delay_ms: float = 0.0
    cold_ms: list[float] = Field(default_factory=list)
    """Its first batches with rows, each its cost in ms (a cold start's; the steady `costs` leave
    them out): what `sluice simulate --costs` starts the query with."""


class BatchRecord(Answer):
    """One measured batch of a query: when its output committed and its rows' latencies."""

    committed: float
    """Wall-clock epoch seconds of the commit."""
    rows: int = Field(ge=0)
    """Output rows."""
    latencies_ms: list[float] = Field(default_factory=list)
    """Latency at each of the grid's quantiles of the batch's rows, largest first (the weights
    are `sluice.api.constants.MASSES`)."""


class BatchList(Answer):
    """GET /v1/queries/{namespace}/{name}/batches?since=T: the measured batches committed after T
    that the latency window still holds (its last minute), oldest first. A reader polling well
    within the window (a benchmark on a pod) rebuilds every batch's latency, as `sluice run
    --timeline` gives them locally."""

    query: str
    batches: list[BatchRecord] = Field(default_factory=list)


class Registration(Answer):
    """The answer to PUT /v1/queries/{namespace}/{name}: the query is hosted, in `phase`.

    A query Spark refuses is still registered (it stays listed, Failed, with the reason), so the
    HTTP status is 200 either way; `phase` says which. 400 is for a manifest the runtime refuses."""

    query: str
    phase: QueryPhase
    message: str = ""
    status: QueryStatus


class QueryList(Answer):
    queries: dict[str, QueryStatus] = Field(default_factory=dict)


class Removed(Answer):
    query: str
    deleted: bool


class Suspend(Request):
    suspend: bool = Field(strict=True)


class ExecutorInfo(Answer):
    id: str
    activeTasks: int = 0
    addedAt: float | None = None
    """When it registered with the driver (epoch seconds; None: not told)."""
    warm: bool | None = None
    """Warm before work: false while its JVM warms up on bulk tasks and it takes no urgent band's
    task; None where no executor warms up (a local master, or the urgent lane off)."""
    warmAt: float | None = None
    """When it became warm (epoch seconds, the driver's clock)."""


class ExecutorState(Answer):
    """GET /v1/executors: executors now, the target, and the drain's progress."""

    current: int
    target: int | None = None
    removing: list[str] = Field(default_factory=list)
    removed: list[str] = Field(default_factory=list)
    executors: list[ExecutorInfo] = Field(default_factory=list)
    leaving: list[str] = Field(default_factory=list)
    """Executors chosen to go, whose state partitions are being moved off before they are killed."""
    placement: dict[str, dict[str, int]] = Field(default_factory=dict)
    """State partitions per executor, per stateful query (`tenant/name`), as last listed."""
    stateMoves: int = 0
    """State partitions moved since the runtime started."""
    stateMovedBytes: int = 0
    pendingMoves: int = 0
    """Moves the planner still sees before state is balanced (0: nothing to move)."""
    urgentLane: str = ""
    """What the pool's urgent lane does in this runtime, in one sentence (what its pods lack)."""
    taskSlots: int | None = Field(default=None, ge=1)
    """Spark's task slots in each executor (the urgent lane's, or its cores); None: not told."""
    bulkTasks: int | None = Field(default=None, ge=1)
    """Tasks outside the urgent bands that run at once in each executor (the lane's bulk turns);
    None: no turns."""
    raisedPriorities: bool = False
    """The urgent bands' threads run at a raised priority (`priority.mechanism` is threadNice)."""
    priority: PoolPriority | None = None
    """The CPU priority lever in force and why (`sluice.runtime.priority`)."""


class ExecutorTarget(Request):
    target: int = Field(ge=0, strict=True)
    """Executors wanted; surplus ones drain."""


class TargetAccepted(Answer):
    target: int
    accepted: bool
    """Spark's answer to the request (the drain goes on in the background)."""


class Health(Answer):
    ok: bool
    queries: int = 0
    error: str | None = None
    """Why the runtime is not healthy (503), in one sentence."""


class Problem(Answer):
    """Every 4xx/5xx body: one sentence."""

    error: str


# ------------------------------------------------------------------ the scheduler sidecar's wire
# What the runtime's scheduler client sends and gets back (`sluice.scheduler.client` and
# `sluice.scheduler.server`); `sluice.scheduler.wire` converts them to the core's types.

SchedulerName = Annotated[str, Field(min_length=1, max_length=253, pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")]
QueryKey = Annotated[str, Field(min_length=3, max_length=512, pattern=r"^[^/]+/[^/]+$")]


class Wire(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Register(Wire):
    latencyTargetMs: float = Field(gt=0)
    weight: float = Field(default=1.0, gt=0)
    windowSizeMs: float | None = Field(default=None, gt=0)
    watermarkDelayMs: float = Field(default=0.0, ge=0)
    reservedSlots: int = Field(default=0, ge=0, le=100_000)
    """Task slots a Real-time query holds while it runs (it submits no batches)."""
    critical: bool = False
    """`spec.sla.critical`: its late batches stay in the most urgent band (`Scheduler._band`)."""


class Completed(Wire):
    batchId: int = Field(ge=0)
    durationMs: float = Field(ge=0)
    rows: int = Field(default=0, ge=0)
    tailMs: float | None = Field(default=None, ge=0)
    coordinationMs: float = Field(default=0.0, ge=0)
    latencyMs: float | None = Field(default=None, ge=0)
    endsGroup: bool = False
    """The runtime gives the rest of its group grant back at this batch (a trigger wait follows)."""


class Dispatch(Wire):
    query: QueryKey
    batchId: int = Field(ge=0)
    rows: int = Field(default=0, ge=0)
    oldestEventTime: float | None = None
    windowEnd: float | None = None
    completed: list[Completed] = Field(default_factory=list, max_length=1024)
    """Completions of this query's earlier batches, sent along to save a round trip."""
    waitMs: float = Field(default=30_000, gt=0, le=300_000)
    """How long to hold the request open waiting for a grant."""


class Complete(Wire):
    query: QueryKey
    completed: list[Completed] = Field(min_length=1, max_length=1024)


class GrantOut(Wire):
    granted: bool
    query: str = ""
    batchId: int = 0
    band: str = ""
    k: int = 1
    deadline: float = 0.0
    slackMs: float = 0.0
    waitedMs: float = 0.0
    aged: bool = False
    released: bool = False
    """No grant will come: the query was unregistered while waiting; run ungated."""

