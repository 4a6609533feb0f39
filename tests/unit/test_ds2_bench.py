"""`sluice bench ds2`'s figures (pure): the rate-sufficient size from measured busy cores, steps to
reach it and oscillations per phase, and the threshold policy it is compared with."""

from __future__ import annotations

from sluice.bench.ds2 import (
    Options,
    Run,
    Sample,
    Threshold,
    phase_figures,
    reference_sizes,
    schedule,
)

OPTIONS = Options(rates=(100.0, 400.0, 200.0), phase=40.0, tick=5.0, utilization=0.5, warmup=10.0)


def sample(t: float, rate: float, target: int, busy: float) -> Sample:
    return Sample(t, rate, target, target, 0, rate, busy)


def test_the_size_to_reach_comes_from_busy_cores_in_the_settled_half() -> None:
    run = Run("ds2", "under", schedule("under", OPTIONS.rates))
    assert run.schedule == [400.0, 100.0, 200.0]
    # phase 1 (400/s) spans 10..50 s: its settled half 30..50 s measured 1.2 cores; the unsettled
    # first half (2.9 cores) is left out. 1.2 / 0.5 utilization = 2.4 -> 3 executors
    run.samples = [sample(15, 400, 1, 2.9), sample(35, 400, 3, 1.2), sample(45, 400, 3, 1.2),
                   sample(75, 100, 3, 0.3), sample(85, 100, 3, 0.3), sample(115, 200, 2, 0.6), sample(125, 200, 2, 0.6)]
    sizes = reference_sizes([run], OPTIONS)
    assert sizes[400.0] == (3, 1.2) and sizes[100.0] == (1, 0.3) and sizes[200.0] == (2, 0.6)


def test_lumpy_busy_readings_are_averaged_not_their_median() -> None:
    run = Run("ds2", "under", schedule("under", OPTIONS.rates))
    # task metrics arrive as stages complete: behind long batches the settled half reads 0, 0, 2.4
    run.samples = [sample(30, 400, 1, 0.0), sample(35, 400, 1, 0.0), sample(45, 400, 1, 2.4)]
    assert reference_sizes([run], OPTIONS)[400.0] == (2, 0.8)  # 0.8 / 0.5 utilization -> 2 (the median: 1)


def test_steps_and_oscillations_per_phase() -> None:
    run = Run("threshold", "under", [400.0, 100.0, 200.0])
    run.samples = [sample(t, 400 if t < 50 else 100 if t < 90 else 200, 1, 0.0) for t in range(10, 130, 5)]
    # phase 1: 1 -> 2 -> 3 (two steps to 3); phase 2: 3 -> 2 -> 3 -> 1 (reaches 1 at its third
    # step, after two reversals); phase 3: no change, already at... 1, wants 2: not reached
    run.changes = [(15, 1, 2), (25, 2, 3), (55, 3, 2), (60, 2, 3), (70, 3, 1)]
    for s in run.samples:
        s.target = next((to for t, _, to in reversed(run.changes) if t <= s.t), 1)
    sizes = {400.0: (3, 1.2), 100.0: (1, 0.3), 200.0: (2, 0.6)}
    first, second, third = phase_figures(run, sizes, OPTIONS)
    assert (first["steps"], first["oscillations"], first["final"]) == (2, 0, 3)
    assert (second["steps"], second["oscillations"], second["final"]) == (3, 2, 1)
    assert third["steps"] is None and not third["reached"] and third["final"] == 1


def test_the_threshold_policy_moves_one_executor_at_a_time_and_waits_after_a_change() -> None:
    policy = Threshold(utilization=0.5, stabilization=10.0, low=1, high=4)
    assert policy.decide(current=1, busy=0.9, lag=0, now=0.0) == 2  # 90% busy > 60%
    assert policy.decide(current=2, busy=1.9, lag=0, now=5.0) == 2  # within the window
    assert policy.decide(current=2, busy=1.9, lag=0, now=11.0) == 3
    assert policy.decide(current=3, busy=0.3, lag=0, now=30.0) == 2  # 10% busy < 30%
    assert policy.decide(current=2, busy=0.8, lag=0, now=50.0) == 2  # 40% busy: between the thresholds
    assert policy.decide(current=2, busy=0.8, lag=5000, now=60.0) == 3  # the lag grows
