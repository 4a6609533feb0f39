"""What each policy means for a pool's runtime, in `sluice run`, the benchmark and the pool pod alike.

- `fifo`: Spark's FIFO scheduler, no gate (what Spark does alone).
- `fair`: Spark's FAIR scheduler with one pool per tenant (namespace), weighted by the pool's
  quota `weight` for that namespace (default 1); a tenant's queries share its pool fairly. No gate.
- `edf`: every micro-batch waits at the gate for the scheduler's grant, in order of its plain
  deadline (oldest event + SLA); each batch runs in the FAIR band its slack names.
- `cameo`: as `edf`, ordered by Cameo's start deadline: the time the batch's output is due
  (t_MF + SLA) less its learned cost and what must still run after it.

`edf` and `cameo` also run the urgent lane (`session.lane_conf`, `UrgentLane.java`): urgent
tasks at a raised CPU priority and, on a local master, spare task slots with the bulk bands'
tasks taking turns, one a core.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sluice.api.constants import GATED_POLICIES, POLICIES
from sluice.scheduler.policies import QuerySpec

from .pipeline import spark_name

WEIGHT_SCALE = 100
"""Spark's pool weights are integers: a quota weight w becomes round(w * 100) (at least 1)."""


@dataclass(frozen=True, slots=True)
class FairPool:
    """A Spark FAIR pool an ungated query's batches run in."""

    name: str
    weight: int


@dataclass(frozen=True, slots=True)
class Mode:
    gated: bool
    """Batches wait at the gate for the scheduler (edf, cameo)."""
    scheduling: str
    """spark.scheduler.mode: FIFO or FAIR."""
    fixed_pool: Callable[[QuerySpec], FairPool | None] | None
    """Ungated: the FAIR pool a query's batches run in (fair: its tenant's)."""


def tenant_pool(spec: QuerySpec) -> FairPool:
    """The tenant's pool at the query's weight (named by weight: Spark cannot change a pool's)."""
    weight = max(1, round(spec.weight * WEIGHT_SCALE))
    return FairPool(f"tenant_{spark_name(spec.tenant)}_w{weight}", weight)


def mode_of(policy: str) -> Mode:
    """How the runtime runs under `policy`; ValueError with one sentence for an unknown one."""
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}; use one of {', '.join(POLICIES)}")
    if policy in GATED_POLICIES:
        return Mode(True, "FAIR", None)
    if policy == "fair":
        return Mode(False, "FAIR", tenant_pool)
    return Mode(False, "FIFO", None)
