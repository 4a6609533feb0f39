"""DS2 on Spark: size a pool's executors from the true processing rates its runtime measured.

Pure: observations and the pool's bounds in, one decision out; `now` is passed in.

DS2 sizes each operator as `parallelism = target rate / true rate per instance`, where the true
rate counts only useful time (time doing work, not waiting for input). On Spark the operators
of all queries share the executors' cores, so the model sums demand over queries:

    true rate per core (q)  = input rows / useful task seconds        over q's recent batches
    cores needed            = sum over q of  input rate (q) / true rate per core (q)
    executors               = ceil(cores needed / utilization / cores per executor)

Useful task seconds are task run time minus shuffle fetch wait, summed over every stage of a
batch (Spark's status API), so a query's per-row cost already folds in its selectivity and all
of its stages. `utilization` (< 1) is the headroom that keeps micro-batches short enough for
the latency targets: a pool run at 100% busy has no slack for a burst.

No scaling on noise: growth happens at once (an SLA is at stake), shrinking only after
`cooldown` seconds since the last change and only when the new size is smaller, and a query
that has input but no measurement yet blocks a shrink (its demand is unknown). The per-row
cost includes each batch's fixed overhead at today's batch size, so at a higher rate (bigger
batches) the model over-provisions a little: DS2 then converges from above in a later step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class QueryLoad:
    query: str
    input_rate: float
    """Rows per second arriving (Spark's inputRowsPerSecond)."""
    rows: float = 0.0
    """Input rows of the recent measured batches."""
    useful_seconds: float = 0.0
    """Useful task seconds of those batches."""

    @property
    def true_rate(self) -> float | None:
        """Rows one core processes per second of useful time, once measured."""
        return self.rows / self.useful_seconds if self.rows > 0 and self.useful_seconds > 0 else None


@dataclass(frozen=True, slots=True)
class Bounds:
    min_executors: int
    max_executors: int
    cores_per_executor: int
    utilization: float = 0.7
    cooldown: float = 120.0
    """Seconds after a change before the pool may shrink."""


@dataclass(frozen=True, slots=True)
class Decision:
    target: int
    cores_needed: float
    reason: str
    wanted: int = 0
    """Executors the measured demand needs, before the pool's bounds."""

    def changes(self, current: int) -> bool:
        return self.target != current


def decide(loads: list[QueryLoad], current: int, bounds: Bounds, now: float, last_change: float | None) -> Decision:
    """The pool's executor count for these loads; `current` is the target now in force."""
    if not 0 < bounds.utilization <= 1:
        raise ValueError("utilization must be in (0, 1]")
    if current > bounds.max_executors:  # the bounds moved below the pool: they apply at once
        inner = decide(loads, bounds.max_executors, bounds, now, last_change)
        return Decision(inner.target, inner.cores_needed, f"maxExecutors {bounds.max_executors} is below the {current} "
                                                          f"asked for; from there, {inner.reason}", inner.wanted)
    cores = 0.0
    unmeasured = []
    for load in loads:
        if not load.input_rate > 0:  # idle (or NaN, as Spark reports a rate before its first batch)
            continue
        if load.true_rate is None:
            unmeasured.append(load.query)
            continue
        cores += load.input_rate * load.useful_seconds / load.rows  # input rate / true rate
    per_executor = max(bounds.cores_per_executor, 1)
    wanted = 0 if cores <= 0 else math.ceil(min(cores / bounds.utilization / per_executor, 1e9) - 1e-9)
    target = min(max(wanted, bounds.min_executors), bounds.max_executors)
    sized = (f"{len(loads)} quer{'y' if len(loads) == 1 else 'ies'} need {cores:.2f} cores; at "
             f"{bounds.utilization:.0%} utilization that is {target} executor{'s' if target != 1 else ''} "
             f"of {per_executor} core{'s' if per_executor != 1 else ''}")
    if wanted > bounds.max_executors:
        sized += f" (capped at maxExecutors {bounds.max_executors}; {wanted} would keep up)"
    if target > current:
        return Decision(target, cores, f"{sized}: growing from {current}.", wanted)
    if target < current:
        if unmeasured:
            return Decision(current, cores, f"{sized}, but {', '.join(sorted(unmeasured))} has input and no "
                                            f"measurement yet: keeping {current}.", wanted)
        if last_change is not None and now - last_change < bounds.cooldown:
            wait = bounds.cooldown - (now - last_change)
            return Decision(current, cores, f"{sized}: keeping {current} for {wait:.0f}s more (cooldown).", wanted)
        return Decision(target, cores, f"{sized}: shrinking from {current}.", wanted)
    return Decision(current, cores, f"{sized}: no change.", wanted)
