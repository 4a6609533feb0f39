"""A pool's executor target: decided (pure), then realized through a small interface.

The flink-autoscaler's shape: the runtime's statuses are the collected metrics, `observations`
evaluates them into DS2's loads, `plan` decides (DS2's `decide`, or the fixed `spec.executors`
a `kubectl scale` set), and a `Realizer` (the runtime client) applies the target. DS2's memory
between decisions (the last change, a pending scale-down, a scale-up awaiting its check, an
ineffective one) lives in the pool's status, read by `memory` and written by `memory_status`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Protocol

from sluice.api.pool import StreamingPool
from sluice.api.wire import ExecutorState, QueryStatus, TargetAccepted

from .autoscaler import Bounds, Decision, Ineffective, Memory, QueryLoad, ScaleUp, decide
from .sla_sizing import SlaCount, sla_executors

CATCH_UP_PER_SLA, CATCH_UP_MIN, CATCH_UP_MAX = 10.0, 30.0, 600.0
"""A query's default catch-up time: 10x its latency target, within 30 s .. 10 min."""


class Realizer(Protocol):
    async def executors(self) -> ExecutorState: ...
    async def set_executors(self, target: int) -> TargetAccepted: ...


def catch_up(status: QueryStatus, setting: float | None) -> float:
    """Seconds a query's Kafka lag should drain in: the pool's setting, else from its SLA."""
    if setting is not None:
        return setting
    return min(max(CATCH_UP_PER_SLA * status.sla_ms / 1000, CATCH_UP_MIN), CATCH_UP_MAX)


def observations(queries: Mapping[str, QueryStatus], catch_up_setting: float | None = None) -> list[QueryLoad]:
    """The runtime's per-query rates, lag and measured useful task time, as DS2's observations."""
    return [QueryLoad(key, status.input_rate, float(status.load.rows), status.load.usefulSeconds,
                      batches=tuple((float(r), u) for r, u in status.load.perBatch),
                      interval=None if status.interval_ms is None else status.interval_ms / 1000,
                      producer_rate=status.producer_rate, lag=float(status.kafka_lag or 0),
                      catch_up=catch_up(status, catch_up_setting))
            for key, status in queries.items() if not status.reserved_slots]  # Real-time: reserved whole


def bounds(pool: StreamingPool) -> Bounds:
    spec = pool.spec
    auto = spec.autoscaling
    return Bounds(spec.minExecutors, spec.maxExecutors, spec.executor.cores, utilization=auto.utilization,
                  stabilization=auto.stabilizationWindow.seconds, scale_down_delay=auto.scaleDownDelay.seconds,
                  max_scale_down_factor=auto.maxScaleDownFactor, effectiveness=auto.effectivenessThreshold)


def _epoch(text: str | None) -> float | None:
    return datetime.fromisoformat(text).timestamp() if text else None


def _rfc3339(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def memory(status: Mapping[str, Any]) -> Memory:
    """DS2's memory from a pool's status (`lastScalingDecision.time` and `autoscaling`)."""
    auto = status.get("autoscaling") or {}
    up, bad = auto.get("pendingScaleUp"), auto.get("ineffectiveScaling")
    return Memory(
        last_change=_epoch((status.get("lastScalingDecision") or {}).get("time")),
        below_since=_epoch(auto.get("scaleDownSince")), below_peak=int(auto.get("scaleDownTo") or 0),
        scale_up=None if not up else ScaleUp(_epoch(up["time"]) or 0.0, up["fromExecutors"], up["toExecutors"],
                                             float(up["throughput"]), float(up["targetRate"]),
                                             tuple(up.get("queries") or ())),
        ineffective=None if not bad else Ineffective(_epoch(bad["time"]) or 0.0, bad["fromExecutors"], bad["toExecutors"],
                                                     float(bad["expectedRate"]), float(bad["observedRate"]),
                                                     int(bad["generation"])),
    )


def memory_status(remembered: Memory) -> dict[str, Any]:
    """The `status.autoscaling` fields that hold DS2's memory (None clears a field in a merge patch)."""
    up, bad = remembered.scale_up, remembered.ineffective
    return {
        "scaleDownSince": "" if remembered.below_since is None else _rfc3339(remembered.below_since),
        "scaleDownTo": remembered.below_peak,
        "pendingScaleUp": None if up is None else {
            "time": _rfc3339(up.time), "fromExecutors": up.from_executors, "toExecutors": up.to_executors,
            "throughput": round(up.throughput, 2), "targetRate": round(up.target_rate, 2), "queries": list(up.queries)},
        "ineffectiveScaling": None if bad is None else {
            "time": _rfc3339(bad.time), "fromExecutors": bad.from_executors, "toExecutors": bad.to_executors,
            "expectedRate": round(bad.expected, 2), "observedRate": round(bad.observed, 2), "generation": bad.generation},
    }


@dataclass(frozen=True, slots=True)
class Plan:
    target: int
    why: str
    decision: Decision | None = None
    """DS2's decision, when it changes the target (to record in status)."""
    overload: str | None = None
    """One sentence when the measured demand needs more executors than the pool will have."""
    recommendation: Decision | None = None
    """DS2's decision whether or not it was applied (None: autoscaling off, or not measured)."""
    memory: Memory | None = None
    """DS2's memory after this plan (None: unchanged)."""


def overload(decision: Decision, target: int, limits: Bounds) -> str | None:
    """A sentence when DS2's measured demand, or the SLAs, need more executors than `target` (None otherwise)."""
    sla = decision.sla
    if decision.bound == "slas" and sla is not None and sla.executors is None and target >= limits.max_executors:
        return f"{sla.why[:1].upper()}{sla.why[1:]}"
    if decision.wanted <= target:
        return None
    capped = f" (maxExecutors is {limits.max_executors})" if target >= limits.max_executors else ""
    if decision.bound == "slas":
        return (f"the simulated schedule needs {decision.wanted} executors to keep every SLA but the pool has "
                f"{target}{capped}: latency SLAs will be missed until it has {decision.wanted}.")
    return (f"the measured demand needs {decision.wanted} executors ({decision.cores_needed:.2f} cores at "
            f"{limits.utilization:.0%} utilization) but the pool has {target}{capped}: latency SLAs will be "
            f"missed until it has {decision.wanted}.")


def sla_count(pool: StreamingPool, queries: Mapping[str, QueryStatus] | None) -> SlaCount | None:
    """What the pool's SLAs need (`sla_sizing`), when autoscaling is on and slaSizing is set; a
    few simulations, so the operator runs it in a worker thread."""
    auto = pool.spec.autoscaling
    if queries is None or auto.mode == "off" or not auto.slaSizing:
        return None
    reserved = sum(status.reserved_slots for status in queries.values())
    return sla_executors(queries, pool.spec.executor.cores, pool.spec.policy, pool.spec.minExecutors,
                         pool.spec.maxExecutors, reserved)


def plan(pool: StreamingPool, current: int, queries: Mapping[str, QueryStatus] | None, now: float,
         remembered: Memory | None = None, generation: int = 0, moving: bool = False,
         sla: SlaCount | None = None) -> Plan:
    """The target for a pool whose target now is `current`; `queries`: None if unmeasured;
    `moving`: the runtime still moves state partitions (Megaphone); `sla`: what the SLAs need
    (`sla_count`), raising DS2's count."""
    fixed = pool.spec.executors
    auto = pool.spec.autoscaling
    limits = bounds(pool)
    if queries is None:
        return Plan(current if fixed is None else fixed,
                    "spec.executors is set." if fixed is not None else f"no measurements from the runtime; keeping {current}.")
    if auto.mode == "off":
        target = current if fixed is None else fixed
        return Plan(target, "spec.executors is set." if fixed is not None else
                    f"autoscaling is off (spec.autoscaling.mode); keeping {target}.")
    loads = observations(queries, None if auto.catchUp is None else auto.catchUp.seconds)
    remembered = remembered or Memory()
    reserved = sum(status.reserved_slots for status in queries.values())
    decision = decide(loads, current, limits, now, remembered, generation, reserved, moving, sla)
    if fixed is not None:  # a fixed count: DS2 only says whether it is enough
        return Plan(fixed, "spec.executors is set.", None, overload(decision, fixed, limits), decision)
    if auto.mode == "recommend":
        held = _held(remembered, decision, current)
        return Plan(current, f"DS2 recommends {decision.target} (spec.autoscaling.mode is recommend; nothing changes): "
                             f"{decision.reason}", None, overload(decision, current, limits), decision, held)
    who = "DS2 and the SLAs" if decision.bound == "slas" else "DS2"
    return Plan(decision.target, f"{who}: {decision.reason}", decision if decision.changes(current) else None,
                overload(decision, decision.target, limits), decision, decision.memory)


def micro_batch_slots(decision: Decision, pool: StreamingPool) -> int:
    """Task slots the micro-batch queries need at the pool's utilization (at least one)."""
    return max(math.ceil(decision.cores_needed / pool.spec.autoscaling.utilization - 1e-9), 1)


def _held(before: Memory, decision: Decision, current: int) -> Memory:
    """The memory of a recommendation that is not applied: no change happened, so a pending
    scale-down keeps its start (the recommendation stays a shrink) and no scale-up awaits a check."""
    if not decision.changes(current):
        return decision.memory
    return replace(decision.memory, last_change=before.last_change, below_since=before.below_since or decision.memory.below_since,
                   below_peak=before.below_peak if before.below_since is not None else decision.memory.below_peak,
                   scale_up=before.scale_up)


async def realize(realizer: Realizer, target: int) -> tuple[ExecutorState, bool]:
    """Bring the runtime's executor target to `target`; the state after, and whether it was asked."""
    state = await realizer.executors()
    if state.target == target:
        return state, False
    await realizer.set_executors(target)
    return await realizer.executors(), True

