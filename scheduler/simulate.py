"""What-if for one pool (pure): queries, their rates and batch costs in, predicted latencies out.

A discrete-event simulation in simulated seconds from 0. It drives the scheduler core itself
(`core.Scheduler`: its policies, bands, holds and aging) and the runtime's batching rules
(`intervals.first`, then `intervals.next_interval` on `intervals.measured` after a dwell, one
interval change per lifecycle check): nothing here re-implements them. What is modelled, so its
limits are plain:

- **Cores** (`cores.Cores`). The gate grants at most `Pool.gate` batches at once. A granted
  batch's work is its driver's (one thread) and then its tasks' (core-seconds over its tasks),
  the query's recorded work (`sluice run --report`'s driver and task CPU, contention left out);
  the running batches' threads share the pool's cores and Spark's task slots, so batches slow
  each other as they do on shared cores. Under a policy with bands, a batch granted an urgent
  band takes free task slots first (its band's minimum share); with `Pool.priority` (the urgent
  lane's raised thread priorities) its threads also weigh more on the cores, and with
  `Pool.bulk_slots` (the lane's bulk turns) the other tasks run a few at a time. Executors on one
  machine (`Pool.host_cores`: a `local-cluster` master) share that machine's cores,
  however many executors there are. A query with only `fixed` and `per_row` (declared, or
  recorded before the work figures) is one thread's work of `fixed + per_row x rows`: on a pool
  where no thread ever shares a core this is the slot model of before, a batch holding one slot
  for its cost.
- **Triggers** (Spark's processing-time trigger). A batch starts at its predecessor's start plus
  the interval, or at once when the predecessor ran past that; it reads every row produced up to
  its start less the source's lag (`SimQuery.lag`: 0 on Kafka, up to a second on a `rate`
  source). A recorded spread (`SimQuery.spread`) varies each batch's work around its steady
  work. A stateless query skips a trigger that finds no rows. After its action the batch
  commits its offsets (`commit`), and only then is its output delivered.
- **Windows** (tumbling, event time = production time, as the benchmark's load writes it). A
  batch's watermark is the newest event the batches before it read, less the delay; the batch
  emits every window ending at or below it. A window's latency is its commit time less its end
  (the runtime's latency of an aggregated row: its newest production time), and it counts as
  `keys` output rows. A trigger with no new rows still runs a batch when it would emit a window
  (Spark's no-data batch).
- **Interval changes** restart the query: no batch for `Options.restart` seconds.

Latency per row: a batch's rows are spread over their production times by the load's rate (bursts
included), so each batch contributes its latencies at the runtime's quantile grid, weighted by
rows, as the runtime's `LatencyWindow` does. Quantiles come from log-spaced bins (2% wide).
"""

from __future__ import annotations

import gc
import heapq
import math
import random
import statistics
import zlib
from collections import defaultdict, deque
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field, replace

from sluice.api.constants import GRID, MASSES
from sluice.api.scenario import Burst

from . import intervals
from .bands import band_name, urgent_bands
from .core import Completion, Scheduler
from .cores import Cores, Job, fits
from .policies import BatchRequest, QuerySpec

CRITICAL_GOAL = 0.99
"""Share of a latency-critical query's rows that must be within its SLA (`spec.sla.critical`)."""
GOAL = 0.95
"""Share of any other query's rows that must be within its SLA."""
RESTART = 1.0
"""Seconds a query runs no batch while it restarts for a new interval (stop, plan, first
trigger). An assumption, not a measurement: the runtime does not record it yet."""
CHECK_EVERY = 2.0
"""Seconds between the runtime's lifecycle checks (`QueryHost._tick`: at most 2 s)."""
RECENT = 32
"""Batches a query's interval choice looks back on (the runtime's `RECENT_BATCHES`)."""
BIN = math.log(1.02)
"""Width of a latency bin (log scale): quantiles are reported at most 2% high."""
BIN_FLOOR = 1e-3
"""Seconds: latencies below it share the first bin."""
GRID_MASSES = tuple(zip(GRID, MASSES, strict=True))
Z90 = statistics.NormalDist().inv_cdf(0.9)
"""The standard normal's 90th percentile: a log-normal of median 1 and 90th percentile s has sigma ln(s) / Z90."""


@dataclass(frozen=True, slots=True)
class SimQuery:
    """One query as the simulation sees it (seconds and rows per second throughout)."""

    key: str
    tenant: str
    sla: float
    rate: float
    """Rows per second produced to its source, before bursts."""
    fixed: float
    """Seconds a batch costs whatever its rows."""
    per_row: float
    """Seconds each input row adds to a batch."""
    commit: float = intervals.COMMIT_PRIOR
    """Seconds from the batch's action to its committed output (offset commit)."""
    bursts: tuple[Burst, ...] = ()
    critical: bool = False
    trigger: float | None = None
    """spec.trigger's interval (0: back to back); None: chosen from the SLA, as the runtime does."""
    window: float | None = None
    """Tumbling window length of a windowed aggregation; None for a stateless query."""
    delay: float = 0.0
    """Watermark delay of a windowed aggregation."""
    keys: int = 100
    """Distinct keys: output rows of each window."""
    weight: float = 1.0
    """The tenant's weight under `fair`."""
    driver: float | None = None
    """Seconds of a batch's work on the driver's thread; None: the query has `fixed` and
    `per_row` only (one thread's work of `fixed + per_row x rows`)."""
    task_fixed: float = 0.0
    """Core-seconds of task work a batch costs whatever its rows (with `driver`)."""
    task_per_row: float = 0.0
    """Core-seconds of task work each input row adds (with `driver`)."""
    tasks: int = 1
    """Tasks a batch's work spreads over (with `driver`)."""
    off_cpu: float = 0.0
    """Seconds a task spends off the CPU (state-store and shuffle writes, fetches) for each second
    of its CPU (with `driver`): after its tasks' CPU the batch waits that long without taking a
    core (`--model cores-wait`)."""
    hold: float = 0.0
    """Seconds a task spends off the CPU for each second of its CPU, holding its slot and its bulk
    turn through them, taking no core (with `driver`; `--model cores-hold`, `cores.Job.hold`)."""
    driver_wait: float = 0.0
    """Seconds of a batch's driver work spent off the CPU (with `driver`, then its CPU seconds): the
    Kafka and checkpoint round trips of offsets and commit, waited without taking a core
    (`--model cores-cpu`, after the batch's tasks as `off_cpu`'s wait)."""
    spread: float = 1.0
    """How much its batches' costs vary beyond their rows: a recording's `costs.spread` (the 90th
    percentile of each warm batch's cost over the fitted cost of its rows, over the median). Above
    1 each batch's work is its steady work times a factor drawn, seeded by the query's key, from a
    log-normal of median 1 and this 90th percentile."""
    lag: float = 0.0
    """Seconds after its production a row becomes readable (a recording's `lag_ms`: a `rate`
    source's whole seconds, a producer's batching): a trigger reads the rows produced up to its
    time less the lag."""
    cold: tuple[float, ...] = ()
    """Seconds its first batches with rows took, in order (a recording's `cold_ms`): a cold start.
    Such a batch takes at least that long from its grant to its action's end; what it takes
    beyond its modelled work is a wait without a core (the recorded time already holds what the
    other batches took from it)."""

    @property
    def goal(self) -> float:
        return CRITICAL_GOAL if self.critical else GOAL

    def work(self, rows: float, factor: float = 1.0) -> Job:
        """A batch of `rows` as work on the cores (`factor`: this batch's draw of `spread`)."""
        if self.driver is None:
            return Job(self.key, 0.0, (self.fixed + self.per_row * rows) * factor, 1)
        return Job(self.key, self.driver * factor, (self.task_fixed + self.task_per_row * rows) * factor,
                   max(self.tasks, 1), hold=self.hold)

    def alone(self, rows: float, factor: float = 1.0) -> float:
        """Seconds a batch of `rows` takes with every thread on a core of its own (`work`'s driver
        phase, then its tasks side by side, then their time off the CPU)."""
        if self.driver is None:
            return (self.fixed + self.per_row * rows) * factor
        return (self.driver + self.driver_wait
                + (self.task_fixed + self.task_per_row * rows) / max(self.tasks, 1) * (1.0 + self.off_cpu + self.hold)) * factor

    def waits(self, rows: float, factor: float = 1.0) -> float:
        """Seconds a batch of `rows` spends off the CPU after its work on the cores (no core taken)."""
        if self.driver is None:
            return 0.0
        return ((self.task_fixed + self.task_per_row * rows) / max(self.tasks, 1) * self.off_cpu + self.driver_wait) * factor

    def produced(self, t: float) -> float:
        """Rows produced by simulated time t (the load generator's integral: `LoadPlan.expected`)."""
        total = self.rate * t
        for burst in self.bursts:
            total += self.rate * (burst.factor - 1) * max(0.0, min(t, burst.at + burst.length) - burst.at)
        return total

    def production_times(self, start: float, end: float) -> list[float]:
        """Production times of the rows produced in [start, end] at each GRID quantile (oldest first)."""
        if not self.bursts:
            return [start + q * (end - start) for q in GRID]
        edges = sorted({start, end, *(t for b in self.bursts for t in (b.at, b.at + b.length) if start < t < end)})
        base = self.produced(start)
        total = self.produced(end) - base
        out = []
        i = 0
        for q in GRID:
            goal = base + q * total
            while i + 1 < len(edges) - 1 and self.produced(edges[i + 1]) < goal:
                i += 1
            lo, hi = edges[i], edges[i + 1]
            rows_lo, rows_hi = self.produced(lo), self.produced(hi)
            out.append(lo if rows_hi <= rows_lo else lo + (hi - lo) * (goal - rows_lo) / (rows_hi - rows_lo))
        return out


@dataclass(frozen=True, slots=True)
class Pool:
    executors: int
    cores_per_executor: int = 1
    policy: str = "cameo"
    max_wait: float = 30.0
    """The scheduler's aging bound (seconds)."""
    reserved: int = 0
    """Slots held outside the micro-batch schedule (Real-time queries hold theirs whole)."""
    capacity: int | None = None
    """Batches the gate grants at once; None: one a core (`slots`)."""
    task_slots: int | None = None
    """Spark's task slots in all (e.g. 16 for `local[16]`); None: one a core."""
    driver_shares: bool = False
    """The driver's thread shares the executors' cores (a local master); else it has its own."""
    taken: float = 0.0
    """Cores other processes keep busy (a recording's broker and load generator, `--other-cores`):
    the batches' threads share what is left of the pool's cores, at least a tenth of a core."""
    host_cores: float | None = None
    """The cores of the one machine every executor runs on (a `local-cluster` master): the
    threads share them, however many executors; None: each executor core is a core of its own
    (executor pods)."""
    priority: bool = False
    """Urgent bands' task threads weigh more on the cores (the urgent lane's raised thread
    priorities: root on a local master; pool pods lack `CAP_SYS_NICE`)."""
    bulk_slots: int | None = None
    """Tasks outside the urgent bands that run at once, at most (the urgent lane's bulk turns on a
    local master); None: any."""
    busy: tuple[tuple[float, float], ...] = ()
    """Cores the JVMs' own threads (JIT compilers, collectors) take beside the batches, over time:
    (from simulated second, cores) steps, a recording's (`sluice bench cameo` measures them, locally
    and on the node target); the batches' threads share the rest. A JVM compiles most in its first
    minute (a cold start the steady costs do not hold)."""
    lane: int = 0
    """Gate slots beyond `gate`, per critical query, that only critical queries' batches take (`Scheduler.lane`): a
    recording's (`critical_lane`); none otherwise, so a sizing errs high by what the pool's lane
    (`sluice.api.constants.CRITICAL_LANE`) saves its critical queries."""

    @property
    def slots(self) -> int:
        return max(self.executors * self.cores_per_executor - self.reserved, 0)

    @property
    def gate(self) -> int:
        """Batches granted at once."""
        return self.slots if self.capacity is None else self.capacity

    def cores(self) -> Cores:
        """The micro-batches' cores and task slots (Real-time queries hold theirs)."""
        slots = self.executors * self.cores_per_executor if self.task_slots is None else self.task_slots
        own = self.slots if self.host_cores is None else self.host_cores
        cores = max(own - self.taken, 0.1) if own > 0 and self.taken > 0 else own
        return Cores(cores, max(slots - self.reserved, 1), self.driver_shares, self.priority, self.bulk_slots)

    def scaled(self, executors: int) -> Pool:
        """The same pool with `executors` executors (Spark's task slots scale with them)."""
        slots = None if self.task_slots is None else max(self.task_slots * executors // max(self.executors, 1), 1)
        return replace(self, executors=executors, task_slots=slots)


@dataclass(frozen=True, slots=True)
class Options:
    duration: float = 600.0
    warmup: float = 0.0
    """Seconds at the start whose output is left out of the figures."""
    restart: float = RESTART
    check_every: float = CHECK_EVERY
    dwell: float = 30.0
    """Seconds an interval stays before it may change (the runtime's `interval_dwell`)."""
    timeline: bool = False
    """Keep every batch's (commit time, worst latency) per query, for plots."""


@dataclass(slots=True)
class QueryResult:
    key: str
    sla: float
    goal: float
    rows: float = 0.0
    """Output rows counted (after warm-up)."""
    within: float = 0.0
    batches: int = 0
    restarts: int = 0
    interval: float = 0.0
    """The interval in force at the end."""
    reason: str = ""
    bins: defaultdict[int, float] = field(default_factory=lambda: defaultdict(float))
    timeline: list[tuple[float, float]] = field(default_factory=list)

    @property
    def attainment(self) -> float | None:
        return None if self.rows <= 0 else self.within / self.rows

    def quantile(self, q: float) -> float | None:
        if self.rows <= 0:
            return None
        # a goal met within rounding counts as met: at a tie between two bins (a quantile on the
        # edge between two batches' rows) the lower one, whatever order the rows were summed in
        goal, seen = q * self.rows * (1 - 1e-9), 0.0
        for index in sorted(self.bins):
            seen += self.bins[index]
            if seen >= goal:
                return BIN_FLOOR * math.exp((index + 1) * BIN)
        return BIN_FLOOR * math.exp((max(self.bins) + 1) * BIN)

    @property
    def kept(self) -> bool:
        attainment = self.attainment
        return attainment is not None and attainment >= self.goal

    def add(self, latency: float, rows: float) -> None:
        self.rows += rows
        if latency <= self.sla:
            self.within += rows
        index = -1 if latency <= BIN_FLOOR else int(math.log(latency / BIN_FLOOR) / BIN)
        self.bins[index] += rows

    def add_batch(self, latencies: Sequence[float], rows: float) -> None:
        """A batch's latencies at the GRID quantiles, its `rows` spread by the grid's masses."""
        bins, sla, log = self.bins, self.sla, math.log
        self.rows += rows
        within = 0.0
        for latency, mass in zip(latencies, MASSES, strict=True):
            if latency <= sla:
                within += mass
            index = -1 if latency <= BIN_FLOOR else int(log(latency / BIN_FLOOR) / BIN)
            bins[index] += rows * mass
        self.within += rows * within

    def add_even(self, age: float, span: float, rows: float) -> None:
        """`add_batch` for rows produced evenly over `span` seconds, the oldest `age` seconds ago
        (the latency at quantile q is age - q x span): no list of latencies to build."""
        bins, sla, log, floor, width = self.bins, self.sla, math.log, BIN_FLOOR, BIN
        self.rows += rows
        within = 0.0
        for q, mass in GRID_MASSES:  # every filter's every batch: names local, no conditional expression
            latency = age - q * span
            if latency <= sla:
                within += mass
            if latency <= floor:
                bins[-1] += rows * mass
            else:
                bins[int(log(latency / floor) / width)] += rows * mass
        self.within += rows * within

    def json(self) -> dict[str, object]:
        p50, p99, att = self.quantile(0.5), self.quantile(0.99), self.attainment
        return {"sla_ms": round(self.sla * 1000, 1), "goal": self.goal,
                "p50_ms": None if p50 is None else round(p50 * 1000, 1),
                "p99_ms": None if p99 is None else round(p99 * 1000, 1),
                "attainment": None if att is None else round(att, 5), "kept": self.kept, "rows": round(self.rows),
                "batches": self.batches, "interval_ms": round(self.interval * 1000, 1),
                "interval_restarts": self.restarts, "interval_reason": self.reason}


@dataclass(frozen=True, slots=True)
class Result:
    pool: Pool
    queries: dict[str, QueryResult]
    decisions: int
    """Scheduler dispatch calls made."""
    decision_seconds: float
    """Time spent in them, by `timer` (0 without one)."""
    events: int
    options: Options = Options()

    @property
    def kept(self) -> bool:
        return all(q.kept for q in self.queries.values())

    def worst(self) -> QueryResult | None:
        """The query furthest below its goal (the lowest attainment less goal)."""
        measured = [q for q in self.queries.values() if q.attainment is not None]
        return min(measured, key=lambda q: (q.attainment or 0.0) - q.goal, default=None)


@dataclass(slots=True)
class _Batch:
    batch_id: int
    start: float
    rows: float
    read_from: float
    read_to: float
    """Production time of the newest row it read (its start less the source's lag)."""
    windows: list[float]
    """Ends of the windows it emits."""
    granted: float | None = None
    cost: float = 0.0
    """Seconds from its grant to the end of its work (its action)."""
    cold: float = 0.0
    """Seconds it takes at least (a cold start's, `SimQuery.cold`)."""
    factor: float = 1.0
    """Its work's draw of the query's `spread`."""


@dataclass(slots=True)
class _State:
    query: SimQuery
    index: int
    interval: float
    reason: str
    since: float = 0.0
    """When the interval in force was chosen."""
    measured: int = 0
    """Batches with rows committed since then."""
    generation: int = 0
    read_to: float = 0.0
    emitted_to: float = 0.0
    """End of the last window emitted."""
    watermark: float = -math.inf
    next_id: int = 0
    batch: _Batch | None = None
    recent: deque[tuple[float, int, float, float, float]] = field(default_factory=lambda: deque(maxlen=RECENT))
    """(committed, rows, cost, gate wait, commit) of recent batches."""
    overshoots: deque[float] = field(default_factory=lambda: deque(maxlen=intervals.OVERSHOOTS))
    """Seconds each warm batch with rows took from its trigger to its action's end, where its rows'
    latencies are taken (`intervals.Costs.overshoots`; the simulated sources have no lag)."""
    rate: float = 0.0
    """Input rate of the last batch (Spark's inputRowsPerSecond)."""
    granted: int = 0
    """Batches granted so far (the first `len(query.cold)` take their cold start's time)."""
    draws: random.Random | None = None
    """The factors of its batches' work (`SimQuery.spread` above 1), seeded by its key."""
    sigma: float = 0.0
    """The log-normal's sigma of those factors: ln(spread) / Z90."""


_TRIGGER, _DONE, _DISPATCH, _CHECK, _WORKED, _BUSY = 0, 1, 2, 3, 4, 5


def next_trigger(began: float, interval: float) -> float:
    """When Spark's processing-time trigger fires next after a trigger at `began`: the next
    multiple of the interval (`ProcessingTimeExecutor.nextBatchTime`, on the epoch's clock, as
    window ends are), not an interval after it. Queries of one interval trigger together, and a
    batch that ran past the tick is followed at once, the one after it on the grid again."""
    if interval <= 0:
        return began
    return (math.floor(began / interval + 1e-9) + 1) * interval


def first_interval(query: SimQuery) -> tuple[float, str]:
    if query.trigger is not None:
        return max(query.trigger, 0.0), "spec.trigger sets it."
    delay = query.delay if query.window is not None else None
    costs = intervals.Costs(intervals.FIXED_PRIOR, intervals.PER_ROW_PRIOR, 0.0, 0.0, intervals.COMMIT_PRIOR)
    choice = intervals.first(query.sla, costs, delay)
    return intervals.staggered(choice.interval, query.key), choice.reason


def simulate(queries: Sequence[SimQuery], pool: Pool, options: Options | None = None,
             timer: Callable[[], float] | None = None) -> Result:
    """Run the pool for `options.duration` simulated seconds; `timer` (e.g. time.perf_counter)
    times the scheduler's decisions."""
    options = options or Options()
    if pool.slots < 1:
        raise ValueError("the pool needs at least one executor core")
    keys = [q.key for q in queries]
    if len(set(keys)) != len(keys):
        raise ValueError("each query may appear once")
    if pool.gate < 1:
        raise ValueError("the gate must grant at least one batch at once")
    scheduler = Scheduler(pool.policy, capacity=pool.gate, max_wait=pool.max_wait, lane=pool.lane)
    urgent = {band_name(i) for i in range(urgent_bands(scheduler.bands))} if scheduler.policy.uses_bands else set()
    cores = pool.cores()
    at_once = pool.gate + scheduler.lane * sum(q.critical for q in queries)  # the critical lane's too
    shared: Cores | None = None if not pool.busy and fits(
        cores.cores, cores.task_slots, at_once, max((q.tasks if q.driver is not None else 1 for q in queries), default=1)
    ) else cores
    steady = cores.cores
    shared_generation = 0
    states: dict[str, _State] = {}
    results: dict[str, QueryResult] = {}
    events: list[tuple[float, int, int, str, int]] = []
    seq = 0

    def push(t: float, kind: int, key: str = "", generation: int = 0) -> None:
        nonlocal seq
        seq += 1
        heapq.heappush(events, (t, seq, kind, key, generation))

    for index, query in enumerate(queries):
        if query.sla <= 0 or query.rate < 0 or query.fixed < 0 or query.per_row < 0 or query.commit < 0 \
                or query.off_cpu < 0 or query.hold < 0 or query.driver_wait < 0 or any(c < 0 for c in query.cold):
            raise ValueError(f"query {query.key}: the SLA must be above zero and rates and costs not negative")
        if query.window is not None and query.window <= 0:
            raise ValueError(f"query {query.key}: a window must be longer than zero")
        if query.spread < 1:
            raise ValueError(f"query {query.key}: the spread of its batches' times is at least 1 (a 90th percentile over a median)")
        interval, reason = first_interval(query)
        state = states[query.key] = _State(query, index, interval, reason)
        if query.spread > 1:
            state.draws = random.Random(zlib.crc32(query.key.encode()))
            state.sigma = math.log(query.spread) / Z90
        results[query.key] = QueryResult(query.key, query.sla, query.goal, interval=interval, reason=reason)
        scheduler.register(QuerySpec(query.key, query.tenant, query.sla, query.weight, query.window, query.delay,
                                     critical=query.critical))
        push(0.0, _TRIGGER, query.key)
    if options.check_every > 0:
        push(options.check_every, _CHECK)
    for step, (since, _) in enumerate(pool.busy):
        if since < 0:
            raise ValueError("the JVMs' busy cores start at a simulated second of zero or more")
        push(since, _BUSY, "", step)

    decisions, decision_seconds, handled = 0, 0.0, 0
    dirty: set[str] = set()
    hold_at: float | None = None

    def dispatch(now: float) -> None:
        nonlocal decisions, decision_seconds, hold_at
        began = timer() if timer else 0.0
        grants = scheduler.dispatch(now)
        if timer:
            decision_seconds += timer() - began
        decisions += 1
        for grant in grants:
            state = states[grant.query]
            batch = state.batch
            if batch is None or batch.batch_id != grant.batch_id:
                continue
            batch.granted = now
            query = state.query
            if state.granted < len(query.cold):
                batch.cold = query.cold[state.granted]
            state.granted += 1
            if state.draws is not None:
                batch.factor = state.draws.lognormvariate(0.0, state.sigma)
            if shared is None:  # no thread ever shares a core: the batch runs at full speed
                batch.cost = max(query.alone(batch.rows, batch.factor), batch.cold)
                push(now + batch.cost + query.commit, _DONE, grant.query, state.generation)
            else:
                job = query.work(batch.rows, batch.factor)
                shared.start(now, replace(job, urgent=True) if grant.band in urgent else job)
                share(now)
        until = scheduler.hold_until
        if until is not None and (hold_at is None or until < hold_at or hold_at <= now):
            hold_at = until
            push(until, _DISPATCH)

    def share(now: float) -> None:
        """After a change on the shared cores: the event for the next phase end."""
        nonlocal shared_generation
        assert shared is not None
        shared_generation += 1
        end = shared.next_end()
        if end is not None:
            push(max(end, now), _WORKED, "", shared_generation)

    def worked(now: float) -> None:
        """Batches whose work ended: each commits, then is done."""
        assert shared is not None
        for job in shared.advance(now):
            state = states[job.key]
            batch = state.batch
            assert batch is not None and batch.granted is not None
            query = state.query
            off = query.waits(batch.rows, batch.factor) if query.off_cpu > 0 or query.driver_wait > 0 else 0.0
            off = max(off, batch.granted + batch.cold - now)  # a cold start's time beyond its work
            batch.cost = now + off - batch.granted
            push(now + off + state.query.commit, _DONE, job.key, state.generation)
        share(now)

    def trigger(state: _State, now: float) -> None:
        query = state.query
        upto = max(now - query.lag, state.read_to)  # the newest row readable now
        if query.bursts:
            rows = max(query.produced(upto) - query.produced(state.read_to), 0.0)
        else:
            rows = max(query.rate * (upto - state.read_to), 0.0)
        windows: list[float] = []
        if query.window is not None:
            end = state.emitted_to + query.window
            while end <= state.watermark:
                windows.append(end)
                end += query.window
        if rows < 0.5 and not windows:  # nothing to read or emit: Spark skips the trigger
            push(next_trigger(now, state.interval) if state.interval > 0 else now + 1e-3, _TRIGGER, query.key,
                 state.generation)
            return
        state.batch = _Batch(state.next_id, now, rows, state.read_to, upto, windows)
        scheduler.submit(BatchRequest(query.key, state.next_id, round(rows), oldest_event=state.read_to,
                                      window_end=windows[0] if windows else None), now)
        state.next_id += 1
        dispatch(now)

    def done(state: _State, now: float) -> None:
        query, batch = state.query, state.batch
        assert batch is not None and batch.granted is not None
        cost, rows = batch.cost, round(batch.rows)
        scheduler.complete(Completion(query.key, batch.batch_id, cost, rows, tail=query.commit))
        result = results[query.key]
        result.batches += 1
        state.measured += rows > 0  # as `recent` keeps its rows
        state.recent.append((now, rows, cost, batch.granted - batch.start, query.commit))
        if rows > 0 and state.granted > len(query.cold):
            state.overshoots.append(now - batch.start)
        span = batch.read_to - batch.read_from
        state.rate = batch.rows / span if span > 0 else state.rate
        if batch.read_to > batch.read_from:
            state.watermark = batch.read_to - query.delay  # the newest event it read, less the delay
        state.read_to = max(state.read_to, batch.read_to)
        counted = now >= options.warmup
        worst = 0.0
        if query.window is None:
            if counted and batch.rows > 0:
                if query.bursts:
                    latencies = [now - t for t in query.production_times(batch.read_from, batch.read_to)]
                    result.add_batch(latencies, batch.rows)
                else:  # rows produced evenly: `production_times` without bursts, in one pass
                    result.add_even(now - batch.read_from, span, batch.rows)
                worst = now - batch.read_from
        else:
            for end in batch.windows:
                if counted:
                    result.add(now - end, min(query.keys, query.rate * query.window))
                worst = max(worst, now - end)
            if batch.windows:
                state.emitted_to = batch.windows[-1]
        if options.timeline and counted and worst > 0:
            result.timeline.append((now, worst))
        state.batch = None
        if query.trigger is None:  # spec.trigger's interval never changes
            dirty.add(query.key)
        following = next_trigger(batch.start, state.interval)
        push(max(following, now), _TRIGGER, query.key, state.generation)
        if scheduler.may_have_pending:  # the freed slot matters only to a waiting batch
            dispatch(now)

    def check(now: float) -> None:
        """The runtime's lifecycle check: at most one query changes its interval (a restart)."""
        # the queries past their dwell with 3 measured batches since, in the runtime's order (a
        # pool's slow queries stay dirty for minutes: filtered first; a heap, not a sort, as the
        # walk usually ends at its first restart)
        dwell = options.dwell
        ready = [(state.index, key) for key in dirty
                 if now - (state := states[key]).since >= dwell and state.measured >= 3]
        heapq.heapify(ready)
        while ready:
            _, key = heapq.heappop(ready)
            state = states[key]
            query = state.query
            recent = [(r, c) for _, r, c, _, _ in state.recent if r > 0]
            waits = [w for _, _, _, w, _ in state.recent]
            # the median commit of its recent batches: each commit here is the query's `commit`
            costs = intervals.measured(recent, state.rate, sum(waits) / len(waits), query.commit)
            dirty.discard(key)
            if costs is None:
                continue
            costs = replace(costs, overshoots=tuple(state.overshoots))
            delay = query.delay if query.window is not None else None
            choice = intervals.next_interval(state.interval, query.sla, costs, delay)
            result = results[key]
            result.reason = choice.reason
            if abs(choice.interval - state.interval) < 1e-3:
                continue
            if state.batch is not None:  # never abort a batch in flight: the next check
                dirty.add(key)
                continue
            own = intervals.staggered(choice.interval, key)  # as the runtime's (`intervals.staggered`)
            state.interval, state.since, state.measured = own, now, 0
            state.generation += 1
            result.interval, result.restarts = own, result.restarts + 1
            push(now + options.restart, _TRIGGER, key, state.generation)
            return

    # The loop makes millions of short-lived objects and no reference cycles: Python's cyclic
    # collector, run every 700 allocations over every live object of a large pool, is pure cost
    # here (measured in docs/what-if.md). Paused for the loop, restored after.
    collecting = gc.isenabled()
    gc.disable()
    try:
        while events:
            now, _, kind, key, generation = heapq.heappop(events)
            if now > options.duration:
                break
            handled += 1
            if kind == _CHECK:
                check(now)
                push(now + options.check_every, _CHECK)
                continue
            if kind == _DISPATCH:
                dispatch(now)
                continue
            if kind == _WORKED:
                if generation == shared_generation:
                    worked(now)
                continue
            if kind == _BUSY:  # the JVMs' own threads take another share of the cores from now
                assert shared is not None
                shared.set_cores(now, steady - pool.busy[generation][1])
                share(now)
                continue
            state = states[key]
            if generation != state.generation:
                continue  # a trigger from before a restart
            if kind == _TRIGGER:
                if state.batch is None:
                    trigger(state, now)
            else:
                done(state, now)
    finally:
        if collecting:
            gc.enable()
    return Result(pool, results, decisions, decision_seconds, handled, options)


def size(queries: Sequence[SimQuery], pool: Pool, options: Options, least: int, most: int,
         timer: Callable[[], float] | None = None,
         judged: Collection[str] | None = None,
         on_step: Callable[[int, Result], None] | None = None) -> tuple[int | None, dict[int, Result]]:
    """The smallest executor count in [least, most] whose simulated schedule keeps every SLA
    (of the `judged` queries only, if given) (None: not even `most`), and every simulation made
    on the way (executors -> result); `on_step` hears each as it is made (progress).

    Doubles from `least` until the SLAs hold, then bisects between the last miss and the first
    hold, taking attainment to grow with executors. It does where each executor brings cores of
    its own; on one machine's cores (`Pool.host_cores`) more slots can slow an urgent batch (more
    bulk tasks share the cores beside it), so a count above a hold may miss and the answer is a
    count that holds, the smallest only where attainment does grow."""
    if least < 1 or most < least:
        raise ValueError("the executor range must be 1 <= least <= most")
    runs: dict[int, Result] = {}

    def holds(n: int) -> bool:
        at = pool.scaled(n)
        if at.slots < 1:  # the reserved slots take them all
            return False
        if n not in runs:
            runs[n] = simulate(queries, at, options, timer)
            if on_step is not None:
                on_step(n, runs[n])
        if judged is None:
            return runs[n].kept
        return all(runs[n].queries[key].kept for key in judged)

    low, high = least - 1, least  # low: known (or assumed) to miss; high: next to try
    while not holds(high):
        low = high
        if high >= most:
            return None, runs
        high = min(high * 2, most)
    while high - low > 1:
        mid = (low + high) // 2
        if holds(mid):
            high = mid
        else:
            low = mid
    return high, runs
