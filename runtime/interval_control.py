"""A query's micro-batch interval: chosen when it starts, reconsidered while it runs.

The rule itself is pure (`sluice.scheduler.intervals`); this module feeds it a hosted query's
measured costs (or, before any, Spark's known floor and the spec's expected rate) and records the
choice on the query. Restarting a query at a new interval is the lifecycle's job (`QueryHost`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from sluice.scheduler import intervals

from .hosted import HostedQuery


class IntervalControl:
    def __init__(self, lock: threading.Lock, clock: Callable[[], float], dwell: float) -> None:
        self.lock = lock
        self.clock = clock
        self.dwell = dwell
        """Seconds a query keeps an SLA-driven interval before it may change (a change restarts it)."""

    def choose(self, hosted: HostedQuery) -> float:
        """The interval to start with: spec.trigger, else the SLA's (pure `intervals.next_interval`)."""
        trigger = hosted.query.spec.trigger
        if trigger is not None:
            choice = intervals.Choice(trigger.interval.seconds, "spec.trigger sets it.")
        else:
            with self.lock:
                costs = costs_of(hosted)
                current = hosted.interval
            choice = (intervals.first(hosted.spec.latency_target, costs, hosted.delay) if current is None
                      else intervals.next_interval(current, hosted.spec.latency_target, costs, hosted.delay))
        self.record(hosted, choice)
        return choice.interval

    def record(self, hosted: HostedQuery, choice: intervals.Choice) -> None:
        with self.lock:
            hosted.interval, hosted.interval_reason = choice.interval, choice.reason
            hosted.interval_since = self.clock()

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
        choice = intervals.next_interval(hosted.interval, hosted.spec.latency_target, costs, hosted.delay)
        if abs(choice.interval - hosted.interval) < 1e-3:
            with self.lock:
                hosted.interval_reason = choice.reason
            return None
        return choice


def costs_of(hosted: HostedQuery) -> intervals.Costs:
    """What the interval rests on: the recent batches' measured costs, or before any, Spark's
    known floor, a cautious cost per row and the spec's expected rate."""
    lag = hosted.recent_lag()
    if lag is None:  # before any batch: what the source is known to do
        lag = intervals.RATE_SOURCE_LAG if hosted.query.spec.source.type == "rate" else 0.0
    found = intervals.measured(hosted.batch_costs(), hosted.input_rate, hosted.recent_gate_wait(),
                               hosted.recent_commit(), lag)
    if found is not None:
        return found
    rate = hosted.input_rate or hosted.query.spec.resources.expectedRate or 0.0
    return intervals.Costs(intervals.FIXED_PRIOR, intervals.PER_ROW_PRIOR, rate, 0.0, intervals.COMMIT_PRIOR, lag)
