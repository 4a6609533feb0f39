"""DS2 on Spark: size a pool's executors from the true processing rates its runtime measured.

Pure: observations, the pool's policy and DS2's memory in, one decision (and the next memory)
out; `now` is passed in.

DS2 sizes each operator as `parallelism = target rate / true rate per instance`, where the true
rate counts only useful time (time doing work, not waiting for input). On Spark the operators
of all queries share the executors' cores, so the model sums demand over queries:

    cost of a batch (q)     = fixed (q) + per row (q) x rows      useful task seconds, fitted
    target rate (q)         = producer rate + lag / catch-up      (Kafka; else Spark's input rate)
    cores needed            = sum over q of  fixed / interval + per row x target rate
    executors               = ceil(cores needed / utilization / cores per executor)

Useful task seconds are the tasks' CPU time, summed over every stage of a batch (Spark's status
API; run time minus shuffle fetch wait where it gives no CPU time). Run time would count the time
a task waits for a core: on a full node, and under cameo most for the bulk lane's tasks, it reads
contention as demand and grows the pool onto the same cores. The runtime leaves out a query's
batches of its first seconds with rows, while the JVMs compile its code
(`runtime.hosted.RATES_WARMUP`). Once a query's recent batches differ in size (1.5x or more) a line through them splits each batch's cost into a fixed
part (planning, task launch, empty shuffle partitions) and a per-row part, so a rate step's
first decision lands: at twice the rate the fixed part is not paid twice. Until then the cost per row is the measured ratio, which is exact
at today's rate and over-provisions (a little) at a higher one.

The target rate is what the query must read: for a Kafka source, the rate its topics grow at
plus the rows it is behind drained within the catch-up time. Spark's own input rate is what the
last trigger read, so a capped trigger (`maxOffsetsPerTrigger`) would hide a backlog.

Anti-flap, as the Flink autoscaler's users expect:
- growth happens at once (an SLA is at stake), but never within the stabilization window after
  a change, when the measurements describe the transition rather than the new size;
- a shrink waits until the demand has wanted fewer executors for the whole scale-down delay,
  goes down to the most it wanted over that time, and removes at most `max_scale_down_factor`
  of the executors in one step;
- a query that has input but no measurement yet blocks a shrink (its demand is unknown);
- a scale-up made while the pool was behind is checked once the window has passed: if the
  pool's throughput rose by less than `effectiveness` of what the new executors should have
  added, the scaling was ineffective (a source with few partitions, a driver-bound query). Only the
  queries reading at the scale-up are compared: one that starts after it is no gain. It is
  recorded and DS2 does not grow the pool past it again until the spec changes or it shrinks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from sluice.scheduler import intervals
from sluice.scheduler.costs import fit_line
from sluice.scheduler.simulate import SimQuery, first_interval

from .sla_sizing import SlaCount

FIT_SPREAD = 1.5
"""Batch sizes must differ this much before a fixed part is fitted (below, the ratio stands)."""
BEHIND = 0.95
"""A pool reading less than this share of its target rate is behind."""


@dataclass(frozen=True, slots=True)
class QueryLoad:
    query: str
    input_rate: float
    """Rows per second the query read (Spark's inputRowsPerSecond): its throughput."""
    rows: float = 0.0
    """Input rows of the recent measured batches."""
    useful_seconds: float = 0.0
    """Useful task seconds of those batches."""
    batches: Sequence[tuple[float, float]] = ()
    """(input rows, useful task seconds) of each recent measured batch, for the fixed/per-row fit."""
    interval: float | None = None
    """Seconds between the query's batches (its trigger interval in force)."""
    producer_rate: float | None = None
    """Kafka sources: rows per second appended to the query's topic partitions."""
    lag: float = 0.0
    """Kafka sources: rows the query is behind the latest offsets."""
    catch_up: float = 60.0
    """Seconds to drain the lag in."""

    @property
    def true_rate(self) -> float | None:
        """Rows one core processes per second of useful time, once measured."""
        return self.rows / self.useful_seconds if self.rows > 0 and self.useful_seconds > 0 else None

    @property
    def target_rate(self) -> float:
        """Rows per second the query must read to keep up (and drain its lag)."""
        if self.producer_rate is None:
            return max(self.input_rate, 0.0) if math.isfinite(self.input_rate) else 0.0
        return max(self.producer_rate, 0.0) + max(self.lag, 0.0) / max(self.catch_up, 1e-3)

    def cost(self) -> tuple[float, float] | None:
        """(fixed useful seconds per batch, useful seconds per row); None until measured."""
        if self.true_rate is None:
            return None
        if self.interval is not None and self.interval > 0:
            line = fit_line([(int(r), u) for r, u in self.batches], spread=FIT_SPREAD)
            if line is not None:
                return line
        return 0.0, self.useful_seconds / self.rows

    def cores(self) -> float | None:
        """Cores the query needs at its target rate; None if it has input and no measurement."""
        target = self.target_rate
        if not target > 0:
            return 0.0
        cost = self.cost()
        if cost is None:
            return None
        fixed, per_row = cost
        per_second = 1.0 / self.interval if fixed > 0 and self.interval else 0.0
        return fixed * per_second + per_row * target


@dataclass(frozen=True, slots=True)
class Bounds:
    min_executors: int
    max_executors: int
    cores_per_executor: int
    utilization: float = 0.7
    stabilization: float = 60.0
    """Seconds after a change before the next one."""
    scale_down_delay: float = 300.0
    """Seconds the demand must want fewer executors before the pool shrinks."""
    max_scale_down_factor: float = 0.5
    """The largest share of the executors one shrink removes."""
    effectiveness: float = 0.1
    """A scale-up must add at least this share of its expected throughput gain."""


@dataclass(frozen=True, slots=True)
class ScaleUp:
    time: float
    from_executors: int
    to_executors: int
    throughput: float
    target_rate: float
    queries: tuple[str, ...] = ()
    """The queries then reading (empty: all). The check compares these only: a query that starts
    after the scale-up adds throughput the new executors did not make."""


@dataclass(frozen=True, slots=True)
class Ineffective:
    time: float
    from_executors: int
    to_executors: int
    expected: float
    observed: float
    generation: int


@dataclass(frozen=True, slots=True)
class Memory:
    """What DS2 carries from one decision to the next (the operator keeps it in the pool's status)."""

    last_change: float | None = None
    below_since: float | None = None
    """When the demand first wanted fewer executors than the pool has (None: it does not now)."""
    below_peak: int = 0
    """The most executors the demand wanted since then."""
    scale_up: ScaleUp | None = None
    ineffective: Ineffective | None = None


@dataclass(frozen=True, slots=True)
class Decision:
    target: int
    cores_needed: float
    reason: str
    wanted: int = 0
    """Executors the measured demand needs, before the pool's bounds."""
    memory: Memory = Memory()
    ineffective_found: Ineffective | None = None
    """An ineffective scale-up found by this decision (to record once)."""
    bound: str = "rates"
    """Which bound set `wanted`: "rates" (DS2: the work the rates make) or "slas" (the simulated
    schedule needs more executors to keep every SLA)."""
    sla: SlaCount | None = None
    """What the SLA simulation said (None: not simulated)."""

    def changes(self, current: int) -> bool:
        return self.target != current


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _throughput(loads: Sequence[QueryLoad]) -> float:
    return sum(load.input_rate for load in loads if math.isfinite(load.input_rate) and load.input_rate > 0)


def _reading(loads: Sequence[QueryLoad]) -> tuple[str, ...]:
    return tuple(sorted(load.query for load in loads if math.isfinite(load.input_rate) and load.input_rate > 0))


def _check_scale_up(memory: Memory, loads: Sequence[QueryLoad], bounds: Bounds, now: float,
                    generation: int, moving: bool = False) -> tuple[Memory, Ineffective | None]:
    """Once the stabilization window after a scale-up has passed, was it effective? Judged on the
    queries that were reading when it was made, and not while state partitions are still moving
    onto the new executors: until they have, a stateful stage cannot use them."""
    up = memory.scale_up
    if up is None or moving or now - up.time < bounds.stabilization:
        return memory, None
    memory = replace(memory, scale_up=None)
    if up.queries:
        loads = [load for load in loads if load.query in up.queries]
    throughput, target_rate = _throughput(loads), sum(load.target_rate for load in loads)
    behind_before = up.throughput < BEHIND * up.target_rate
    caught_up = throughput >= BEHIND * target_rate
    expected = min(up.target_rate, up.throughput * up.to_executors / max(up.from_executors, 1)) - up.throughput
    if not behind_before or caught_up or expected <= 0:
        return memory, None
    observed = throughput - up.throughput
    if observed >= bounds.effectiveness * expected:
        return memory, None
    found = Ineffective(now, up.from_executors, up.to_executors, expected, observed, generation)
    return replace(memory, ineffective=found), found


def decide(loads: list[QueryLoad], current: int, bounds: Bounds, now: float, memory: Memory | None = None,
           generation: int = 0, reserved: int = 0, moving: bool = False, sla: SlaCount | None = None) -> Decision:
    """The pool's executor count for these loads; `current` is the target now in force.
    `reserved`: task slots Real-time queries hold for as long as they run, counted whole (not at
    the utilization) on top of the micro-batch queries' cores. `moving`: the runtime still has
    state partitions to move (a scale-up's effect is not judged until they have). `sla`: the
    executors the simulated schedule needs to keep every SLA; when more than the rates need, it
    is the count wanted (and stabilization, delays and steps apply to it as to DS2's)."""
    if not 0 < bounds.utilization <= 1:
        raise ValueError("utilization must be in (0, 1]")
    memory = memory or Memory()
    if memory.ineffective is not None and (memory.ineffective.generation != generation
                                           or current < memory.ineffective.to_executors):
        memory = replace(memory, ineffective=None)  # the spec changed, or the pool shrank: try again
    if current > bounds.max_executors:  # the bounds moved below the pool: they apply at once
        inner = decide(loads, bounds.max_executors, bounds, now, replace(memory, last_change=None), generation, reserved,
                       moving, sla)
        return replace(inner, reason=f"maxExecutors {bounds.max_executors} is below the {current} asked for; "
                                     f"from there, {inner.reason}",
                       memory=replace(inner.memory, last_change=now, below_since=None, scale_up=None))
    cores = 0.0
    unmeasured = []
    for load in loads:
        need = load.cores()
        if need is None:
            unmeasured.append(load.query)
        else:
            cores += need
    memory, found = _check_scale_up(memory, loads, bounds, now, generation, moving)
    per_executor = max(bounds.cores_per_executor, 1)
    slots = min(cores / bounds.utilization + reserved, 1e9)
    wanted = 0 if slots <= 0 else math.ceil(slots / per_executor - 1e-9)
    by_rates = min(max(wanted, bounds.min_executors), bounds.max_executors)
    held = f" plus {_plural(reserved, 'task slot')} Real-time queries hold" if reserved else ""
    sized = (f"{len(loads)} quer{'y' if len(loads) == 1 else 'ies'} need {cores:.2f} cores; "
             f"at {bounds.utilization:.0%} utilization{held} that is {_plural(by_rates, 'executor')} "
             f"of {_plural(per_executor, 'core')}")
    if wanted > bounds.max_executors:
        sized += f" (capped at maxExecutors {bounds.max_executors}; {wanted} would keep up)"
    bound = "rates"
    if sla is not None:
        need = bounds.max_executors if sla.executors is None else sla.executors
        if need > wanted:
            wanted, bound = need, "slas"
            sized += f"; the SLAs need more, so they decide: {sla.why.rstrip('.')}"
        else:
            sized += f" (the rates decide; {sla.why.rstrip('.')})"
    target = min(max(wanted, bounds.min_executors), bounds.max_executors)

    def keep(why: str, next_memory: Memory) -> Decision:
        return Decision(current, cores, f"{sized}: {why}", wanted, next_memory, found, bound, sla)

    stable_until = None if memory.last_change is None else memory.last_change + bounds.stabilization
    if moving and target != current:  # the executors it has are not in use yet: judge them first
        return keep(f"keeping {current} while state partitions still move between executors.", memory)
    if target > current:
        memory = replace(memory, below_since=None, below_peak=0)
        if stable_until is not None and now < stable_until:
            return keep(f"keeping {current} for {stable_until - now:.0f}s more (stabilization window).", memory)
        blocked = memory.ineffective
        if blocked is not None and current >= blocked.to_executors:
            return keep(f"keeping {current}: growing from {blocked.from_executors} to {blocked.to_executors} added "
                        f"{blocked.observed:.0f} rows/s of the {blocked.expected:.0f} expected (ineffective), so the "
                        f"pool does not grow past it until its spec changes.", memory)
        up = ScaleUp(now, current, target, _throughput(loads), sum(load.target_rate for load in loads), _reading(loads))
        return Decision(target, cores, f"{sized}: growing from {current}.", wanted,
                        replace(memory, last_change=now, scale_up=up), found, bound, sla)
    if target == current:
        return keep("no change.", replace(memory, below_since=None, below_peak=0))
    if unmeasured:
        return keep(f"but {', '.join(sorted(unmeasured))} has input and no measurement yet: keeping {current}.",
                    replace(memory, below_since=None, below_peak=0))
    since = now if memory.below_since is None else memory.below_since
    peak = target if memory.below_since is None else max(memory.below_peak, target)
    memory = replace(memory, below_since=since, below_peak=peak)
    if stable_until is not None and now < stable_until:
        return keep(f"keeping {current} for {stable_until - now:.0f}s more (stabilization window).", memory)
    if now - since < bounds.scale_down_delay:
        return keep(f"keeping {current} for {since + bounds.scale_down_delay - now:.0f}s more (scale-down delay; "
                    f"the demand has wanted {peak} at most since it fell).", memory)
    floor = math.ceil(current * (1 - bounds.max_scale_down_factor) - 1e-9)
    new = min(current - 1, max(peak, floor, bounds.min_executors))
    step = f"; at most {bounds.max_scale_down_factor:.0%} of the executors go in one step" if new > peak else ""
    return Decision(new, cores, f"{sized}: shrinking from {current} to {new}{step}.", wanted,
                    replace(memory, last_change=now, below_since=None, below_peak=0, scale_up=None), found, bound, sla)


def ds2_executors(queries: Sequence[SimQuery], cores_per_executor: int, utilization: float = 0.7) -> tuple[int, str]:
    """DS2's executor count for these rates and costs (the operator's `decide`), and its reason.

    Each query's batches are given at two sizes so DS2 fits the same fixed and per-row cost the
    simulation uses; its interval is the one the runtime would start at."""
    loads = []
    for q in queries:
        interval = first_interval(q)[0] or intervals.MIN_INTERVAL
        rows = max(q.rate * interval, 1.0)
        batches = [(rows, q.fixed + q.per_row * rows), (rows * 2, q.fixed + q.per_row * rows * 2)] * 2
        useful = sum(c for _, c in batches)
        loads.append(QueryLoad(q.key, q.rate, sum(r for r, _ in batches), useful, batches, interval, q.rate))
    decision = decide(loads, 1, Bounds(1, 1_000_000, cores_per_executor, utilization), 0.0)
    return max(decision.wanted, 1), decision.reason.rsplit(": ", 1)[0] + "."
