"""Micro-batches or Spark's Real-time Mode, per query (pure: the query's facts in, a mode out).

A micro-batch query cannot beat its floor: a row waits for the next batch to start (at least the
shortest interval) and then for that batch (Spark's fixed cost and the commit after it). When a
query's SLA is below that floor and Real-time Mode can run it (a stateless Kafka-to-Kafka
pipeline), `auto` picks Real-time Mode; otherwise micro-batches, whose interval then comes from
the SLA (`intervals`). An explicit `microBatch` or `realTime` wins.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .intervals import COMMIT_PRIOR, FIXED_PRIOR, MARGIN, MIN_INTERVAL

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


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 10 else f"{seconds:.0f} s"
