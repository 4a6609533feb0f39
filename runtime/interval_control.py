"""A query's micro-batch interval: chosen when it starts, reconsidered while it runs.

The rule itself is pure (`sluice.scheduler.intervals`); this module feeds it a hosted query's
measured costs (or, before any, Spark's known floor and the spec's expected rate) and records the
choice on the query. A query with a running twin (the same pipeline, literals aside) whose costs
are measured starts where that twin's costs put it (`twin_of`). Restarting a query at a new interval is the
lifecycle's job (`QueryHost`).
"""

from __future__ import annotations

import dataclasses
import threading
from collections import deque
from collections.abc import Callable, Iterable

from sluice.scheduler import intervals

from .batch_budget import BatchMeter
from .hosted import HostedQuery
from .pipeline import cost_shape


class IntervalControl:
    def __init__(self, lock: threading.Lock, clock: Callable[[], float], dwell: float,
                 meter: BatchMeter | None = None) -> None:
        self.lock = lock
        self.clock = clock
        self.dwell = dwell
        """Seconds a query keeps an SLA-driven interval before it may change (a change restarts it)."""
        self.meter = meter
        """The machine's busy share and a batch's CPU (None: not known): a shrink only where its
        added batches fit under `intervals.BUSY_CEILING`."""
        self.granted: deque[tuple[float, float]] = deque()
        """(when, cores added) of each shrink recorded within the meter's window, which its busy
        share shows only in part: counted whole until the window has passed."""

    def machine(self) -> intervals.Machine | None:
        """How busy the machine is for the rule (None: not known yet)."""
        busy = None if self.meter is None else self.meter.busy_share()
        if self.meter is None or busy is None:
            return None
        now = self.clock()
        with self.lock:
            while self.granted and self.granted[0][0] <= now - self.meter.window:
                self.granted.popleft()
            granted = sum(cores for _, cores in self.granted)
        return intervals.Machine(busy, self.meter.cores, self.meter.batch_cpu()[0], granted)

    def choose(self, hosted: HostedQuery, others: Iterable[HostedQuery] = ()) -> float:
        """The interval to start with (`plan`), recorded on the query."""
        choice = self.plan(hosted, others)
        self.record(hosted, choice)
        return choice.interval

    def plan(self, hosted: HostedQuery, others: Iterable[HostedQuery] = ()) -> intervals.Choice:
        """The interval to start with: spec.trigger, else the SLA's (pure `intervals.next_interval`);
        before its own batches are measured, a twin's among `others` (`twin_of`), else the start cap."""
        trigger = hosted.query.spec.trigger
        if trigger is not None:
            return intervals.Choice(trigger.interval.seconds, "spec.trigger sets it.")
        sla, delay = hosted.spec.latency_target, hosted.delay
        with self.lock:
            costs = costs_of(hosted)
            current = hosted.interval
            twin = twin_of(hosted, others) if current is None and measured_costs(hosted) is None else None
        percentile = hosted.query.spec.sla.percentile
        if current is not None:
            kept = intervals.next_interval(current, sla, costs, delay, percentile=percentile, machine=self.machine())
            return kept if abs(kept.interval - current) < 1e-3 else _own(hosted, kept)
        if twin is not None:
            same_sla = abs(twin.sla - sla) < 1e-9
            return _own(hosted, intervals.seeded(sla, twin.costs, delay, twin.key, twin.interval if same_sla else None,
                                                 percentile))
        return _own(hosted, intervals.first(sla, costs, delay))

    def record(self, hosted: HostedQuery, choice: intervals.Choice) -> None:
        """`choice` as the query's interval; a shorter one than it ran at takes its added batches'
        cores out of the machine's room (`granted`)."""
        now = self.clock()
        with self.lock:
            before = hosted.interval
            if before is not None and self.meter is not None and choice.interval < before:
                self.granted.append((now, intervals.added_cores(before, choice.interval, self.meter.batch_cpu()[0])))
            hosted.interval, hosted.interval_reason = choice.interval, choice.reason
            hosted.interval_since = now

    def due(self, hosted: HostedQuery) -> intervals.Choice | None:
        """A new interval for a running query whose SLA-driven interval should change (rarely:
        hysteresis and a dwell), or None to keep it."""
        if hosted.query.spec.trigger is not None or hosted.phase != "Running" or hosted.interval is None \
                or hosted.execution == "realTime":
            return None
        if self.clock() - hosted.interval_since < self.dwell:
            return None
        with self.lock:
            if len(hosted.batch_costs(since=hosted.interval_since)) < 3:
                return None  # too little measured at this interval
            costs = costs_of(hosted)
        choice = intervals.next_interval(hosted.interval, hosted.spec.latency_target, costs, hosted.delay,
                                         percentile=hosted.query.spec.sla.percentile, machine=self.machine())
        if abs(choice.interval - hosted.interval) < 1e-3:
            with self.lock:
                hosted.interval_reason = choice.reason
            return None
        return _own(hosted, choice)


def _own(hosted: HostedQuery, choice: intervals.Choice) -> intervals.Choice:
    """A new choice as the query's own interval (`intervals.staggered`): queries of one interval
    would trigger together."""
    return dataclasses.replace(choice, interval=intervals.staggered(choice.interval, hosted.query.key))


def _lag(hosted: HostedQuery) -> float:
    lag = hosted.recent_lag()
    if lag is None:  # before any batch: what the source is known to do
        lag = intervals.RATE_SOURCE_LAG if hosted.query.spec.source.type == "rate" else 0.0
    return lag


def measured_costs(hosted: HostedQuery) -> intervals.Costs | None:
    """The recent batches' measured costs (`intervals.measured`) with their overshoots; None before
    3 batches with rows."""
    found = intervals.measured(hosted.batch_costs(), hosted.input_rate, hosted.recent_gate_wait(),
                               hosted.recent_commit(), _lag(hosted))
    return None if found is None else dataclasses.replace(found, overshoots=tuple(hosted.overshoots))


def costs_of(hosted: HostedQuery) -> intervals.Costs:
    """What the interval rests on: the recent batches' measured costs, or before any, Spark's
    known floor, a cautious cost per row and the spec's expected rate."""
    found = measured_costs(hosted)
    if found is not None:
        return found
    rate = hosted.input_rate or hosted.query.spec.resources.expectedRate or 0.0
    return intervals.Costs(intervals.FIXED_PRIOR, intervals.PER_ROW_PRIOR, rate, 0.0, intervals.COMMIT_PRIOR,
                           _lag(hosted))


def twin_key(hosted: HostedQuery) -> str:
    """What makes two queries twins for the interval rule: their batches' cost (`cost_shape`: the
    source's kind and columns, the steps without their literals, the shuffle partitions). Each
    keeps its own SLA and watermark delay."""
    return cost_shape(hosted.query)


@dataclasses.dataclass(frozen=True)
class Twin:
    key: str
    interval: float
    """The interval it runs at."""
    sla: float
    """Its SLA's latency target, seconds."""
    costs: intervals.Costs
    """Its measured costs (the rate raised to the new query's expected rate where that is higher)."""


def twin_of(hosted: HostedQuery, others: Iterable[HostedQuery]) -> Twin | None:
    """The running micro-batch twin of `hosted` (`twin_key`), one of its SLA first, with the most
    measured batches; None if no twin has any. The caller holds the lock."""
    key, sla = twin_key(hosted), hosted.spec.latency_target
    found = [((other.spec.latency_target == sla, len(other.batch_costs())),
              Twin(other.query.key, other.interval, other.spec.latency_target, costs)) for other in others
             if other is not hosted and other.phase == "Running" and other.execution == "microBatch"
             and other.interval is not None and twin_key(other) == key
             and (costs := measured_costs(other)) is not None]
    if not found:
        return None
    twin = max(found, key=lambda pair: pair[0])[1]
    expected = hosted.query.spec.resources.expectedRate or 0.0
    return twin if expected <= twin.costs.rate else dataclasses.replace(
        twin, costs=dataclasses.replace(twin.costs, rate=expected))
