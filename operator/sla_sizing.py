"""SLA-aware sizing (pure): the fewest executors whose simulated schedule keeps every SLA.

DS2 sizes a pool by the work its rates make. The SLAs can need more: a critical query whose
batches queue behind other tenants' batches misses its SLA while the cores are, on average,
idle enough for DS2. Each pool sync, the operator simulates the pool's queries from their
measured costs (`scheduler.simulate`: the same scheduler core and batching rules as the runtime,
the same model as `sluice simulate`) and raises DS2's count to the count that keeps every SLA.

A query that misses its SLA even with a slot to itself (its trigger, or its own batch cost,
exceeds the SLA) is not a sizing problem: it is named, and the count is sized for the others.
What it does not know is stated: the simulation uses each query's measured rate now (a burst to
come is not in it), and queries without 3 measured batches are left out of it, so sizing is
DS2's alone until every query with input is measured.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import lru_cache

from sluice.api.wire import QueryStatus
from sluice.scheduler.simulate import (
    Options,
    Pool,
    QueryResult,
    Result,
    SimQuery,
    simulate,
    size,
)

SIMULATED, WARMUP = 120.0, 20.0
"""Seconds simulated at each executor count, and the start left out of the figures (the
SLA-driven intervals settle in it). Short enough to run every pool sync in a worker thread."""
QUERY_SECONDS = 24_000.0
"""Query-seconds one simulation covers at most: a pool of more than 200 queries simulates less
than SIMULATED, so a sync's sizing time stops growing with the pool's size until SHORTEST."""
SHORTEST = 60.0
"""Seconds simulated at least, whatever the pool's size (the warm-up and a few batches after it)."""
SIGNIFICANT = 2
"""Significant digits the simulation's inputs (rates and costs) are rounded to: within 5%, less
than they move between two syncs, so a pool whose measurements barely moved is not simulated
again (`sized` remembers its last answers)."""


def span(queries: int) -> float:
    """Seconds simulated for a pool of `queries` micro-batch queries."""
    return max(SHORTEST, min(SIMULATED, QUERY_SECONDS / max(queries, 1)))


def _round(value: float) -> float:
    return 0.0 if value == 0 else round(value, SIGNIFICANT - 1 - math.floor(math.log10(abs(value))))


def rounded(query: SimQuery) -> SimQuery:
    """`query` with its rate and costs rounded to SIGNIFICANT digits."""
    return replace(query, rate=_round(query.rate), fixed=_round(query.fixed), per_row=_round(query.per_row),
                   commit=_round(query.commit))


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
    return sized(tuple(rounded(q) for q in sims), cores_per_executor, policy, least, most, reserved)


@lru_cache(maxsize=32)
def sized(sims: tuple[SimQuery, ...], cores_per_executor: int, policy: str, least: int, most: int,
          reserved: int = 0) -> SlaCount:
    """The executors `sims` need to keep their SLAs, searched in [least, most] (remembered by its
    inputs: the operator asks again every sync)."""
    least, most = max(least, 1), max(most, least, 1)
    options = Options(duration=span(len(sims)), warmup=WARMUP)
    # a slot for every query: no wait at the gate; whoever misses here, executors cannot help
    ample = Pool(math.ceil((len(sims) + reserved) / max(cores_per_executor, 1)), cores_per_executor, policy,
                 reserved=reserved)
    alone = simulate(sims, ample, options)
    hopeless = sorted(key for key, result in alone.queries.items() if not result.kept)
    judged = [q.key for q in sims if q.key not in hopeless]
    note = "" if not hopeless else (
        f"; {_names(hopeless)} miss{'es' if len(hopeless) == 1 else ''} the SLA even with a slot each (the trigger "
        "or the batch's own cost, not the executors, limits it), so the count is sized for the others")
    if not judged:
        return SlaCount(least, f"no executor count keeps the SLAs{note}.", 1)
    found, runs = size(sims, Pool(least, cores_per_executor, policy, reserved=reserved), options, least, most,
                       judged=judged)
    if found is None:
        worst = _worst(runs.get(most), judged)
        return SlaCount(None, f"the simulated schedule misses an SLA even at maxExecutors {most}{_detail(worst)}{note}.",
                        len(runs) + 1)
    worst = None if found == least else _worst(runs.get(found - 1), judged)
    at = "" if worst is None else f"; at {found - 1},{_detail(worst)[1:]}"
    return SlaCount(found, f"the simulated schedule keeps every SLA at {found} executor(s){at}{note}.", len(runs) + 1)


def _worst(result: Result | None, judged: list[str]) -> QueryResult | None:
    if result is None:
        return None
    measured = [result.queries[k] for k in judged if result.queries[k].attainment is not None]
    return min(measured, key=lambda q: (q.attainment or 0.0) - q.goal, default=None)


def _detail(worst: QueryResult | None) -> str:
    return "" if worst is None else f": {worst.key} keeps {worst.attainment or 0:.1%} of its rows (goal {worst.goal:.0%})"


def _names(keys: list[str]) -> str:
    return ", ".join(keys[:3]) + (f" and {len(keys) - 3} more" if len(keys) > 3 else "")
