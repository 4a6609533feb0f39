"""`sluice.scheduler.simulate`: hand-computed schedules of one pool."""

from __future__ import annotations

from dataclasses import replace

import pytest

from sluice.api.constants import GRID, MASSES
from sluice.api.scenario import Burst
from sluice.scheduler import intervals
from sluice.scheduler.simulate import (
    Options,
    Pool,
    QueryResult,
    SimQuery,
    next_trigger,
    simulate,
    size,
)


def filter_query(**overrides: object) -> SimQuery:
    base: dict[str, object] = dict(key="a/filter", tenant="a", sla=1.0, rate=100.0, fixed=0.1, per_row=0.0,
                                   commit=0.05, trigger=1.0)
    base.update(overrides)
    return SimQuery(**base)  # type: ignore[arg-type]


def test_a_lone_filter_delivers_each_row_one_interval_plus_its_batch_after_it_was_produced() -> None:
    # a batch every second reads the second before it (100 rows) and commits 0.15 s later:
    # latencies spread evenly over [0.15 s, 1.15 s], so 85% are within a 1 s SLA and the median is 0.65 s
    result = simulate([filter_query()], Pool(1), Options(duration=10.5))
    q = result.queries["a/filter"]
    assert q.batches == 10  # the trigger at 0 s finds no rows; 1 s .. 10 s each run one
    assert q.rows == pytest.approx(1000)
    assert q.attainment == pytest.approx(0.85)
    p50 = q.quantile(0.5)
    assert p50 is not None and 0.65 <= p50 <= 0.65 * 1.02
    assert not q.kept  # 85% < 95%
    assert simulate([filter_query(sla=1.2)], Pool(1), Options(duration=10.5)).queries["a/filter"].kept


def test_a_source_s_lag_delays_every_row_by_it() -> None:
    # as above, but each row is readable 0.4 s after it was produced (a `rate` source's seconds): the
    # batch at k s reads the rows produced in [k - 1.4, k - 0.4) and commits at k + 0.15 s, so the
    # latencies spread evenly over [0.55 s, 1.55 s]: 45% within 1 s, the median 1.05 s (the first
    # batch, which reads [0, 0.6) only, is left out as warm-up)
    q = simulate([filter_query(lag=0.4)], Pool(1), Options(duration=10.5, warmup=1.5)).queries["a/filter"]
    assert q.batches == 10 and q.rows == pytest.approx(900)
    assert q.attainment == pytest.approx(0.45)
    p50 = q.quantile(0.5)
    assert p50 is not None and 1.05 <= p50 <= 1.05 * 1.02
    # a burst's rows are read the same way: 2 s at twice the rate, all read by 10 s
    burst = filter_query(lag=0.4, bursts=(Burst(3.0, 2.0, 2.0),))
    assert simulate([burst], Pool(1), Options(duration=10.5, warmup=1.5)).queries["a/filter"].rows == pytest.approx(1100)


def test_a_spread_varies_each_batch_s_work_reproducibly_around_its_steady_work() -> None:
    steady = filter_query(fixed=0.3, sla=2.0)
    varied = filter_query(fixed=0.3, sla=2.0, spread=2.0)
    base = simulate([steady], Pool(1), Options(duration=300)).queries["a/filter"]
    first = simulate([varied], Pool(1), Options(duration=300)).queries["a/filter"]
    again = simulate([varied], Pool(1), Options(duration=300)).queries["a/filter"]
    assert first.json() == again.json()  # seeded by the query's key
    # each batch's 0.3 s times a log-normal factor of median 1 and 90th percentile 2: about one in ten
    # batches takes over 0.6 s, and the worst of 300 over 1.2 s (the 99.7th percentile is 2.3x)
    p50, p99, p99_base = first.quantile(0.5), first.quantile(0.99), base.quantile(0.99)
    assert p50 is not None and p99 is not None and p99_base is not None
    assert p99 > p99_base + 0.3 and abs(p50 - (base.quantile(0.5) or 0)) < 0.15
    with pytest.raises(ValueError, match="spread"):
        simulate([filter_query(spread=0.5)], Pool(1), Options(duration=10))


def test_warm_up_output_is_left_out() -> None:
    q = simulate([filter_query()], Pool(1), Options(duration=10.5, warmup=5.0)).queries["a/filter"]
    assert q.rows == pytest.approx(600)  # batches committed at 5.15 .. 10.15 s


def test_a_window_is_emitted_by_the_batch_after_the_one_that_moved_the_watermark_past_it() -> None:
    # 10 s windows, 2 s delay, a batch every 5 s costing 0.2 s: the batch at 20 s reads the
    # watermark the batch at 15 s left (15 - 2 = 13 >= 10) and emits [0, 10) at 20.2 s: 10.2 s late;
    # every later window the same way
    windowed = filter_query(key="a/agg", sla=12.0, fixed=0.2, commit=0.0, trigger=5.0, window=10.0, delay=2.0,
                            keys=50)
    q = simulate([windowed], Pool(1), Options(duration=61)).queries["a/agg"]
    assert q.rows == pytest.approx(50 * 5)  # windows ending at 10 .. 50 s, 50 keys each
    p99 = q.quantile(0.99)
    assert p99 is not None and 10.2 <= p99 <= 10.2 * 1.02
    assert q.attainment == 1.0
    tight = simulate([filter_query(key="a/agg", sla=10.0, fixed=0.2, commit=0.0, trigger=5.0, window=10.0,
                                   delay=2.0)], Pool(1), Options(duration=61)).queries["a/agg"]
    assert tight.attainment == 0.0


def test_bursts_spread_a_batch_s_rows_by_the_rate() -> None:
    q = filter_query(rate=10.0, bursts=(Burst(5.0, 5.0, 3.0),))
    assert q.produced(10.0) == pytest.approx(200)
    times = q.production_times(0.0, 10.0)
    assert times[GRID.index(0.5)] == pytest.approx(5 + 50 / 30)  # 50 rows by 5 s, then 30 a second
    assert times[0] == 0.0 and times[-1] == pytest.approx(10.0)


def test_an_sla_driven_interval_moves_once_after_the_dwell() -> None:
    # no spec.trigger, a 10 s SLA: it starts at a quarter of it (2.5 s); measured, a batch costs 0.1 s
    # fixed and 50 ms of commit, so the interval becomes 0.8 x 10 - 0.1 - 0.05 = 7.85 s, once
    q = filter_query(sla=10.0, trigger=None)
    result = simulate([q], Pool(1), Options(duration=120)).queries["a/filter"]
    assert result.restarts == 1
    assert result.interval == pytest.approx(intervals.staggered(7.85, "a/filter"))  # as its own
    assert result.kept


def overloaded() -> list[SimQuery]:
    # two queries each needing 0.6 s of a slot every second: one slot cannot keep up, two can
    return [filter_query(key=f"t{i}/q", tenant=f"t{i}", sla=2.0, fixed=0.6, commit=0.0) for i in range(2)]


def test_a_pool_that_cannot_keep_up_misses_and_one_more_slot_keeps_it() -> None:
    one = simulate(overloaded(), Pool(1), Options(duration=60))
    two = simulate(overloaded(), Pool(2), Options(duration=60))
    assert not one.kept
    assert two.kept
    assert {q.attainment for q in two.queries.values()} == {1.0}  # latencies 0.6 .. 1.6 s


def test_size_finds_the_least_executor_count_that_keeps_every_sla() -> None:
    found, runs = size(overloaded(), Pool(1), Options(duration=60), 1, 8)
    assert found == 2
    assert not runs[1].kept and runs[2].kept
    many = [filter_query(key=f"t{i}/q", tenant=f"t{i}", sla=2.0, fixed=0.6, commit=0.0) for i in range(7)]
    found, runs = size(many, Pool(1), Options(duration=60), 1, 16)
    assert found == 5  # 7 x 0.6 = 4.2 slots of work a second
    assert not runs[4].kept
    none, _ = size(many, Pool(1), Options(duration=60), 1, 3)
    assert none is None


def test_cameo_serves_a_critical_filter_first_where_fifo_queues_it_behind_long_batches() -> None:
    # three bulk queries whose 1.5 s batches arrive together every 5 s on two slots: under fifo the
    # filter's batches wait behind them in arrival order; cameo grants it first. Batches are not
    # pre-empted in this model, so a filter whose batch arrives while both slots run bulk still waits.
    critical = filter_query(key="pay/fraud", tenant="pay", sla=1.0, rate=50.0, fixed=0.1, commit=0.02,
                            trigger=0.25, critical=True)
    bulk = [filter_query(key=f"bi/r{i}", tenant="bi", sla=60.0, rate=1000.0, fixed=1.5, commit=0.05, trigger=5.0)
            for i in range(3)]
    fifo = simulate([critical, *bulk], Pool(2, policy="fifo"), Options(duration=300, warmup=10))
    cameo = simulate([critical, *bulk], Pool(2, policy="cameo"), Options(duration=300, warmup=10))
    f, c = fifo.queries["pay/fraud"], cameo.queries["pay/fraud"]
    assert f.attainment is not None and c.attainment is not None
    assert c.attainment > f.attainment + 0.02
    assert (c.quantile(0.99) or 0) < (f.quantile(0.99) or 0)
    assert all(cameo.queries[q.key].kept for q in bulk)  # not starved


def test_bad_input_is_one_sentence() -> None:
    with pytest.raises(ValueError, match="at least one executor core"):
        simulate([filter_query()], Pool(0), Options(duration=1))
    with pytest.raises(ValueError, match="a/filter: the SLA must be above zero"):
        simulate([filter_query(fixed=-1.0)], Pool(1), Options(duration=1))
    with pytest.raises(ValueError, match="once"):
        simulate([filter_query(), filter_query()], Pool(1), Options(duration=1))


def test_batches_granted_together_share_the_cores_instead_of_queueing_for_a_slot() -> None:
    # two filters of 0.6 s batches, their first batch at 5 s (500 rows each, produced over 0..5 s):
    # with one slot the second waits, commits at 6.2 and the first at 5.6 (p50 3.1 and 3.7 s);
    # a gate of two on one core runs both at half speed: both commit at 6.2 s (p50 3.7 s)
    pair = [filter_query(key="a/f", sla=10.0, fixed=0.6, commit=0.0, trigger=5.0),
            filter_query(key="b/f", tenant="b", sla=10.0, fixed=0.6, commit=0.0, trigger=5.0)]
    options = Options(duration=6.5)

    def p50s(pool: Pool) -> list[float]:
        result = simulate(pair, pool, options)
        return sorted(q.quantile(0.5) or 0.0 for q in result.queries.values())

    queued = p50s(Pool(1))
    assert 3.1 <= queued[0] <= 3.1 * 1.02 and 3.7 <= queued[1] <= 3.7 * 1.02
    shared = p50s(Pool(1, capacity=2))
    assert all(3.7 <= p <= 3.7 * 1.02 for p in shared)


def test_a_critical_filter_takes_the_gates_lane_where_a_bulk_batch_fills_it() -> None:
    # a one-batch gate on two cores; both queries' batches come at 5 s (0.6 s each), the bulk
    # query's first, and take the free slot. Without the lane the critical filter waits for it and
    # commits at 6.2 s (p50 3.7 s); with a lane of one it runs beside it on the second core and
    # commits at 5.6 s (p50 3.1 s). Under fifo there is no lane.
    pair = [filter_query(key="b/f", tenant="b", sla=30.0, fixed=0.6, commit=0.0, trigger=5.0),
            filter_query(key="a/f", sla=10.0, fixed=0.6, commit=0.0, trigger=5.0, critical=True)]

    def p50(pool: Pool) -> float:
        return simulate(pair, pool, Options(duration=6.5)).queries["a/f"].quantile(0.5) or 0.0

    assert 3.7 <= p50(Pool(1, 2, capacity=1)) <= 3.7 * 1.02
    assert 3.1 <= p50(Pool(1, 2, capacity=1, lane=1)) <= 3.1 * 1.02
    assert 3.7 <= p50(Pool(1, 2, capacity=1, lane=1, policy="fifo")) <= 3.7 * 1.02


def test_a_batch_with_driver_and_task_work_spreads_its_tasks_over_the_cores() -> None:
    # 0.2 s on the driver, then 0.4 core-seconds over 2 tasks on 2 cores: 0.4 s a batch; the
    # batch at 5 s reads 0..5 s and commits at 5.4 (p50 2.9 s); on 1 core the tasks take 0.4 s: p50 3.1 s
    q = filter_query(sla=10.0, fixed=9.0, commit=0.0, trigger=5.0, driver=0.2, task_fixed=0.4, tasks=2)
    two = simulate([q], Pool(1, 2), Options(duration=6.5)).queries["a/filter"].quantile(0.5)
    assert two is not None and 2.9 <= two <= 2.9 * 1.02  # `fixed` is not used once the work is known
    one = simulate([q], Pool(1, 1), Options(duration=6.5)).queries["a/filter"].quantile(0.5)
    assert one is not None and 3.1 <= one <= 3.1 * 1.02


def test_time_off_the_cpu_delays_the_batch_without_taking_a_core() -> None:
    # two queries, each batch 0.3 core-seconds of one task and then as long off the CPU (off_cpu 1),
    # both granted at 5 s on one core (a gate of two): their tasks share it and end at 5.6, then
    # each waits 0.3 s without the core and commits at 5.9 (p50 5.9 - 2.5 = 3.4 s). Had the wait
    # taken the core (0.6 core-seconds each), both would commit at 6.2 (p50 3.7 s).
    def pair(task: float, off: float) -> list[SimQuery]:
        return [filter_query(key=f"{t}/f", tenant=t, sla=10.0, commit=0.0, trigger=5.0, driver=0.0,
                             task_fixed=task, off_cpu=off) for t in ("a", "b")]

    def p50s(queries: list[SimQuery], pool: Pool) -> list[float]:
        return [q.quantile(0.5) or 0.0 for q in simulate(queries, pool, Options(duration=6.5)).queries.values()]

    assert all(3.4 <= p <= 3.4 * 1.02 for p in p50s(pair(0.3, 1.0), Pool(1, capacity=2)))
    assert all(3.7 <= p <= 3.7 * 1.02 for p in p50s(pair(0.6, 0.0), Pool(1, capacity=2)))
    # alone on a core of its own (no sharing: the fast path) the batch takes 0.3 + 0.3 s: p50 3.1 s
    alone = p50s(pair(0.3, 1.0)[:1], Pool(1, 2))
    assert 3.1 <= alone[0] <= 3.1 * 1.02
    # `--model cores-hold`: the time off the CPU spent inside the task's slot. With two task slots
    # on the one core each task holds its slot 0.6 s and weighs half a thread on the core: both run
    # side by side at full speed and commit at 5.6 (p50 3.1 s); with one slot they take turns in
    # it (each at half speed), both ending at 6.2 (p50 3.7 s)
    held = [replace(q, off_cpu=0.0, hold=1.0) for q in pair(0.3, 1.0)]
    assert all(3.1 <= p <= 3.1 * 1.02 for p in p50s(held, Pool(1, capacity=2, task_slots=2)))
    assert all(3.7 <= p <= 3.7 * 1.02 for p in p50s(held, Pool(1, capacity=2)))
    assert 3.1 <= p50s(held[:1], Pool(1, 2))[0] <= 3.1 * 1.02  # alone: 0.3 + 0.3 s


def test_the_driver_s_time_off_the_cpu_is_waited_without_a_core() -> None:
    # `--model cores-cpu`: each batch's driver 0.1 s on the CPU and then 0.2 s off it (driver_wait),
    # no task work; both granted at 5 s with the drivers sharing one core: the CPU ends at 5.2, the
    # wait at 5.4 (p50 5.4 - 2.5 = 2.9 s). The same 0.3 s of driver all on the CPU, shared: 5.6
    # (p50 3.1 s). Alone, both take 0.3 s (p50 2.8 s).
    def pair(driver: float, wait: float) -> list[SimQuery]:
        return [filter_query(key=f"{t}/f", tenant=t, sla=10.0, commit=0.0, trigger=5.0, driver=driver,
                             driver_wait=wait) for t in ("a", "b")]

    def p50s(queries: list[SimQuery], pool: Pool) -> list[float]:
        return [q.quantile(0.5) or 0.0 for q in simulate(queries, pool, Options(duration=6.5)).queries.values()]

    shared = Pool(1, capacity=2, driver_shares=True)
    assert all(2.9 <= p <= 2.9 * 1.02 for p in p50s(pair(0.1, 0.2), shared))
    assert all(3.1 <= p <= 3.1 * 1.02 for p in p50s(pair(0.3, 0.0), shared))
    alone = p50s(pair(0.1, 0.2)[:1], Pool(1, 2))
    assert 2.8 <= alone[0] <= 2.8 * 1.02


def test_triggers_fire_on_their_interval_s_grid_and_a_late_batch_is_followed_at_once() -> None:
    # Spark's ProcessingTimeExecutor: the next multiple of the interval after a trigger, or at once
    # when the batch ran past it
    assert next_trigger(2.35, 1.0) == pytest.approx(3.0) and next_trigger(3.0, 1.0) == pytest.approx(4.0)
    assert next_trigger(0.6, 0.2) == pytest.approx(0.8)  # 0.6 / 0.2 is 2.9999999999999996 in floats
    assert next_trigger(5.0, 0.0) == 5.0  # back to back
    # a batch a second (0.1 s, commit 0.05 s) whose first with rows (at 1 s) took 1.3 s: it commits
    # at 2.35 s (rows of 0..1 s: the oldest 2.35 s late), past the tick at 2 s, so the next runs at
    # once (rows of 1..2.35 s, committed at 2.5 s: 1.5 s) and the one after on the grid again: at 3 s
    # (not 3.35 s), rows of 2.35..3 s, committed at 3.15 s (0.8 s)
    q = simulate([filter_query(cold=(1.3,))], Pool(1), Options(duration=3.2, timeline=True)).queries["a/filter"]
    assert q.batches == 3 and q.rows == pytest.approx(300)
    assert [(round(t, 2), round(worst, 2)) for t, worst in q.timeline] == [(2.35, 2.35), (2.5, 1.5), (3.15, 0.8)]


def test_a_cold_start_s_first_batch_takes_its_recorded_time_and_leaves_a_backlog() -> None:
    # a batch a second (0.1 s, commit 0.05 s); the first with rows (at 1 s, rows of 0..1 s) took
    # 2.5 s in the recording: it commits at 3.55 s (latencies 2.55..3.55 s). The next trigger is
    # then, at 3.55 s: 2.55 s of rows at its steady 0.1 s, committed at 3.70 s (0.15..2.70 s). Of
    # those 355 rows, only the second batch's produced after 2.70 s are within a 1 s SLA: the
    # latency at its quantile q is 2.70 - 2.55 q, within from q = 0.67 on (0.7 .. 1.0 of GRID, its
    # rows binned by the grid's masses). Warm, three batches' rows are within 1.15 s, 85% within 1 s.
    cold = simulate([filter_query(cold=(2.5,))], Pool(1), Options(duration=3.75, warmup=0.0)).queries["a/filter"]
    assert cold.batches == 2 and cold.rows == pytest.approx(355)
    within = sum(m for q, m in zip(GRID, MASSES, strict=True) if q >= 0.7)
    assert cold.attainment == pytest.approx(255 * within / 355)
    worst = cold.quantile(0.999)
    assert worst is not None and 3.5 <= worst <= 3.55 * 1.02
    warm = simulate([filter_query()], Pool(1), Options(duration=3.75, warmup=0.0)).queries["a/filter"]
    assert warm.batches == 3 and warm.attainment == pytest.approx(0.85)  # at 1, 2 and 3 s
    # on shared cores the cold time beyond the work is a wait without a core: two batches of 0.3
    # core-seconds share one core (both end their tasks at 5.6 s), then the cold one waits until
    # 5 + 1.0 s (p50 6.0 - 2.5 = 3.5 s) while the warm one commits at 5.6 s (3.1 s)
    pair = [filter_query(key=f"{t}/f", tenant=t, sla=10.0, commit=0.0, trigger=5.0, driver=0.0, task_fixed=0.3,
                         cold=c) for t, c in (("a", (1.0,)), ("b", ()))]
    p50s = {k: q.quantile(0.5) or 0.0 for k, q in simulate(pair, Pool(1, capacity=2), Options(duration=6.5)).queries.items()}
    assert 3.5 <= p50s["a/f"] <= 3.5 * 1.02 and 3.1 <= p50s["b/f"] <= 3.1 * 1.02


def test_cores_other_processes_take_slow_the_batches_on_what_is_left() -> None:
    # one batch of 0.3 core-seconds at 5 s (reads 0..5 s): on a free core it commits at 5.3 (p50
    # 2.8 s); with half the core taken by other processes it runs at half speed, commits at 5.6 (3.1 s)
    q = filter_query(sla=10.0, commit=0.0, trigger=5.0, driver=0.0, task_fixed=0.3)
    free = simulate([q], Pool(1, 1), Options(duration=6.5)).queries["a/filter"].quantile(0.5)
    assert free is not None and 2.8 <= free <= 2.8 * 1.02
    half = simulate([q], Pool(1, 1, taken=0.5), Options(duration=6.5)).queries["a/filter"].quantile(0.5)
    assert half is not None and 3.1 <= half <= 3.1 * 1.02
    assert Pool(1, 1, taken=5.0).cores().cores == 0.1  # never no core at all
    assert Pool(1, 2, taken=0.5).scaled(3).taken == 0.5  # the machine's other processes stay as they were


def test_cores_the_jvms_own_threads_take_over_time_slow_the_batches_while_they_take_them() -> None:
    # the batch of 0.3 core-seconds at 5 s on one core: JIT compilers take 0.5 of it from 0 s and
    # none from 5.2 s: 0.1 core-second done by 5.2 (at half speed), the other 0.2 at full speed:
    # commits at 5.4 (p50 2.9 s); taken to the end, half speed throughout: 5.6 (3.1 s)
    q = filter_query(sla=10.0, commit=0.0, trigger=5.0, driver=0.0, task_fixed=0.3)
    for busy, p50 in ((((0.0, 0.5), (5.2, 0.0)), 2.9), (((0.0, 0.5),), 3.1), (((0.0, 0.5), (5.4, 0.0)), 3.0),
                      (((6.0, 0.5),), 2.8)):  # the last: after the batch, no effect
        found = simulate([q], Pool(1, 1, busy=busy), Options(duration=6.5)).queries["a/filter"].quantile(0.5)
        assert found is not None and p50 <= found <= p50 * 1.02, (busy, found)
    # beside the other processes' cores: 0.25 taken throughout and 0.25 by the JVMs: half speed
    both = simulate([q], Pool(1, 1, taken=0.25, busy=((0.0, 0.25),)), Options(duration=6.5)).queries["a/filter"]
    assert both.quantile(0.5) is not None and 3.1 <= (both.quantile(0.5) or 0) <= 3.1 * 1.02
    with pytest.raises(ValueError, match="zero or more"):
        simulate([q], Pool(1, 1, busy=((-1.0, 0.5),)), Options(duration=6.5))


def test_size_scales_spark_s_task_slots_with_the_executors() -> None:
    pool = Pool(1, 2, task_slots=16, capacity=4, driver_shares=True)
    assert pool.scaled(3).task_slots == 48 and pool.scaled(3).capacity == 4
    assert Pool(1, 2).scaled(3).task_slots is None


def test_a_quantile_on_the_edge_between_two_bins_is_the_lower_one_whatever_the_summing_order() -> None:
    # half the rows at 1 s, half at 4 s: the median is exactly on the edge between the two; rows
    # summed in pieces that do not add up exactly (0.1 + 0.2 != 0.3) must not move it to 4 s
    for pieces in ([0.3], [0.1, 0.2], [0.2, 0.1]):
        result = QueryResult("a/q", sla=2.0, goal=0.95)
        result.add(1.0, 0.3)
        for rows in pieces:
            result.add(4.0, rows)
        p50 = result.quantile(0.5)
        assert p50 is not None and 1.0 <= p50 <= 1.0 * 1.02, (pieces, p50)
    assert result.attainment == pytest.approx(0.5)


def test_an_even_batch_binned_in_one_pass_matches_its_latencies_binned_one_by_one() -> None:
    listed, even = QueryResult("a/q", sla=0.8, goal=0.95), QueryResult("a/q", sla=0.8, goal=0.95)
    listed.add_batch([1.2 - q * 1.0 for q in GRID], 500.0)
    even.add_even(1.2, 1.0, 500.0)
    assert even.rows == listed.rows and even.within == pytest.approx(listed.within)
    assert even.bins == listed.bins
    assert even.attainment == pytest.approx(0.65)  # within 0.8 s: the grid's quantiles from 0.4 up, mass from 0.35
