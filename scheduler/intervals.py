"""Micro-batch intervals chosen from each query's SLA (pure: measured costs in, an interval out).

Every micro-batch pays a fixed cost (planning, offset and commit logs: ~150 ms here), so a query
with a loose SLA should batch rarely and a tight one often. An event that arrives just after a
batch fixed its offsets waits, in the worst case, for:

    the source's lag  +  the rest of the interval  +  queueing at the gate  +  the next batch
    (fixed + per row x rows)  +  the commit after the action

where the lag is how long after its production a row becomes readable: near 0 on Kafka, up to a
second on Spark's `rate` source, whose offsets move in whole seconds (a 1.5 s SLA filter at a 1 s
interval there measured a p99 of 1.46-1.62 s while the rule without the lag predicted 1.09 s).

and a batch of `interval` seconds holds `rate x interval` rows. For a windowed aggregation,
latency counts from the window's end, and the output waits longer: for the watermark delay, for
the batch that reads an event past it (up to an interval), and then for the next batch, which
emits the window (Spark runs that no-data batch at the next trigger, a second interval: the
density benchmark's windowed queries at a 60 s interval showed p99s of 121 s). The chosen
interval is the largest whose worst case stays within `margin x SLA`:

    interval <= (margin x SLA - held - lag - queueing - fixed - commit) / (waits + per_row x rate)

with waits = 1 and held = 0, or for a windowed aggregation waits = 2 and held = the watermark
delay plus the emitting batch's fixed cost and commit.

It must also keep up: a batch of `interval` seconds must finish within `interval`, or the query
falls behind (interval >= fixed / (1 - per_row x rate)). When no interval does both, the SLA
cannot be kept at this rate on these executors: the interval that keeps up is chosen and the
reason says so.

That worst case rests on a typical batch (the median's fixed cost, the mean wait at the gate), so
a batch slower than typical makes the rows at its interval's start late. The SLA is a share of
rows (`spec.sla.percentile`), so once a query's recent batches are known (`overshoots`: how far
each carried its oldest row past the interval), the interval is also at most the largest whose
predicted share of late rows (`late_share`), beyond those no interval avoids (`avoidable_late`),
stays within `LATE_BUDGET` of what the percentile allows: rows arrive across the interval, so a
batch that overshoots the SLA by `x` makes `x / interval` of its rows late. It reads a query's
own batches: a stall every query feels at once it sees only in part (with 100 queries on 2 cores
it predicted 0.1-0.5% of the critical filters' rows late where 0.4-3.3% were).

Online, `next_interval` adds hysteresis so a query does not flap between intervals (changing one
restarts the query, and its rows wait out the restart): an interval whose worst case has passed
`SHRINK_AT x SLA`, or whose avoidable late rows pass what the percentile allows, shrinks at once,
to the interval whose worst case fits `SHRINK_MARGIN x SLA`
(headroom: shrinking only to the edge left the next measurement a few percent over it, and the
pool's bulk queries restarted every 30-60 s for 2% steps); otherwise the interval moves only
when the new choice differs by more than `band`, and so does one that no interval lets keep its
SLA.
"""

from __future__ import annotations

import statistics
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

from .costs import fit_line, ranked_quantile

MIN_INTERVAL = 0.2
"""Seconds: the smallest trigger that keeps up with Spark's fixed per-batch cost here."""
MAX_INTERVAL = 60.0
"""Seconds: longer batches only delay failure detection and progress reports."""
MARGIN = 0.8
"""Share of the SLA the worst case may use (the rest absorbs noise: ±30% run to run here)."""
FIXED_PRIOR = 0.15
"""Seconds: a batch's fixed cost before any is measured (Spark's stateless floor here, 120-220 ms)."""
PER_ROW_PRIOR = 20e-6
"""Seconds a row before any is measured (cautious: the scheduler's cost prior)."""
COMMIT_PRIOR = 0.05
"""Seconds of offset commit after the action before any is measured (~27 ms here)."""
RATE_SOURCE_LAG = 1.0
"""Seconds a row of Spark's `rate` source may wait to become readable before any batch is
measured: its offsets are whole seconds, so a row is offered once its second has passed."""
LAG_QUANTILE = 0.9
"""The quantile of recent batches' lags taken as the source's lag (the rule is a worst case)."""
START_CAP = 1.0
"""Seconds: a query starts at no more than this or START_SHARE of its SLA, whichever is larger,
before any of its batches is measured (an unknown rate would otherwise look like no load, and a
loose SLA like a license for huge batches)."""
START_SHARE = 0.25
"""Share of the SLA a query may start at: at 1/4 of the SLA, its worst case (interval plus a batch
of that interval's input) stays within the SLA unless its input needs more than 3 cores, which
no interval keeps up with here. Starting every loose-SLA query at START_CAP instead made each
pay a batch a second until measured: 50 queries starting together asked the driver for 50
batches a second."""
SHRINK_AT = 1.0
"""Share of the SLA past which an interval's predicted worst case shrinks it at once. The SLA
itself, not MARGIN: between the two the interval still keeps the SLA, and with 50 queries on 2
cores the critical filters, hovering about MARGIN, restarted up to 6 times in 4 minutes (each
restart a few seconds in which their rows wait)."""
SHRINK_MARGIN = 0.7
"""Share of the SLA an interval shrunk for safety is chosen at (below MARGIN, so it is not unsafe
again at the next measurement's noise)."""
OVERSHOOTS = 200
"""Recent batches' overshoots kept per query (`Costs.overshoots`): about 5 minutes of a 2 s SLA's
batches, enough to see a 1% tail, and slow to move, so a slow batch or two does not flap the
interval."""
STAGGER = 0.05
"""Share of an interval a query's own stagger may take off it (`staggered`)."""
LATE_BUDGET = 0.5
"""Share of the late rows the SLA's percentile allows that an interval may be predicted to make
late from its recent batches' overshoots (the rest absorbs what those batches did not show)."""
BUSY_CEILING = 0.85
"""Share of the machine's cores a shrink's added batches may fill. A shorter interval only pays
where a core is free to run its extra batches; on a crowded machine they join the queue every
query's batches wait in: at 200 queries on 2 cores (97-98% busy) the critical filters' late-row
rule took them from 1.37 s to 0.39-1.1 s (half again as many batches a second), the pool ran
28-30 batches a second, and the 30 s bulk filters' p99 rose to 37-40 s at 22-23 s intervals. At
100 queries the machine was 56-58% busy. A judgment from those runs, not a fitted figure. Under
it the room is counted in cores (`Machine.spare`), each shrink taking its added batches' CPU out of
it: at 82% busy (0.06 cores under the ceiling, 47 ms of CPU a batch) critical filters shrank one
after another from 1.37 s to 0.48-0.77 s, each taking 0.04-0.06 cores, where one would have fitted."""
BAND = 0.25
"""Hysteresis: a safe interval changes only for a choice more than 25% away."""
PER_ROW_MAX = 1e-3
"""Seconds: the most a row is taken to cost while batch sizes cannot tell fixed from per-row
cost (50x the prior; a filter costs a few µs a row here). Past it the rest is fixed: with 50
queries on 2 cores, a critical filter's 10-row batches took 0.6-1 s, all of it contention, and
read as 63 ms a row that cost looked like 0.63 cores of work per second of input: its interval
shrank to 409 ms, which only added batches."""


@dataclass(frozen=True, slots=True)
class Costs:
    """What is known about one query's batches (seconds, rows per second)."""

    fixed: float
    """The part of a batch's time that does not grow with its rows."""
    per_row: float
    """Seconds per input row."""
    rate: float
    """Input rows per second."""
    queueing: float = 0.0
    """Expected wait for a grant at the gate."""
    commit: float = 0.0
    """What follows the action on the batch's critical path (offset commit)."""
    lag: float = 0.0
    """Seconds from a row's production until a batch can read it, at worst: a high quantile of
    recent batches' (`lag_of`)."""
    overshoots: tuple[float, ...] = ()
    """Recent batches' seconds past the interval for their oldest row, each as it came (its source
    lag, a late predecessor's overrun, and its trigger time up to the sink's write: offsets,
    planning, the gate, the action); `late_share` reads them once there are `SPREAD_BATCHES`."""


@dataclass(frozen=True, slots=True)
class Choice:
    interval: float
    """Seconds between micro-batch starts."""
    reason: str
    """One sentence: why this interval."""
    keeps_sla: bool = True


def lag_of(trigger: float, oldest: float | None, interval: float, overrun: float = 0.0) -> float | None:
    """A batch's source lag: its oldest row's age at the batch's trigger beyond the interval, what
    the worst case's `interval` term leaves out (None: not known). On Kafka the oldest row came
    just after the previous batch's offsets (about 0); on a `rate` source it waited for its second
    to pass (up to a second more, however often the query triggers: Spark runs no batch while no
    second is complete). Not counted: `overrun`, the seconds its predecessor ran past the interval
    (a batch that cannot keep up, as a cold start's first ones; the keep-up floor's business); nor
    a source's gap in production (its rows were late for no one)."""
    return None if oldest is None else max(trigger - oldest - interval - max(overrun, 0.0), 0.0)


def source_lag(lags: Sequence[float]) -> float | None:
    """The lag the rule takes from recent batches' (`LAG_QUANTILE`, nearest rank); None: none."""
    return ranked_quantile(sorted(lags), LAG_QUANTILE) if lags else None


def measured(batches: Sequence[tuple[int, float]], rate: float, queueing: float = 0.0, commit: float = 0.0,
             lag: float = 0.0) -> Costs | None:
    """Costs from a query's recent batches ((input rows, seconds) each); None before 3 batches.

    While every batch has about the same size, fixed and per-row cost cannot be told apart. The
    split then leans to the cautious side, as the scheduler's cost model does: at most Spark's
    floor (`FIXED_PRIOR`) of the median batch is fixed, the rest grows with the rows (up to
    `PER_ROW_MAX` a row, then fixed again), so a longer interval is predicted to cost more.
    Batches of 3x another size give the line (`costs.fit_line`), its slope also at most
    `PER_ROW_MAX`: in a pool out of CPU a batch that started late holds more rows and runs slower,
    for the same reason, and the line through such batches is steep (a 2 s critical filter of 27
    rows/s at 200 queries on 2 cores fitted 5.4 ms a row and shrank its interval to 1.15 s)."""
    if len(batches) < 3:
        return None
    line = fit_line(list(batches))
    rows = statistics.median(r for r, _ in batches)
    if line is not None:
        fixed, per_row = line
        if per_row > PER_ROW_MAX:  # contention, not work: the rest is fixed at the median batch
            fixed, per_row = fixed + (per_row - PER_ROW_MAX) * rows, PER_ROW_MAX
        return Costs(fixed, per_row, rate, queueing, commit, lag)
    cost = statistics.median(c for _, c in batches)
    if rows <= 0:
        return Costs(cost, 0.0, rate, queueing, commit, lag)
    per_row = min((cost - min(cost, FIXED_PRIOR)) / rows, PER_ROW_MAX)
    return Costs(cost - per_row * rows, per_row, rate, queueing, commit, lag)


SPREAD_BATCHES = 8
"""The fewest batches whose costs' variation (`spread`) is taken as known."""


def spread(batches: Sequence[tuple[int, float]], costs: Costs) -> float | None:
    """How much the batches' costs vary beyond what their rows explain: the 90th percentile of
    cost over `costs`' fitted cost of its rows, over their median (nearest ranks), at least 1;
    None below `SPREAD_BATCHES` batches or without a cost to divide by."""
    ratios = sorted(c / fitted for r, c in batches if (fitted := costs.fixed + costs.per_row * r) > 0)
    if len(ratios) < SPREAD_BATCHES:
        return None
    median = ranked_quantile(ratios, 0.5)
    return max(ranked_quantile(ratios, 0.9) / median, 1.0) if median > 0 else None


def late_share(interval: float, sla: float, costs: Costs) -> float | None:
    """The share of a not windowed query's rows predicted late at `interval` from its recent
    batches' `overshoots` (pure): rows are read evenly over the interval, so a batch whose oldest
    row would wait `interval + overshoot` makes the first `interval + overshoot - sla` seconds of
    its rows late. None below `SPREAD_BATCHES` overshoots. The overshoots are taken as measured,
    whatever the interval: a shorter one holds fewer rows, so the share is if anything high."""
    if len(costs.overshoots) < SPREAD_BATCHES or interval <= 0:
        return None
    return sum(min(max(interval + over - sla, 0.0) / interval, 1.0) for over in costs.overshoots) / len(costs.overshoots)


def avoidable_late(interval: float, sla: float, costs: Costs) -> float | None:
    """The share of rows `late_share` predicts at `interval` beyond what it predicts at the least
    interval that keeps up (pure): late rows a shorter interval could avoid. A batch that
    overshoots the SLA at any interval (a stall every query feels, a pool out of CPU) is not the
    interval's to absorb: at 200 queries on 2 cores, chasing such rows shrank critical filters to
    200-670 ms in a pool already out of CPU. None: `late_share` knows too little."""
    late, least = late_share(interval, sla, costs), late_share(_floor(costs), sla, costs)
    return None if late is None or least is None else max(late - least, 0.0)


def _floor(costs: Costs) -> float:
    """The least interval that keeps up (MIN_INTERVAL at least)."""
    load = costs.per_row * costs.rate
    return MIN_INTERVAL if load >= 1 else max(MIN_INTERVAL, costs.fixed / (1 - load))


def _within_late_budget(chosen: Choice, sla: float, costs: Costs, allowed: float) -> Choice:
    """`chosen`, or the largest interval down to the floor whose avoidable late rows
    (`avoidable_late`) stay within `LATE_BUDGET x allowed` (bisection: they grow with the interval)."""
    budget = LATE_BUDGET * allowed
    floor = min(_floor(costs), chosen.interval)
    least = late_share(floor, sla, costs)
    if least is None:
        return chosen

    def avoidable_at(interval: float) -> float:  # `avoidable_late`, the floor's share read once
        return max((late_share(interval, sla, costs) or 0.0) - least, 0.0)

    avoidable = avoidable_at(chosen.interval)
    if avoidable <= budget:
        late = late_share(chosen.interval, sla, costs) or 0.0
        return chosen if late <= allowed else Choice(
            chosen.interval, f"its recent batches' times make {late:.2%} of rows late at any interval (the "
                             f"{sla * 1000:.0f} ms SLA allows {allowed:.1%}): keeping the {chosen.interval * 1000:.0f} ms "
                             "a typical batch allows, as a shorter one would only add batches.", False)
    low, high = floor, chosen.interval
    for _ in range(30):
        middle = (low + high) / 2
        if avoidable_at(middle) <= budget:
            low = middle
        else:
            high = middle
    late = late_share(low, sla, costs) or 0.0
    return Choice(low, f"the largest interval at which its recent batches' times make at most {budget:.2%} of rows "
                       f"late that a shorter one would not (the {sla * 1000:.0f} ms SLA allows {allowed:.1%}; "
                       f"{late:.2%} predicted here, {avoidable:.2%} more at the {chosen.interval * 1000:.0f} ms a "
                       "typical batch allows).", late <= allowed)


def staggered(interval: float, key: str) -> float:
    """`interval` made the query's own (pure): shortened by up to `STAGGER` of it, by a stable hash
    of its `key`, not below MIN_INTERVAL. Spark fires a processing-time trigger at the multiples of
    its interval on the epoch's clock, so queries of one interval trigger together: with 100
    queries on 2 cores the density benchmark's 30 windowed aggregations, all at MAX_INTERVAL,
    started their batches in the same instant each minute, and every critical filter's batch
    then ran past its 2 s SLA at once. Shorter keeps the SLA; distinct intervals put the
    queries' triggers at unrelated phases."""
    share = zlib.crc32(key.encode()) / 2**32
    return max(interval * (1 - STAGGER * share), min(interval, MIN_INTERVAL))


def first(sla: float, costs: Costs, delay: float | None = None) -> Choice:
    """The interval a query starts with, before its batches are measured: `choose`, at most the
    larger of START_CAP and START_SHARE of the SLA."""
    choice = choose(sla, costs, delay)
    cap = max(START_CAP, START_SHARE * sla)
    if choice.interval <= cap:
        return choice
    return Choice(cap, f"{cap * 1000:.0f} ms until its batches are measured: the SLA alone would allow "
                       f"{choice.interval * 1000:.0f} ms, but the rate and the cost of a batch are not known yet.")


def seeded(sla: float, costs: Costs, delay: float | None, twin: str, current: float | None,
           percentile: float = 99.0) -> Choice:
    """The interval a query starts with when `twin`, a running query of the same pipeline (its
    literals aside), has measured costs: the twin's own next choice from them (`next_interval`
    against the `current` interval it runs at; None: the twin's SLA is another, so the choice
    from its costs alone), without the start cap (the cap stands in for costs not known yet). Started at the cap, a pool's new bulk queries each restarted once their batches were
    measured (a stop and a cold start each: 40-42 restarts in the density benchmark's step from 50
    to 100 queries); started at the twin's unhysteresised choice, new critical filters ran at
    1.47 s where their twins, shrunk under load, ran at 1.23-1.28 s. The new query's own rate may
    differ: its own batches correct the interval after the dwell. Tenants' copies of a pipeline
    differ in their literals (a threshold, a key, a window), which leave a batch's cost alone: with
    twins only of the same literals, 31 of the density benchmark's 180 new bulk queries at 200 were
    still at the cap (a third of the interval they needed) when its window closed, their restarts
    queued one a lifecycle check behind the rest."""
    choice = next_interval(current, sla, costs, delay, percentile=percentile)
    how = f"as {twin} runs (the same pipeline, literals aside)" if current is not None else \
        f"from {twin}'s batches (the same pipeline, literals aside, another SLA)"
    return Choice(choice.interval, f"{how}: {choice.reason}", choice.keeps_sla)


def _waits(costs: Costs, delay: float | None) -> tuple[int, float]:
    """(intervals an output waits at worst, seconds it is held besides): a windowed aggregation
    (`delay` its watermark delay) waits for the watermark, the batch that moves it and the next
    one, which emits the window."""
    if delay is None:
        return 1, 0.0
    return 2, delay + costs.fixed + costs.commit


def worst_case(interval: float, costs: Costs, delay: float | None = None) -> float:
    """The worst latency of an output row at this interval (seconds); `delay`: a windowed
    aggregation's watermark delay (None: not windowed)."""
    waits, held = _waits(costs, delay)
    batch = costs.fixed + costs.per_row * costs.rate * interval
    return waits * interval + held + costs.lag + costs.queueing + batch + costs.commit


def choose(sla: float, costs: Costs, delay: float | None = None, margin: float = MARGIN,
           percentile: float = 99.0) -> Choice:
    """The largest interval whose worst case stays within `margin x sla` and, for a query not
    windowed, whose avoidable late rows (`avoidable_late`) stay within `LATE_BUDGET` of what the
    `percentile` allows; `delay`: a windowed aggregation's watermark delay (None: not windowed)."""
    if sla <= 0:
        raise ValueError("the SLA must be above zero")
    load = costs.per_row * costs.rate  # seconds of work per second of input
    waits, held = _waits(costs, delay)
    budget = margin * sla - held - costs.lag - costs.queueing - costs.fixed - costs.commit
    largest = budget / (waits + load)
    if load >= 1:
        return Choice(MIN_INTERVAL, f"the input ({costs.rate:.0f} rows/s) needs {load:.1f} cores' worth of batch time "
                                    "per second; no interval keeps up, so batching as often as Spark can.", False)
    floor = _floor(costs)  # the least interval that keeps up
    if largest < floor:
        readable = "" if costs.lag <= 0 else f", and a row is readable up to {costs.lag * 1000:.0f} ms after it is produced"
        return Choice(min(floor, MAX_INTERVAL),
                      f"no interval keeps the worst case within {margin:.0%} of the {sla * 1000:.0f} ms SLA at "
                      f"{costs.rate:.0f} rows/s: a batch costs {costs.fixed * 1000:.0f} ms plus "
                      f"{costs.per_row * 1e6:.1f} µs a row{readable}, so batching every {floor * 1000:.0f} ms, "
                      "the least that keeps up.", False)
    chosen = min(largest, MAX_INTERVAL)
    typical = Choice(chosen, f"the largest interval whose worst case ({'' if costs.lag <= 0 else f'the source lag of {costs.lag * 1000:.0f} ms + '}interval + queueing + a batch of "
                          f"{costs.fixed * 1000:.0f} ms + {costs.per_row * 1e6:.1f} µs a row at {costs.rate:.0f} rows/s "
                          f"+ commit{'' if delay is None else ', twice: the watermark, then the window'}) stays "
                          f"within {margin:.0%} of the "
                          f"{sla * 1000:.0f} ms SLA.")
    if delay is not None:
        return typical
    return _within_late_budget(typical, sla, costs, 1 - percentile / 100)


@dataclass(frozen=True, slots=True)
class Machine:
    """How busy the machine the pool runs on is, for `next_interval` (data in: read elsewhere)."""

    busy: float
    """Share of its cores busy lately (the last minute)."""
    cores: int
    batch_cpu: float
    """CPU seconds a micro-batch costs the pool (measured, or `execution.BATCH_CPU_PRIOR`)."""
    granted: float = 0.0
    """Cores of batches that shrinks granted lately added, which `busy` does not show yet."""

    def spare(self) -> float:
        """Cores free under `BUSY_CEILING`, after what shrinks granted lately added."""
        return (BUSY_CEILING - self.busy) * self.cores - self.granted


def added_cores(current: float, interval: float, batch_cpu: float) -> float:
    """The cores a query's batches take more at `interval` than at `current` (negative: fewer)."""
    return batch_cpu * (1 / interval - 1 / current)


def next_interval(current: float | None, sla: float, costs: Costs, delay: float | None = None,
                  band: float = BAND, percentile: float = 99.0, machine: Machine | None = None) -> Choice:
    """`choose`, with hysteresis against the interval in force (None: the first choice); `machine`:
    how busy the cores are (None: not known), a shrink only where its added batches fit under
    `BUSY_CEILING` (`Machine.spare`)."""
    choice = choose(sla, costs, delay, percentile=percentile)
    if current is None:
        return choice
    found = _hysteresis(choice, current, sla, costs, delay, band, percentile)
    if machine is None or found.interval >= current - 1e-3:
        return found
    added, spare = added_cores(current, found.interval, machine.batch_cpu), machine.spare()
    if added <= spare:
        return found
    return Choice(current, f"keeping {current * 1000:.0f} ms: a shorter interval's batches would take "
                           f"{added:.3f} more cores, and the machine ({machine.busy:.0%} busy) has {max(spare, 0.0):.3f} "
                           f"under its {BUSY_CEILING:.0%} ceiling, where they would wait behind every query's "
                           f"(its rule asks for {found.interval * 1000:.0f} ms).",
                  found.keeps_sla and worst_case(current, costs, delay) <= sla)


def _hysteresis(choice: Choice, current: float, sla: float, costs: Costs, delay: float | None, band: float,
                percentile: float) -> Choice:
    """`choice` against the interval in force: far enough to move, or needed for safety."""
    far = abs(choice.interval - current) > band * current
    if not choice.keeps_sla:  # the interval that keeps up: move only if far from it (a query a
        # little behind it batches back to back, which Spark does by itself; at N=50 the estimate's
        # noise restarted critical filters for 710 -> 712 ms)
        return choice if far else Choice(current, choice.reason, False)
    avoidable = avoidable_late(current, sla, costs) if delay is None else None
    if worst_case(current, costs, delay) > SHRINK_AT * sla or (avoidable is not None and avoidable > 1 - percentile / 100):
        roomy = choose(sla, costs, delay, SHRINK_MARGIN, percentile)
        return roomy if roomy.keeps_sla else choice
    if not far:
        return Choice(current, f"keeping {current * 1000:.0f} ms: it still fits the {sla * 1000:.0f} ms SLA and the "
                               f"best choice ({choice.interval * 1000:.0f} ms) is within {band:.0%} of it.")
    return choice
