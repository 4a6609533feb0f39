"""Micro-batches or Spark's Real-time Mode, per query (pure: the query's facts in, a mode out).

A micro-batch query cannot beat its floor: a row waits for the next batch to start (at least the
shortest interval) and then for that batch (Spark's fixed cost and the commit after it). When a
query's SLA is below that floor and Real-time Mode can run it (a stateless Kafka-to-Kafka
pipeline), `auto` picks Real-time Mode; otherwise micro-batches, whose interval then comes from
the SLA (`intervals`). An explicit `microBatch` or `realTime` wins.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from .intervals import COMMIT_PRIOR, FIXED_PRIOR, MARGIN, MIN_INTERVAL

if TYPE_CHECKING:
    from sluice.api.query import StreamingQuery

Mode = Literal["microBatch", "realTime"]


@dataclass(frozen=True, slots=True)
class ExecutionChoice:
    mode: Mode
    reason: str
    """One sentence: why this mode."""


def micro_batch_floor(fixed: float = FIXED_PRIOR, commit: float = COMMIT_PRIOR) -> float:
    """The smallest SLA micro-batches keep with the usual margin: (shortest interval + a batch's
    fixed cost + its commit) / margin, in seconds."""
    return (MIN_INTERVAL + fixed + commit) / MARGIN


def choose(requested: str, sla: float, realtime_problem: str | None, floor: float | None = None) -> ExecutionChoice:
    """`requested`: spec.execution; `sla`: seconds; `realtime_problem`: why Real-time Mode cannot
    run the query (None: it can); `floor`: the micro-batch floor (default: from Spark's priors)."""
    if requested == "microBatch":
        return ExecutionChoice("microBatch", "spec.execution sets it.")
    if requested == "realTime":
        return ExecutionChoice("realTime", "spec.execution sets it.")
    floor = micro_batch_floor() if floor is None else floor
    if sla >= floor:
        return ExecutionChoice("microBatch", f"micro-batches keep a {_ms(sla)} SLA (their floor here is {_ms(floor)}).")
    if realtime_problem is not None:
        return ExecutionChoice("microBatch", f"the {_ms(sla)} SLA is below the micro-batch floor ({_ms(floor)}), but "
                                             f"{realtime_problem}: it runs in micro-batches and will miss it.")
    return ExecutionChoice("realTime", f"the {_ms(sla)} SLA is below the micro-batch floor ({_ms(floor)}): Real-time Mode.")


def mode_of(query: StreamingQuery) -> ExecutionChoice:
    """How a query runs (what the runtime starts and the operator admits alike)."""
    spec = query.spec
    return choose(spec.execution, spec.sla.latencyTarget.seconds, spec.realtime_problem())


def reserved_slots(partitions: int | None, min_partitions: int | None = None) -> int:
    """Task slots a Real-time query holds for as long as it runs: Spark schedules all of its
    tasks at once, one per Kafka partition it reads (more if `minPartitions` splits them); a
    topic whose partitions are not known yet counts as one."""
    return max(partitions or 1, min_partitions or 0, 1)


def reservation_problem(pool: str, slots: int, reserved: int, wanted: int, micro_batch: int) -> str | None:
    """Why a Real-time query may not reserve `wanted` task slots (None: it may). `slots`: the
    pool's task slots at most (maxExecutors x cores per executor); `reserved`: held by its other
    Real-time queries; `micro_batch`: slots its micro-batch queries need to keep their SLAs (at
    least one)."""
    need = max(micro_batch, 1)
    left = slots - reserved - wanted
    if left >= need:
        return None
    return (f"a Real-time query holds {wanted} task slot{'s' if wanted != 1 else ''} while it runs and pool "
            f"'{pool}' has {slots} at most with {reserved} already reserved, leaving {max(left, 0)} of the {need} "
            f"its micro-batch queries need; raise the pool's maxExecutors or set spec.execution to microBatch.")


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 10 else f"{seconds:.0f} s"
