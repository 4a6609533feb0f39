"""SLA-aware sizing (pure): the fewest executors whose simulated schedule keeps every SLA.

DS2 sizes a pool by the work its rates make. The SLAs can need more: a critical query whose
batches queue behind other tenants' batches misses its SLA while the cores are, on average,
idle enough for DS2. Each pool sync, the operator simulates the pool's queries from their
measured costs (`scheduler.simulate`: the same scheduler core and batching rules as the runtime,
the same model as `sluice simulate`) and raises DS2's count to the count that keeps every SLA.

What it does not know is stated: the simulation uses each query's measured rate now (a burst to
come is not in it), and queries without 3 measured batches are left out of it, so sizing is
DS2's alone until every query with input is measured.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sluice.api.runtime import QueryStatus
from sluice.scheduler.simulate import Options, Pool, SimQuery, size

SIMULATED, WARMUP = 120.0, 20.0
"""Seconds simulated at each executor count, and the start left out of the figures (the
SLA-driven intervals settle in it). Short enough to run every pool sync in a worker thread."""


@dataclass(frozen=True, slots=True)
class SlaCount:
    """What the simulation says the SLAs need."""

    executors: int | None
    """The fewest executors in [least, most] that keep every SLA; None: not even `most`."""
    why: str
    """One sentence: the count and the query that decides it."""
    simulations: int = 0


def sim_queries(queries: Mapping[str, QueryStatus]) -> tuple[list[SimQuery], list[str]]:
    """The micro-batch queries with measured costs, as the simulation's queries; and the keys of
    those with input but no costs yet. Real-time queries hold their slots whole (not simulated)."""
    sims, unmeasured = [], []
    for key, status in sorted(queries.items()):
        if status.reserved_slots or status.phase != "Running":
            continue
        costs = status.costs
        if costs is None:
            if status.input_rate > 0 or (status.producer_rate or 0) > 0:
                unmeasured.append(key)
            continue
        rate = status.producer_rate if status.producer_rate is not None else costs.input_rate
        sims.append(SimQuery(
            key, key.split("/", 1)[0], status.sla_ms / 1000, max(rate, 0.0), costs.fixed_ms / 1000,
            costs.per_row_us / 1e6, costs.commit_ms / 1000, critical=status.critical,
            trigger=None if status.trigger_ms is None else status.trigger_ms / 1000,
            window=None if status.window_ms is None else status.window_ms / 1000,
            delay=status.watermark_delay_ms / 1000))
    return sims, unmeasured


def sla_executors(queries: Mapping[str, QueryStatus], cores_per_executor: int, policy: str, least: int, most: int,
                  reserved: int = 0) -> SlaCount | None:
    """The executors the pool's SLAs need, searched in [least, most]; None when there is nothing
    to simulate or a query with input is not measured yet (DS2 decides alone)."""
    sims, unmeasured = sim_queries(queries)
    if not sims or unmeasured:
        return None
    least = max(least, 1)
    found, runs = size(sims, Pool(least, cores_per_executor, policy, reserved=reserved),
                       Options(duration=SIMULATED, warmup=WARMUP), least, max(most, least))
    if found is None:
        result = runs.get(max(most, least))
        worst = None if result is None else result.worst()
        detail = "" if worst is None else f": {worst.key} keeps {worst.attainment or 0:.1%} of its rows (goal {worst.goal:.0%})"
        return SlaCount(None, f"the simulated schedule misses an SLA even at maxExecutors {most}{detail}.", len(runs))
    below = runs.get(found - 1)
    worst = None if below is None else below.worst()
    detail = ("" if worst is None or found == least
              else f"; at {found - 1}, {worst.key} keeps {worst.attainment or 0:.1%} (goal {worst.goal:.0%})")
    return SlaCount(found, f"the simulated schedule keeps every SLA at {found} executor(s){detail}.", len(runs))
