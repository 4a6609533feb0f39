"""What each policy means for a pool's runtime, in `sluice run`, the benchmark and the pool pod alike.

- `fifo`: Spark's FIFO scheduler, no gate (what Spark does alone).
- `fair`: Spark's FAIR scheduler with one equal pool per query, no gate.
- `edf`: every micro-batch waits at the gate for the scheduler's grant, in order of its plain
  deadline (oldest event + SLA); each batch runs in the FAIR band its slack names.
- `cameo`: as `edf`, ordered by Cameo's start deadline: the time the batch's output is due
  (t_MF + SLA) less its learned cost and what must still run after it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sluice.api.constants import GATED_POLICIES, POLICIES
from sluice.api.query import StreamingQuery

from .pipeline import spark_name


@dataclass(frozen=True, slots=True)
class Mode:
    gated: bool
    """Batches wait at the gate for the scheduler (edf, cameo)."""
    scheduling: str
    """spark.scheduler.mode: FIFO or FAIR."""
    fixed_pool: Callable[[StreamingQuery], str | None] | None
    """Ungated: the FAIR pool a query's batches run in (fair: its own)."""


def _own_pool(query: StreamingQuery) -> str | None:
    return spark_name(query.key)  # one equal pool per query


def mode_of(policy: str) -> Mode:
    """How the runtime runs under `policy`; ValueError with one sentence for an unknown one."""
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}; use one of {', '.join(POLICIES)}")
    if policy in GATED_POLICIES:
        return Mode(True, "FAIR", None)
    if policy == "fair":
        return Mode(False, "FAIR", _own_pool)
    return Mode(False, "FIFO", None)
