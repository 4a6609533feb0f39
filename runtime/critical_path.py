"""SnailTrail on a micro-batch: the critical path of each batch, and what dominates it per query.

SnailTrail builds a program activity graph from a dataflow's trace and ranks activities by their
share of the critical path. A Structured Streaming micro-batch is a chain with one parallel
region, so its graph is small and its critical path is exact:

    offsets (latestOffset + getBatch + walCommit) -> planning (queryPlanning) ->
    addBatch = [ gate wait -> stage chain, with driver time in the gaps ] -> commit (commitOffsets)

Inside the batch's action the stages of its jobs form the parallel region. The path walks back
from the last stage to finish. Each step takes the stage that finished last before the current
one was submitted (a stage cannot start before its inputs exist). Each stage on the path splits
in two:
- `waiting for cores`: from submission to its first task, time the query waited for slots that
  other work held;
- `stage <name>`: from the first task to the last task's end.

What the path leaves of the action is `driver`: Python and planning between jobs.

`critical_path` and `shares` are pure; the host feeds them Spark's progress durations, the gate's
wait and the stage times from the status API.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class StageSpan:
    name: str
    submitted: float
    first_task: float
    completed: float


@dataclass
class BatchTimeline:
    durations_ms: dict[str, float] = field(default_factory=dict)
    """StreamingQueryProgress.durationMs of the batch."""
    gate_wait: float = 0.0
    gate_ask: float = 0.0
    """The ask's time besides queueing: the round trip to the scheduler and its decision."""
    stages: list[StageSpan] = field(default_factory=list)
    rows: float = 0.0
    """Input rows (not on the path; with working_seconds, DS2's true rate)."""
    useful_seconds: float = 0.0
    """Task run time minus shuffle fetch wait over the batch's stages."""
    cpu_seconds: float = 0.0
    """Task CPU time over the batch's stages: its work on the executors' cores, without the time
    its tasks waited for a core (what the what-if's cost fit reads)."""
    tasks: int = 0
    """The most tasks any of its stages had: how many cores the batch can use at once."""
    run_seconds: float = 0.0
    """Task run time over the batch's stages (CPU and off-CPU time, time-slices lost included)."""
    driver_cpu: float | None = None
    """CPU seconds of its query's stream thread from the commit before to its own (offsets,
    planning, the driver between jobs, the commit: the driver's work without its waits for a
    core); None where the JVM sink did not report it."""
    turn_wait: float | None = None
    """Seconds its bulk tasks waited for a turn of the urgent lane, inside `run_seconds` (None:
    not seen by the JVM sink)."""
    committed: float | None = None
    """Wall-clock time the batch's sink write completed (the gate's clock)."""
    latency: float | None = None
    """The batch's worst row latency, once its progress arrived."""
    cold: bool = False
    """One of its query's first batches with rows (a cold start's, `HostedQuery.cold_ms`)."""
    lag: float | None = None
    """Its oldest row's age at its trigger beyond the interval in force (`intervals.lag_of`)."""

    @property
    def working_seconds(self) -> float:
        """DS2's useful time: the tasks' CPU time where Spark measured it, else run time minus
        shuffle fetch wait. A task that waits for a core, for a turn of the urgent lane or for
        input is not working: on a full node its run time grows with the contention (under cameo
        most with the bulk lane's turns) and would read as demand for more cores. A task's CPU
        leaves out work off its thread: a Kafka sink's sender thread, the collector, the
        compilers (and a Python worker's, which Sluice's pipelines never start)."""
        return self.cpu_seconds if self.cpu_seconds > 0 else self.useful_seconds


def _stage_path(stages: list[StageSpan]) -> list[StageSpan]:
    if not stages:
        return []
    pending = sorted(stages, key=lambda s: s.completed)
    current = pending.pop()
    path = [current]
    while True:
        before = [s for s in pending if s.completed <= current.submitted + 1e-3]
        if not before:
            break
        current = before[-1]
        pending = [s for s in pending if s.completed < current.completed]
        path.append(current)
    return path[::-1]


def critical_path(batch: BatchTimeline) -> list[tuple[str, float]]:
    """The batch's critical path as (activity, seconds), in order; seconds sum to its trigger time."""
    ms = batch.durations_ms
    segments: list[tuple[str, float]] = []

    def add(label: str, seconds: float) -> None:
        if seconds > 0:
            segments.append((label, seconds))

    add("offsets", (ms.get("latestOffset", 0) + ms.get("getBatch", 0) + ms.get("walCommit", 0)) / 1000)
    add("planning", ms.get("queryPlanning", 0) / 1000)
    action = ms.get("addBatch", 0) / 1000
    gate = min(batch.gate_wait, action)
    add("gate wait", gate)
    on_path = 0.0
    for stage in _stage_path(batch.stages):
        waiting = max(stage.first_task - stage.submitted, 0.0)
        running = max(stage.completed - max(stage.first_task, stage.submitted), 0.0)
        add("waiting for cores", waiting)
        add(f"stage {stage.name}", running)
        on_path += waiting + running
    add("driver", max(action - gate - on_path, 0.0))
    add("commit", ms.get("commitOffsets", 0) / 1000)
    total = ms.get("triggerExecution", 0) / 1000
    add("other", total - sum(seconds for _, seconds in segments))
    return segments


DRIVER_WORK = ("offsets", "planning", "driver")
"""The critical path's activities done on the driver's thread (the commit is timed apart)."""


def driver_seconds(path: list[tuple[str, float]]) -> float:
    """Seconds a batch's critical path spent on the driver's own work (`DRIVER_WORK`)."""
    return sum(seconds for label, seconds in path if label in DRIVER_WORK)


def shares(paths: Iterable[list[tuple[str, float]]]) -> dict[str, float]:
    """Each activity's share of the summed critical paths (0..1), largest first."""
    totals: dict[str, float] = {}
    for path in paths:
        for label, seconds in path:
            totals[label] = totals.get(label, 0.0) + seconds
    whole = sum(totals.values())
    if whole <= 0:
        return {}
    return {label: seconds / whole for label, seconds in sorted(totals.items(), key=lambda kv: -kv[1])}


def bottleneck(share: dict[str, float], batches: int) -> str:
    """One sentence naming what dominates the critical path, or '' before any measurement."""
    if not share:
        return ""
    label, part = next(iter(share.items()))
    return f"{label} ({part:.0%} of the critical path over the last {batches} batch{'es' if batches != 1 else ''})"
