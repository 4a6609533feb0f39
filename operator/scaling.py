"""A pool's executor target: decided (pure), then realized through a small interface.

The flink-autoscaler's shape: the runtime's statuses are the collected metrics, `observations`
evaluates them into DS2's loads, `plan` decides (DS2's `decide`, or the fixed `spec.executors`
a `kubectl scale` set), and a `Realizer` (the runtime client) applies the target. The operator
keeps the state (the last decision) in the pool's status.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from sluice.api.pool import StreamingPool
from sluice.api.runtime import ExecutorState, QueryStatus, TargetAccepted

from .autoscaler import Bounds, Decision, QueryLoad, decide


class Realizer(Protocol):
    async def executors(self) -> ExecutorState: ...
    async def set_executors(self, target: int) -> TargetAccepted: ...


def observations(queries: Mapping[str, QueryStatus]) -> list[QueryLoad]:
    """The runtime's per-query input rates and measured useful task time, as DS2's observations."""
    return [QueryLoad(key, status.input_rate, float(status.load.rows), status.load.usefulSeconds)
            for key, status in queries.items()]


def bounds(pool: StreamingPool, utilization: float, cooldown: float) -> Bounds:
    spec = pool.spec
    return Bounds(spec.minExecutors, spec.maxExecutors, spec.executor.cores, utilization=utilization, cooldown=cooldown)


@dataclass(frozen=True, slots=True)
class Plan:
    target: int
    why: str
    decision: Decision | None = None
    """DS2's decision, when it changes the target (to record in status)."""
    overload: str | None = None
    """One sentence when the measured demand needs more executors than the pool will have."""


def overload(decision: Decision, target: int, limits: Bounds) -> str | None:
    """A sentence when DS2's measured demand needs more executors than `target` (None otherwise)."""
    if decision.wanted <= target:
        return None
    capped = f" (maxExecutors is {limits.max_executors})" if target >= limits.max_executors else ""
    return (f"the measured demand needs {decision.wanted} executors ({decision.cores_needed:.2f} cores at "
            f"{limits.utilization:.0%} utilization) but the pool has {target}{capped}: latency SLAs will be "
            f"missed until it has {decision.wanted}.")


def plan(pool: StreamingPool, current: int, queries: Mapping[str, QueryStatus] | None, limits: Bounds,
         now: float, last_change: float | None) -> Plan:
    """The target for a pool whose target now is `current`; `queries`: None if unmeasured."""
    if queries is None:
        fixed = pool.spec.executors
        return Plan(current if fixed is None else fixed,
                    "spec.executors is set." if fixed is not None else f"no measurements from the runtime; keeping {current}.")
    decision = decide(observations(queries), current, limits, now, last_change)
    if pool.spec.executors is not None:  # a fixed count: DS2 only says whether it is enough
        return Plan(pool.spec.executors, "spec.executors is set.", None, overload(decision, pool.spec.executors, limits))
    return Plan(decision.target, f"DS2: {decision.reason}", decision if decision.changes(current) else None,
                overload(decision, decision.target, limits))


async def realize(realizer: Realizer, target: int) -> tuple[ExecutorState, bool]:
    """Bring the runtime's executor target to `target`; the state after, and whether it was asked."""
    state = await realizer.executors()
    if state.target == target:
        return state, False
    await realizer.set_executors(target)
    return await realizer.executors(), True
