"""How many micro-batch queries one driver carries (pure: queries' intervals in, a verdict out).

Every micro-batch costs its driver a fixed amount of CPU whatever its rows (planning, the offset
and commit logs, the listener's progress, Python's batch function): `DRIVER_SECONDS_PER_BATCH`.
A query batching every `interval` seconds so keeps `DRIVER_SECONDS_PER_BATCH / interval` of a
driver core busy, and a pool's queries together need the sum. Past the driver's cores, batches
queue behind each other and every SLA on the pool slips at once (the density benchmark's
breaking point), so admission refuses the query that would cross it.

A query's interval is its status' (`batchIntervalMs`, what the runtime chose from measured costs)
once it runs; before that, `spec.trigger` if set, else the interval the runtime would choose
from the SLA with nothing measured (`intervals.choose` with the priors and no rows). Real-time
queries run no micro-batches and count nothing here (their task slots are reserved apart).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .intervals import COMMIT_PRIOR, FIXED_PRIOR, MIN_INTERVAL, Costs, choose

DRIVER_SECONDS_PER_BATCH = 0.12
"""Driver CPU seconds per micro-batch of a light query: what each further batch adds to a driver
hosting many light queries (the measurements it comes from: docs/architecture.md, "Measurements
behind the design")."""


@dataclass(frozen=True, slots=True)
class Batching:
    """One query as the driver sees it."""

    key: str
    """namespace/name."""
    interval: float
    """Seconds between its batch starts; 0 for a Real-time query (no micro-batches)."""


def sla_interval(sla: float, trigger: float | None = None, delay: float | None = None) -> float:
    """The interval a query is predicted to batch at before it is measured: `spec.trigger`
    (0 runs batches back to back: Spark's floor), else the SLA's, with the priors and no rows;
    `delay`: a windowed aggregation's watermark delay (None: not windowed)."""
    if trigger is not None:
        return max(trigger, MIN_INTERVAL)
    return choose(sla, Costs(FIXED_PRIOR, 0.0, 0.0, commit=COMMIT_PRIOR), delay).interval


def driver_load(queries: Iterable[Batching], per_batch: float = DRIVER_SECONDS_PER_BATCH) -> float:
    """Driver cores the queries' micro-batches keep busy."""
    return sum(per_batch / q.interval for q in queries if q.interval > 0)


def density_problem(pool: str, driver_cores: float, kept: Iterable[Batching], new: Batching,
                    per_batch: float = DRIVER_SECONDS_PER_BATCH) -> str | None:
    """Why `new` may not join the pool's `kept` queries (None: it may)."""
    kept = list(kept)
    before = driver_load(kept, per_batch)
    adds = driver_load([new], per_batch)
    if adds == 0 or before + adds <= driver_cores:
        return None
    return (f"pool '{pool}' driver would need {before + adds:.2f} cores for micro-batches ({len(kept)} queries take "
            f"{before:.2f}, this one {adds:.2f} at one batch every {new.interval * 1000:.0f} ms, "
            f"{per_batch * 1000:.0f} ms of driver CPU each) and has {driver_cores:g}; raise the pool's "
            f"spec.driver.cores, loosen this query's SLA or spec.trigger, or use another pool.")
