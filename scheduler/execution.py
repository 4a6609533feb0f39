"""Micro-batches or Spark's Real-time Mode, per query (pure: the query's facts in, a mode out).

A micro-batch query cannot beat its floor: a row waits for the next batch to start (at least the
shortest interval) and then for that batch (Spark's fixed cost and the commit after it). When a
query's SLA is below that floor and Real-time Mode can run it (a stateless Kafka-to-Kafka
pipeline), `auto` picks Real-time Mode; otherwise micro-batches, whose interval then comes from
the SLA (`intervals`). An explicit `microBatch` or `realTime` wins.

Above the floor, `auto` also weighs the pool's batch budget for a critical query Real-time Mode can
run (`Budget`): its micro-batches cost the pool their CPU a batch times batches a second, while in
Real-time Mode it holds its task slots, a core each in the pool's accounting (the operator sizes
pools and admits reservations on cores). Real-time Mode wins when the micro-batches cost more.
At Spark's cost here (about 76 ms of CPU a batch) that takes an interval below 76 ms a core
reserved: a query whose batches run back to back on a busy pool, not the usual critical filter.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from .intervals import COMMIT_PRIOR, FIXED_PRIOR, MARGIN, MIN_INTERVAL

if TYPE_CHECKING:
    from sluice.api.query import StreamingQuery

Mode = Literal["microBatch", "realTime"]


BATCH_CPU_PRIOR = 0.076
"""CPU seconds a micro-batch costs its pool before the pool has measured any: the runtime's whole
CPU per batch with Sluice's settings at 50 queries (`sluice bench batch-cost`, 2026-12-04, machine
speed 0.22-0.37x; docs/performance.md)."""


@dataclass(frozen=True, slots=True)
class Budget:
    """What weighs a query's micro-batches against a Real-time reservation in its pool."""

    batch_cpu: float
    """CPU seconds one micro-batch costs the pool."""
    measured: bool
    """`batch_cpu` is the pool's own recent batches' (False: `BATCH_CPU_PRIOR`)."""
    interval: float
    """Seconds: the micro-batch interval the query would run at."""
    slots: int
    """Task slots it would reserve in Real-time Mode (`reserved_slots`)."""

    @property
    def micro_batch_cores(self) -> float:
        """Cores its micro-batches would keep busy: CPU a batch x batches a second."""
        return self.batch_cpu / max(self.interval, 1e-3)


@dataclass(frozen=True, slots=True)
class ExecutionChoice:
    mode: Mode
    reason: str
    """One sentence: why this mode."""


def micro_batch_floor(fixed: float = FIXED_PRIOR, commit: float = COMMIT_PRIOR) -> float:
    """The smallest SLA micro-batches keep with the usual margin: (shortest interval + a batch's
    fixed cost + its commit) / margin, in seconds."""
    return (MIN_INTERVAL + fixed + commit) / MARGIN


def choose(requested: str, sla: float, realtime_problem: str | None, floor: float | None = None,
           budget: Budget | None = None) -> ExecutionChoice:
    """`requested`: spec.execution; `sla`: seconds; `realtime_problem`: why Real-time Mode cannot
    run the query (None: it can); `floor`: the micro-batch floor (default: from Spark's priors);
    `budget`: a critical query's batch budget in its pool (None: not weighed)."""
    if requested == "microBatch":
        return ExecutionChoice("microBatch", "spec.execution sets it.")
    if requested == "realTime":
        return ExecutionChoice("realTime", "spec.execution sets it.")
    floor = micro_batch_floor() if floor is None else floor
    if sla >= floor:
        keeps = f"micro-batches keep a {_ms(sla)} SLA (their floor here is {_ms(floor)})"
        if budget is None or realtime_problem is not None:
            return ExecutionChoice("microBatch", f"{keeps}.")
        return weigh(keeps, budget)
    if realtime_problem is not None:
        return ExecutionChoice("microBatch", f"the {_ms(sla)} SLA is below the micro-batch floor ({_ms(floor)}), but "
                                             f"{realtime_problem}: it runs in micro-batches and will miss it.")
    return ExecutionChoice("realTime", f"the {_ms(sla)} SLA is below the micro-batch floor ({_ms(floor)}): Real-time Mode.")


def weigh(keeps: str, budget: Budget) -> ExecutionChoice:
    """Micro-batches or a Real-time reservation, whichever costs the pool fewer cores; `keeps`:
    the clause that says micro-batches keep the SLA."""
    cores, held = budget.micro_batch_cores, budget.slots
    cost = (f"{_ms(budget.batch_cpu)} of CPU a batch ({'measured on the pool' if budget.measured else 'before the pool measured any'}) "
            f"every {_ms(budget.interval)} is {cores:.2f} cores")
    reservation = f"{held} core{'s' if held != 1 else ''} a Real-time reservation holds"
    if cores > held:
        return ExecutionChoice("realTime", f"{keeps}, but {cost}, more than the {reservation}: Real-time Mode.")
    return ExecutionChoice("microBatch", f"{keeps}; {cost}, less than the {reservation}.")


def weighed(query: StreamingQuery) -> bool:
    """Whether `auto` weighs this query's batch budget: a critical query Real-time Mode can run."""
    spec = query.spec
    return spec.execution == "auto" and spec.sla.critical and spec.realtime_problem() is None


def mode_of(query: StreamingQuery, budget: Budget | None = None) -> ExecutionChoice:
    """How a query runs (what the runtime starts and the operator admits alike); `budget`: its
    pool's batch budget, weighed for a critical query (`weighed`)."""
    spec = query.spec
    return choose(spec.execution, spec.sla.latencyTarget.seconds, spec.realtime_problem(),
                  budget=budget if weighed(query) else None)


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
