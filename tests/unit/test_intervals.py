"""SLA-driven micro-batch intervals (pure), with hand-computed cases."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sluice.scheduler.intervals import (
    MAX_INTERVAL,
    MIN_INTERVAL,
    STAGGER,
    Costs,
    avoidable_late,
    choose,
    lag_of,
    late_share,
    measured,
    next_interval,
    source_lag,
    spread,
    staggered,
    worst_case,
)

FILTER = Costs(fixed=0.15, per_row=0.0, rate=1000, commit=0.03)


def test_the_interval_is_the_largest_whose_worst_case_fits_the_budget() -> None:
    # 2 s SLA: budget 0.8 x 2 - 0.15 - 0.03 = 1.42 s, no per-row cost
    assert choose(2.0, FILTER).interval == pytest.approx(1.42)
    # 20 us a row at 1,000 rows/s: every second of interval adds 0.02 s of batch: 1.42 / 1.02
    assert choose(2.0, Costs(0.15, 20e-6, 1000, commit=0.03)).interval == pytest.approx(1.42 / 1.02)
    # queueing at the gate comes out of the budget too
    assert choose(2.0, Costs(0.15, 0.0, 1000, queueing=0.2, commit=0.03)).interval == pytest.approx(1.22)


def test_the_source_s_lag_comes_out_of_the_budget_and_into_the_worst_case() -> None:
    # the held-out filter: 1.5 s SLA, 2,000 rows/s on a `rate` source, batches of 79 ms
    # and an 8 ms commit, rows readable 0.45 s after their production (the 1 s interval's phase)
    rate_filter = Costs(0.079, 0.0, 2000, commit=0.008)
    assert worst_case(1.0, rate_filter) == pytest.approx(1.087)  # what the rule saw: within 1.2 s
    lagged = Costs(0.079, 0.0, 2000, commit=0.008, lag=0.45)
    assert worst_case(1.0, lagged) == pytest.approx(1.537)  # past the SLA, as measured (p99 1.46-1.62 s)
    # budget 0.8 x 1.5 - 0.45 - 0.079 - 0.008 = 0.663 s
    assert choose(1.5, lagged).interval == pytest.approx(0.663) and "source lag of 450 ms" in choose(1.5, lagged).reason
    # at a shrink past the SLA, 0.7 x 1.5 - 0.537 = 0.513 s
    assert next_interval(1.0, 1.5, lagged).interval == pytest.approx(0.513)
    # a whole second of lag leaves 0.113 s, below the 0.2 s floor: it says so, and batches at the floor
    whole = choose(1.5, Costs(0.079, 0.0, 2000, commit=0.008, lag=1.0))
    assert whole.interval == MIN_INTERVAL and not whole.keeps_sla
    assert "readable up to 1000 ms after it is produced" in whole.reason


def test_a_batch_s_lag_is_its_oldest_row_s_age_beyond_the_interval_and_the_rule_takes_a_high_quantile() -> None:
    # a rate source at a 0.2 s interval: the batch triggered at 101.15 s reads the second [100, 101)
    assert lag_of(101.15, 100.0, 0.2) == pytest.approx(0.95)
    # Kafka: the oldest row came just after the previous trigger, 0.2 s before this one
    assert lag_of(101.15, 100.96, 0.2) == 0.0
    # a sparse source: nothing produced for a while, then a row 0.05 s before the trigger (a gap is no lag)
    assert lag_of(101.15, 101.1, 1.0) == 0.0
    assert lag_of(100.0, None, 1.0) is None
    # a cold start: the previous batch took 3 s at a 1 s interval, so this one's oldest row is 3 s
    # old at its trigger; the 2 s overrun is no lag of the source
    assert lag_of(103.0, 100.0, 1.0, overrun=2.0) == 0.0
    assert lag_of(103.5, 100.0, 1.0, overrun=2.0) == pytest.approx(0.5)
    assert source_lag([]) is None
    # nearest rank of the 90th percentile of 11 lags: index 9
    assert source_lag([0.1 * i for i in range(10, -1, -1)]) == pytest.approx(0.9)
    costs = measured([(100, 0.2)] * 3, 100.0, 0.0, 0.01, lag=0.3)
    assert costs is not None and costs.lag == 0.3


def test_the_spread_is_the_90th_percentile_of_cost_over_the_fit_over_the_median() -> None:
    line = Costs(0.1, 1e-3, 100)  # a batch of r rows is fitted at 0.1 + 0.001 r s
    # ten batches of 100 rows (0.2 s fitted), costing 0.2 s x 1.0, 1.0, 1.1, ..., 1.5, 2.0, 3.0
    factors = [1.0, 1.0, 1.1, 1.1, 1.2, 1.2, 1.3, 1.5, 2.0, 3.0]
    batches = [(100, 0.2 * f) for f in factors]
    # nearest ranks of 10: the median is index 4 (x1.2), the 90th percentile index 8 (x2.0)
    assert spread(batches, line) == pytest.approx(2.0 / 1.2)
    # a batch of more rows that costs what its rows say adds no spread: 1,000 rows fitted at 1.1 s
    assert spread([(1000, 1.1)] * 4 + [(100, 0.2)] * 4, line) == pytest.approx(1.0)
    assert spread(batches[:7], line) is None  # too few batches to say


def test_a_loose_sla_batches_rarely_and_a_tight_one_often() -> None:
    loose, tight = choose(60.0, FILTER), choose(0.5, FILTER)
    assert loose.interval == pytest.approx(47.82) and loose.keeps_sla
    assert tight.interval == pytest.approx(0.22) and tight.keeps_sla  # 0.4 - 0.18
    assert choose(600.0, FILTER).interval == MAX_INTERVAL


def test_a_windowed_aggregation_spends_its_watermark_delay_and_waits_two_intervals() -> None:
    # 10 s SLA, 2 s watermark; the batch past the watermark, then the one that emits the window:
    # (8 - 2 - 0.18 (the emitting batch) - 0.18) / 2 = 2.82 s
    windowed = choose(10.0, FILTER, delay=2.0)
    assert windowed.interval == pytest.approx(2.82) and "twice" in windowed.reason
    assert worst_case(2.82, FILTER, delay=2.0) == pytest.approx(8.0)  # 2 x 2.82 + 2 + 0.18 + 0.18
    # a zero watermark delay is still a window (None is a query with no window)
    assert choose(10.0, FILTER, delay=0.0).interval == pytest.approx(3.82)
    # the density benchmark's window (5 s watermark, 2 min SLA, a 60 s interval): its worst case,
    # 125.36 s, is past the SLA, as measured (p99 121 s); the choice is 45.32 s
    assert worst_case(60.0, FILTER, delay=5.0) > 120.0
    assert choose(120.0, FILTER, delay=5.0).interval == pytest.approx((96 - 5 - 0.18 - 0.18) / 2)


def test_an_sla_no_interval_can_keep_says_so_and_keeps_up() -> None:
    impossible = choose(0.3, FILTER)  # budget 0.24 - 0.18 = 0.06 s < the 0.2 s floor
    assert impossible.interval == MIN_INTERVAL and not impossible.keeps_sla
    assert "no interval keeps the worst case within 80% of the 300 ms SLA" in impossible.reason
    heavy = choose(0.5, Costs(0.5, 0.0, 10, commit=0.0))  # a 0.5 s batch needs at least 0.5 s between starts
    assert heavy.interval == pytest.approx(0.5) and not heavy.keeps_sla
    overloaded = choose(5.0, Costs(0.1, 1e-3, 2000))  # 2 s of work per second of input
    assert overloaded.interval == MIN_INTERVAL and not overloaded.keeps_sla and "no interval keeps up" in overloaded.reason


def test_hysteresis_keeps_a_safe_interval_and_fixes_an_unsafe_one_at_once() -> None:
    costs = Costs(0.15, 20e-6, 1000, commit=0.03)  # best: 1.392 s
    assert next_interval(None, 2.0, costs).interval == pytest.approx(1.392, abs=1e-3)
    kept = next_interval(1.3, 2.0, costs)  # worst case 1.506 s <= 1.6, and within 25%
    assert kept.interval == 1.3 and "keeping 1300 ms" in kept.reason
    assert next_interval(0.5, 2.0, costs).interval == pytest.approx(1.392, abs=1e-3)  # safe but far: move
    # past the 80% margin (worst case 1.71 s) but within the SLA: kept, no restart
    assert worst_case(1.5, costs) == pytest.approx(1.71) and next_interval(1.5, 2.0, costs).interval == 1.5
    # past the SLA itself (1.9 + 0.15 + 0.038 + 0.03 = 2.118 s), though within 25%: shrinks at once,
    # with headroom, to the worst case at 70% of the SLA ((0.7 x 2.0 - 0.15 - 0.03) / 1.02 = 1.196 s)
    assert worst_case(1.9, costs) == pytest.approx(2.118)
    shrunk = next_interval(1.9, 2.0, costs)
    assert shrunk.interval == pytest.approx(1.196, abs=1e-3) and "70%" in shrunk.reason
    # and stays there when the next measurement is a little worse
    worse = Costs(0.16, 21e-6, 1000, commit=0.035)
    assert next_interval(shrunk.interval, 2.0, worse).interval == shrunk.interval
    assert next_interval(1.392, 2.0, worse).interval == 1.392  # 1.616 s: past 80%, within the SLA


def test_a_shrink_moves_only_where_its_added_batches_fit_under_the_machine_s_ceiling() -> None:
    """A shorter interval's extra batches only queue where no core is free to run them."""
    from sluice.scheduler.intervals import BUSY_CEILING, Machine, added_cores

    costs = Costs(0.15, 20e-6, 1000, commit=0.03)  # best: 1.392 s
    # 1.9 s -> 1.196 s at 47 ms of CPU a batch adds 0.047 x (1/1.196 - 1/1.9) = 0.01456 cores
    assert added_cores(1.9, 1.196, 0.047) == pytest.approx(0.01456, abs=1e-4)
    roomy = Machine(busy=0.80, cores=2, batch_cpu=0.047)  # (0.85 - 0.80) x 2 = 0.1 cores spare
    assert roomy.spare() == pytest.approx(0.1)
    assert next_interval(1.9, 2.0, costs, machine=roomy).interval == pytest.approx(1.196, abs=1e-3)
    # the same machine after shrinks granted lately took 0.09 of its 0.1 cores: kept, and its
    # worst case (2.118 s) misses the SLA
    held = next_interval(1.9, 2.0, costs, machine=Machine(0.80, 2, 0.047, granted=0.09))
    assert held.interval == 1.9 and not held.keeps_sla
    assert held.reason == ("keeping 1900 ms: a shorter interval's batches would take 0.015 more cores, and the machine "
                           "(80% busy) has 0.010 under its 85% ceiling, where they would wait behind every query's "
                           "(its rule asks for 1196 ms).")
    # past the ceiling nothing shrinks, however cheap its batches
    crowded = Machine(busy=0.97, cores=2, batch_cpu=0.001)
    assert next_interval(1.9, 2.0, costs, machine=crowded).interval == 1.9
    assert next_interval(1.9, 2.0, costs, machine=Machine(BUSY_CEILING, 2, 0.0)).interval < 1.9  # nothing added
    # a shrink its worst case does not need is kept off too, and still keeps the SLA
    late = Costs(0.15, 20e-6, 1000, commit=0.03, overshoots=(0.0,) * 90 + (1.5,) * 10)
    assert next_interval(1.392, 2.0, late).interval < 1.392  # its late rows shrink it on a free machine
    kept = next_interval(1.392, 2.0, late, machine=Machine(0.9, 2, 0.047))
    assert kept.interval == 1.392 and kept.keeps_sla
    assert next_interval(0.5, 2.0, costs, machine=crowded).interval == pytest.approx(1.392, abs=1e-3)  # longer: moves
    assert next_interval(None, 2.0, costs, machine=crowded).interval == pytest.approx(1.392, abs=1e-3)  # a first choice


def test_with_no_interval_keeping_the_sla_a_query_moves_only_when_far() -> None:
    # 0.3 s SLA: nothing fits; the interval that keeps up is the 0.2 s floor
    assert next_interval(0.21, 0.3, FILTER).interval == 0.21  # 5% above the floor: kept, no restart
    assert "no interval keeps the worst case within 80% of the 300 ms SLA" in next_interval(0.21, 0.3, FILTER).reason
    assert next_interval(0.5, 0.3, FILTER).interval == MIN_INTERVAL  # far above it: moves
    heavy = Costs(0.5, 0.0, 10, commit=0.0)  # keeps up only at 0.5 s or more
    assert next_interval(0.45, 0.5, heavy).interval == 0.45  # a little behind: Spark batches back to back
    assert next_interval(0.3, 0.5, heavy).interval == pytest.approx(0.5)  # far behind: grows


@given(st.floats(0.3, 300), st.floats(0.0, 1.0), st.floats(0, 50e-6), st.floats(0, 20_000))
def test_a_kept_sla_means_the_worst_case_fits_and_the_batch_keeps_up(sla: float, fixed: float, per_row: float,
                                                                     rate: float) -> None:
    costs = Costs(fixed, per_row, rate, commit=0.03)
    for delay in (None, 0.0, 5.0):
        choice = choose(sla, costs, delay)
        assert MIN_INTERVAL <= choice.interval <= MAX_INTERVAL
        if choice.keeps_sla:
            assert worst_case(choice.interval, costs, delay) <= 0.8 * sla + 1e-9
            assert fixed + per_row * rate * choice.interval <= choice.interval + 1e-9


def test_measured_costs_lean_to_per_row_until_sizes_differ() -> None:
    from sluice.scheduler.intervals import measured

    assert measured([(100, 0.2), (100, 0.3)], rate=200) is None  # too few batches
    same = measured([(1000, 1.4), (1000, 0.2), (1100, 0.25), (900, 0.3)], rate=2000, commit=0.03)
    # the median batch (0.275 s, 1,000 rows; a JIT-slow first batch does not count): Spark's floor
    # (0.15 s) fixed, the other 0.125 s per row, so a longer interval is predicted to cost more
    assert same is not None and same.fixed == pytest.approx(0.15) and same.per_row == pytest.approx(0.000125)
    assert (same.rate, same.commit) == (2000, 0.03)
    # 10-row batches of 0.6 s: 45 ms a row is past the 1 ms a row believed, so 10 ms is per row
    # and 0.59 s fixed (contention, not rows: a shorter interval would not make it cheaper)
    slow = measured([(10, 0.6), (10, 0.6), (10, 0.6)], rate=10)
    assert slow is not None and slow.per_row == pytest.approx(0.001) and slow.fixed == pytest.approx(0.59)
    assert measured([(0, 0.3), (0, 0.3), (0, 0.3)], rate=0) == Costs(0.3, 0.0, 0)  # no rows: all fixed
    # sizes 3x apart: the line through them (0.1 s + 1 ms a row)
    line = measured([(100, 0.2), (300, 0.4), (100, 0.2), (300, 0.4)], rate=200)
    assert line is not None and line.fixed == pytest.approx(0.1) and line.per_row == pytest.approx(0.001)
    # a line steeper than 1 ms a row is contention (the late batch holds more rows and runs slower):
    # 10 ms a row through (10, 0.2) and (30, 0.4) is 1 ms a row, the rest fixed at the median (20 rows)
    steep = measured([(10, 0.2), (30, 0.4), (10, 0.2), (30, 0.4)], rate=27)
    assert steep is not None and steep.per_row == pytest.approx(0.001) and steep.fixed == pytest.approx(0.1 + 0.009 * 20)


def test_a_query_starts_at_most_at_the_cap_until_its_batches_are_measured() -> None:
    from sluice.scheduler.intervals import START_CAP, first

    loose = first(20.0, Costs(0.15, 20e-6, 0.0, commit=0.05))  # the SLA alone: 15.8 s; a quarter of it: 5 s
    assert loose.interval == 5.0 and "5000 ms until its batches are measured" in loose.reason
    assert "the SLA alone would allow 15800 ms" in loose.reason
    assert first(3.0, Costs(0.15, 20e-6, 0.0, commit=0.05)).interval == START_CAP  # 2.2 s; a quarter is below 1 s
    assert first(0.5, FILTER) == choose(0.5, FILTER)  # already below the cap


def test_a_query_with_a_measured_twin_starts_where_the_twin_s_costs_put_it() -> None:
    from sluice.scheduler.intervals import first, seeded

    # a critical filter's twin measured: 200 ms fixed, 100 µs a row at 50 rows/s, a 50 ms commit;
    # 0.8 x 2 s - 0.2 - 0.05 = 1.35 s over 1 + 0.005 of load: 1.343 s, not the start cap's 1 s
    twin = Costs(0.2, 1e-4, 50.0, commit=0.05)
    assert first(2.0, twin).interval == 1.0
    choice = seeded(2.0, twin, None, "t/a", 1.0)  # the twin at the cap: 1.343 s is past the 25% band
    assert choice.interval == pytest.approx(1.35 / 1.005)
    assert choice.reason.startswith("as t/a runs (the same pipeline, literals aside): the largest interval")
    # the twin shrunk to 1.25 s under load: within the band of 1.343 s and its worst case (1.25 +
    # 0.2 + 0.00625 + 0.05 = 1.506 s) within the SLA, so the new query starts where the twin runs
    kept = seeded(2.0, twin, None, "t/a", 1.25)
    assert kept.interval == 1.25 and kept.reason.startswith("as t/a runs (the same pipeline, literals aside): keeping 1250 ms")
    # a 30 s bulk filter: 23.75 s / 1.005 = 23.63 s where the cap gives 7.5 s (a restart saved)
    assert seeded(30.0, twin, None, "t/a", 7.5).interval == pytest.approx(23.75 / 1.005)
    # a twin of another SLA: its costs, the new query's own SLA, no hysteresis against its interval
    other = seeded(30.0, twin, None, "t/a", None)
    assert other.interval == pytest.approx(23.75 / 1.005) and other.reason.startswith(
        "from t/a's batches (the same pipeline, literals aside, another SLA): the largest interval")
    # a twin that cannot keep its SLA says so, as `choose` does
    assert not seeded(0.3, twin, None, "t/a", 0.2).keeps_sla


# nine typical batches and one that took its oldest row 1 s past the interval
TAILED = Costs(0.15, 0.0, 1000, commit=0.03, overshoots=(0.2,) * 9 + (1.0,))


def test_the_late_share_is_the_rows_each_batch_s_overshoot_pushes_past_the_sla() -> None:
    # at 1.42 s the slow batch's first 1.42 + 1.0 - 2 = 0.42 s of rows are late: 0.42 / 1.42 of its rows
    assert late_share(1.42, 2.0, TAILED) == pytest.approx(0.42 / 1.42 / 10)
    assert late_share(0.9, 2.0, TAILED) == 0.0  # no batch reaches the SLA
    assert late_share(1.42, 2.0, Costs(0.15, 0.0, 1000, overshoots=(1.0,) * 7)) is None  # too few seen


def test_an_interval_keeps_its_late_rows_within_half_of_what_the_percentile_allows() -> None:
    assert choose(2.0, FILTER).interval == pytest.approx(1.42)  # no overshoots seen: the typical batch's rule
    # p99 allows 1% late; half of it: (I + 1.0 - 2) / I / 10 <= 0.005, so I <= 1 / 0.95
    tight = choose(2.0, TAILED)
    assert tight.interval == pytest.approx(1 / 0.95, abs=1e-6) and tight.keeps_sla
    assert late_share(tight.interval, 2.0, TAILED) == pytest.approx(0.005, abs=1e-6)
    assert "0.50% of rows late" in tight.reason and "2.96%" in tight.reason
    # p90 allows 10%: the typical batch's interval already fits
    assert choose(2.0, TAILED, percentile=90).interval == pytest.approx(1.42)
    # a windowed aggregation's rows wait for windows, not the interval: overshoots are not read
    windowed = Costs(0.15, 0.0, 1000, commit=0.03)
    assert choose(20.0, TAILED, delay=2.0).interval == choose(20.0, windowed, delay=2.0).interval


def test_late_rows_no_interval_avoids_leave_the_interval_to_the_typical_batch_and_say_so() -> None:
    # two batches of ten stalled 3 s: their rows are late at any interval, the others' at none
    stalled = Costs(0.15, 0.0, 1000, commit=0.03, overshoots=(0.2,) * 8 + (3.0,) * 2)
    assert late_share(MIN_INTERVAL, 2.0, stalled) == pytest.approx(0.2) and avoidable_late(1.42, 2.0, stalled) == 0.0
    choice = choose(2.0, stalled)
    assert choice.interval == pytest.approx(1.42) and not choice.keeps_sla
    assert "20.00% of rows late at any interval" in choice.reason
    # a stall beside an avoidable tail: only the avoidable part is chased
    both = Costs(0.15, 0.0, 1000, commit=0.03, overshoots=(0.2,) * 8 + (3.0, 1.0))
    shrunk = choose(2.0, both)
    assert avoidable_late(shrunk.interval, 2.0, both) == pytest.approx(0.005, abs=1e-6)
    assert shrunk.interval == pytest.approx(1 / 0.95, abs=1e-6)  # as the same tail without the stall


def test_an_interval_whose_late_rows_pass_the_percentile_shrinks_at_once_and_one_within_it_is_kept() -> None:
    # at 1.3 s: 0.3 / 1.3 / 10 = 2.3% late, past the 1% p99 allows, though within 25% of the choice
    shrunk = next_interval(1.3, 2.0, TAILED)
    assert shrunk.interval == pytest.approx(1 / 0.95, abs=1e-6)
    # at 1.1 s: 0.91% late, within the 1%, and the choice (1.053 s) within 25%: no restart
    assert next_interval(1.1, 2.0, TAILED).interval == 1.1


def test_each_query_s_interval_is_its_own_shorter_by_a_stable_share() -> None:
    # thirty queries all chosen at the cap would trigger together at each minute; their own
    # intervals are distinct, none longer than chosen, none more than STAGGER shorter
    own = [staggered(MAX_INTERVAL, f"tenant-{i:02d}/q{i:04d}") for i in range(30)]
    assert len({round(x, 3) for x in own}) == 30
    assert all(MAX_INTERVAL * (1 - STAGGER) <= x <= MAX_INTERVAL for x in own)
    assert staggered(MAX_INTERVAL, "tenant-00/q0000") == own[0]  # stable: the same key, the same interval
    assert staggered(MIN_INTERVAL, "t/a") == MIN_INTERVAL and staggered(0.1, "t/a") == 0.1  # never below the floor


def test_tenants_copies_of_a_pipeline_share_a_cost_shape_whatever_their_literals() -> None:
    """The interval rule seeds a new query from a running twin's costs; tenants' filters differ in
    thresholds, keys and window sizes, which leave a batch's cost alone."""
    from sluice.api.manifest import load_query
    from sluice.runtime.pipeline import cost_shape, warm_shape

    def shape(pipeline: list[dict[str, object]], partitions: int = 2) -> tuple[str, str]:
        query = load_query({
            "apiVersion": "sluice.dev/v1alpha1", "kind": "StreamingQuery", "metadata": {"name": "q", "namespace": "t"},
            "spec": {"pool": "p", "sla": {"latencyTarget": "2s"}, "pipeline": pipeline,
                     "resources": {"shufflePartitions": partitions},
                     "source": {"type": "kafka", "bootstrapServers": "k:9092", "topic": "in",
                                "schema": "key STRING, col2 DOUBLE, produced_at TIMESTAMP"},
                     "sink": {"type": "noop"}}})
        return cost_shape(query), warm_shape(query)

    def windowed(size: str, delay: str) -> list[dict[str, object]]:
        return [{"watermark": {"column": "produced_at", "delay": delay}}, {"window": {"column": "produced_at", "size": size}},
                {"groupBy": ["window", "key"]}, {"aggregate": [{"fn": "count", "name": "n"}]}]

    a, b = shape([{"filter": "col2 > 900 AND key <> 'k1'"}]), shape([{"filter": "col2 > 912.5 AND key <> 'it''s'"}])
    assert a[0] == b[0] and a[1] != b[1]  # one cost shape, two generated-code shapes
    assert shape(windowed("20s", "3s"))[0] == shape(windowed("40s", "7s"))[0]
    assert shape([{"filter": "col2 > 900"}])[0] != a[0]  # another condition is another pipeline
    assert shape([{"filter": "col2 > 900"}])[0] != shape([{"filter": "key > 900"}])[0]  # col2's digit is its name
    assert shape(windowed("20s", "3s"), partitions=4)[0] != shape(windowed("20s", "3s"))[0]  # partitions cost
