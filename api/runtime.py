"""The operator <-> pool runtime contract: the control API's bodies, typed on both sides.

The runtime's control API (`sluice.runtime.control`) answers with these models and the operator's
runtime client (`sluice.operator.runtime_client`) reads them back with the same models. What a
client sends is checked strictly (unknown fields are errors); what it reads ignores fields it
does not know, so a newer runtime can add a field without breaking an older operator.

Durations in these bodies are milliseconds (`..._ms`) or seconds where the name says so; rates
are rows per second. The field names are the runtime report's (`sluice run --report`) for the
figures both carry.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

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
    """Task run time minus shuffle fetch wait, summed over those batches."""
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
    input_rate: float = Field(ge=0, allow_inf_nan=False)
    """Rows per second the query read."""
    batches: int = Field(default=0, ge=0)
    interval_ms: float | None = None
    """The interval in force."""


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
