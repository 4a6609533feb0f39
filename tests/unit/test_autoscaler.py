"""DS2 sizing (pure): cores from true rates and fitted costs, lag-aware targets, bounds, and the
anti-flap rules (stabilization window, scale-down delay and step, ineffective scale-ups)."""

from __future__ import annotations

from dataclasses import replace
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sluice.api.pool import StreamingPool
from sluice.api.wire import Load, QueryStatus
from sluice.operator import scaling
from sluice.operator.autoscaler import Bounds, Decision, Memory, QueryLoad, ScaleUp, decide
from sluice.runtime.kafka_lag import SourceOffsets, kafka_position

BOUNDS = Bounds(min_executors=1, max_executors=8, cores_per_executor=2, utilization=0.5, stabilization=0.0,
                scale_down_delay=60.0, max_scale_down_factor=1.0)


def test_demand_is_summed_over_queries_from_their_true_rates() -> None:
    # a: 1,000 rows/s at 500 rows per useful core-second = 2 cores; b: 300 rows/s at 300 = 1 core
    loads = [QueryLoad("a", 1000, rows=5000, useful_seconds=10), QueryLoad("b", 300, rows=3000, useful_seconds=10)]
    decision = decide(loads, current=1, bounds=BOUNDS, now=0.0)
    assert decision.cores_needed == pytest.approx(3.0)
    assert decision.target == 3  # 3 cores / 50% = 6 cores = 3 executors of 2
    assert "growing from 1" in decision.reason and decision.changes(1)


def test_real_time_slots_are_counted_whole_beside_the_micro_batch_cores() -> None:
    loads = [QueryLoad("a", 1000, rows=5000, useful_seconds=10)]  # 2 cores: 4 slots at 50%
    decision = decide(loads, current=1, bounds=BOUNDS, now=0.0, reserved=3)
    assert decision.target == 4  # (4 + 3 held) slots = 3.5 executors of 2
    assert "plus 3 task slots Real-time queries hold" in decision.reason
    # with no micro-batch demand at all, the reservation alone keeps executors
    assert decide([], current=1, bounds=BOUNDS, now=0.0, reserved=3).target == 2
    # through the operator's plan: a Real-time query's status is not a DS2 load, its slots are counted
    pool = StreamingPool.model_validate({"metadata": {"name": "p"}, "spec": {"maxExecutors": 8, "executor": {"cores": 2}}})
    rt = QueryStatus(phase="Running", sla_ms=100, input_rate=900, reserved_slots=4)
    mb = QueryStatus(phase="Running", sla_ms=30_000, input_rate=0)
    chosen = scaling.plan(pool, 1, {"t/rt": rt, "t/mb": mb}, now=0.0)
    assert chosen.target == 2 and chosen.recommendation is not None and "4 task slots" in chosen.recommendation.reason


def test_a_fitted_fixed_cost_makes_the_first_step_land() -> None:
    """Batches of 1 s: 0.2 useful seconds fixed + 1 ms per row. At 500 rows/s (batches of 500 rows)
    the ratio says 1.4 ms a row; after a step to 1,500 rows/s the ratio model asks for 2.1 cores,
    the true need is 0.2 + 1.5 = 1.7 cores. With batches of both sizes in the window the line is
    fitted and DS2 asks for 1.7."""
    small = [(500.0, 0.2 + 0.5)] * 4
    big = [(1500.0, 0.2 + 1.5)] * 2
    batches = small + big
    rows, useful = sum(r for r, _ in batches), sum(u for _, u in batches)
    fitted = QueryLoad("q", 1500, rows, useful, batches=tuple(batches), interval=1.0)
    assert fitted.cost() == pytest.approx((0.2, 0.001))
    assert fitted.cores() == pytest.approx(1.7)
    ratio_only = QueryLoad("q", 1500, 500 * 4, 0.7 * 4, batches=tuple(small), interval=1.0)
    assert ratio_only.cores() == pytest.approx(1500 * 0.7 / 500)  # sizes alike: the fixed part is unobservable


def test_a_kafka_backlog_raises_the_target_rate_beyond_what_the_capped_trigger_reads() -> None:
    # the trigger reads 1,000 rows/s (capped); producers write 1,200 rows/s and it is 60,000 behind
    capped = QueryLoad("k", 1000, rows=10_000, useful_seconds=10, producer_rate=1200, lag=60_000, catch_up=60)
    assert capped.target_rate == pytest.approx(1200 + 1000)
    assert capped.cores() == pytest.approx(2.2)
    spark_only = QueryLoad("k", 1000, rows=10_000, useful_seconds=10)
    assert spark_only.target_rate == 1000 and spark_only.cores() == pytest.approx(1.0)


def test_catch_up_defaults_to_ten_times_the_sla_within_bounds() -> None:
    def status(sla_ms: float) -> QueryStatus:
        return QueryStatus(phase="Running", sla_ms=sla_ms)

    assert scaling.catch_up(status(500), None) == 30.0
    assert scaling.catch_up(status(10_000), None) == 100.0
    assert scaling.catch_up(status(3_600_000), None) == 600.0
    assert scaling.catch_up(status(500), 45.0) == 45.0


def test_the_stabilization_window_holds_every_change() -> None:
    bounds = replace(BOUNDS, stabilization=60.0)
    heavy = [QueryLoad("a", 1000, rows=1000, useful_seconds=2)]  # 2 cores -> 2 executors at 50%
    held = decide(heavy, current=1, bounds=bounds, now=30.0, memory=Memory(last_change=0.0))
    assert held.target == 1 and "30s more (stabilization window)" in held.reason
    assert decide(heavy, current=1, bounds=bounds, now=61.0, memory=Memory(last_change=0.0)).target == 2


def test_a_shrink_waits_out_the_delay_and_goes_to_the_most_wanted_meanwhile() -> None:
    def load(rate: float) -> list[QueryLoad]:
        return [QueryLoad("a", rate, rows=1000, useful_seconds=1)]  # rate / 1000 cores

    first = decide(load(2000), current=6, bounds=BOUNDS, now=0.0)  # 2 cores -> 2 executors
    assert first.target == 6 and "60s more (scale-down delay" in first.reason
    dip = decide(load(3000), 6, BOUNDS, 30.0, first.memory)  # 3 cores -> 3 executors
    assert dip.target == 6 and dip.memory.below_since == 0.0 and dip.memory.below_peak == 3
    done = decide(load(2000), 6, BOUNDS, 61.0, dip.memory)
    assert done.target == 3 and "shrinking from 6 to 3" in done.reason
    # demand back at the pool's size resets the wait
    back = decide(load(6000), 6, BOUNDS, 40.0, dip.memory)
    assert back.target == 6 and back.memory.below_since is None


def test_one_shrink_removes_at_most_the_factor() -> None:
    bounds = replace(BOUNDS, max_scale_down_factor=0.5, scale_down_delay=0.0)
    idle = [QueryLoad("a", 0.0)]
    decision = decide(idle, current=8, bounds=bounds, now=0.0)
    assert decision.target == 4 and "at most 50% of the executors go in one step" in decision.reason
    assert decide(idle, current=1, bounds=bounds, now=0.0).target == 1


def test_unmeasured_input_blocks_a_shrink_and_idle_queries_cost_nothing() -> None:
    loads = [QueryLoad("a", 10, rows=100, useful_seconds=1), QueryLoad("new", 50)]
    decision = decide(loads, current=4, bounds=BOUNDS, now=1000.0)
    assert decision.target == 4 and "new has input and no measurement" in decision.reason
    idle = [QueryLoad("a", 0.0, rows=100, useful_seconds=1), QueryLoad("b", 0.0)]
    no_delay = replace(BOUNDS, scale_down_delay=0.0)
    assert decide(idle, current=4, bounds=no_delay, now=1000.0).target == BOUNDS.min_executors


def test_a_lowered_maximum_applies_at_once() -> None:
    light = [QueryLoad("a", 100, rows=1000, useful_seconds=2), QueryLoad("new", 5)]
    decision = decide(light, current=12, bounds=BOUNDS, now=10.0, memory=Memory(last_change=5.0))
    assert decision.target == 8 and decision.reason.startswith("maxExecutors 8 is below the 12 asked for")
    assert decision.memory.last_change == 10.0


def test_bounds_cap_and_say_so() -> None:
    flood = [QueryLoad("a", 1e6, rows=1000, useful_seconds=1)]
    decision = decide(flood, current=1, bounds=BOUNDS, now=0.0)
    assert decision.target == 8 and "capped at maxExecutors 8" in decision.reason
    with pytest.raises(ValueError, match="utilization"):
        decide(flood, 1, Bounds(1, 2, 1, utilization=0.0), 0.0)


def behind(throughput: float, produced: float = 8000) -> list[QueryLoad]:
    """A Kafka query that must read `produced` rows/s (no lag) and reads `throughput`, at 1 ms a row."""
    return [QueryLoad("k", throughput, rows=1000, useful_seconds=1, producer_rate=produced)]


def test_an_ineffective_scale_up_is_found_recorded_and_not_repeated() -> None:
    bounds = replace(BOUNDS, stabilization=30.0, max_executors=20)
    grew = decide(behind(1000), current=2, bounds=bounds, now=0.0, generation=7)  # 8 cores at 50%: 8 of 2
    assert grew.target == 8 and grew.memory.scale_up == ScaleUp(0.0, 2, 8, 1000, 8000, ("k",))
    # after the window, throughput rose by 50 rows/s where 3,000 were expected (4x the executors,
    # capped at the 8,000 produced), and the producers now write 12,000 rows/s
    later = decide(behind(1050, 12000), current=8, bounds=bounds, now=31.0, memory=grew.memory, generation=7)
    found = later.ineffective_found
    assert found is not None and (found.from_executors, found.to_executors) == (2, 8)
    assert found.expected == pytest.approx(3000) and found.observed == pytest.approx(50)
    assert later.target == 8 and "(ineffective)" in later.reason and later.memory.scale_up is None
    again = decide(behind(1050, 12000), 8, bounds, 100.0, later.memory, generation=7)
    assert again.target == 8 and again.ineffective_found is None  # found once, kept, not repeated
    # a spec change (new generation) clears it: DS2 tries again
    assert decide(behind(1050, 12000), 8, bounds, 100.0, later.memory, generation=8).target == 12


def test_a_scale_up_is_not_judged_while_state_partitions_still_move_onto_the_new_executors() -> None:
    bounds = replace(BOUNDS, stabilization=30.0, max_executors=20)
    grew = decide(behind(1000), current=2, bounds=bounds, now=0.0, generation=7)
    moving = decide(behind(1050, 12000), 8, bounds, 31.0, grew.memory, generation=7, moving=True)
    assert moving.ineffective_found is None and moving.memory.scale_up == grew.memory.scale_up  # still pending
    assert moving.target == 8 and "state partitions still move" in moving.reason  # and no further step meanwhile
    moved = decide(behind(1050, 12000), 8, bounds, 45.0, moving.memory, generation=7)
    assert moved.ineffective_found is not None  # judged once the moves are done


def test_a_query_that_starts_after_a_scale_up_is_not_counted_as_its_gain() -> None:
    bounds = replace(BOUNDS, stabilization=30.0, max_executors=20)
    grew = decide(behind(1000), current=2, bounds=bounds, now=0.0)  # k reads 1,000 of 8,000: grows to 8
    assert grew.memory.scale_up is not None and grew.memory.scale_up.queries == ("k",)
    # k still reads 1,000; a query started meanwhile reads 2,500 (more than the 300 a tenth of the
    # 3,000 expected would be): summed, the pool looks helped, but the executors added nothing to k
    started = QueryLoad("new", 2500, rows=1000, useful_seconds=1, producer_rate=2500)
    later = decide([*behind(1000), started], current=8, bounds=bounds, now=31.0, memory=grew.memory)
    found = later.ineffective_found
    assert found is not None and found.expected == pytest.approx(3000) and found.observed == pytest.approx(0)


def test_an_effective_scale_up_is_not_flagged() -> None:
    bounds = replace(BOUNDS, stabilization=30.0, max_executors=10)
    grew = decide(behind(1000), current=2, bounds=bounds, now=0.0)
    later = decide(behind(3500), current=8, bounds=bounds, now=31.0, memory=grew.memory)
    assert later.ineffective_found is None and later.memory.ineffective is None
    # a pool that was keeping up when it grew (headroom, not backlog) is never judged
    keeping_up = decide([QueryLoad("k", 4000, 1000, 1, producer_rate=4000)], 2, bounds, 0.0)
    assert keeping_up.target == 4
    judged = decide([QueryLoad("k", 4000, 1000, 1, producer_rate=4000)], keeping_up.target, bounds, 31.0,
                    keeping_up.memory)
    assert judged.ineffective_found is None


def pool(**autoscaling: object) -> StreamingPool:
    return StreamingPool.model_validate({"apiVersion": "sluice.dev/v1alpha1", "kind": "StreamingPool", "metadata": {"name": "p"},
                      "spec": {"minExecutors": 1, "maxExecutors": 6, "autoscaling": autoscaling}})


def statuses(rate: float) -> dict[str, QueryStatus]:
    return {"t/a": QueryStatus(phase="Running", sla_ms=2000, input_rate=rate, interval_ms=1000,
                               load=Load(batches=2, rows=1000, usefulSeconds=1.0, perBatch=[(500, 0.5), (500, 0.5)]))}


def test_recommend_mode_changes_nothing_and_says_what_it_would_do() -> None:
    spec = pool(mode="recommend", utilization=0.5, scaleDownDelay="0s", stabilizationWindow="0s")
    grow = scaling.plan(spec, 1, statuses(2000), now=0.0)  # 2 cores at 50% -> 4 executors
    assert grow.target == 1 and grow.decision is None
    assert grow.recommendation is not None and grow.recommendation.target == 4
    assert grow.why.startswith("DS2 recommends 4 (spec.autoscaling.mode is recommend; nothing changes)")
    assert grow.memory is not None and grow.memory.scale_up is None and grow.memory.last_change is None
    shrink = scaling.plan(spec, 5, statuses(500), now=0.0)
    assert shrink.target == 5 and shrink.recommendation is not None and shrink.recommendation.target == 3  # half at most
    off = scaling.plan(pool(mode="off"), 3, statuses(2000), now=0.0)
    assert off.target == 3 and off.recommendation is None and "autoscaling is off" in off.why


def test_memory_survives_the_status_round_trip() -> None:
    remembered = Memory(last_change=None, below_since=1_700_000_000.0, below_peak=3,
                        scale_up=ScaleUp(1_700_000_010.0, 2, 4, 1000.5, 4000.25, ("t/a", "t/b")))
    status = {"autoscaling": scaling.memory_status(remembered)}
    assert scaling.memory(status) == remembered


def test_kafka_lag_and_producer_rate_from_spark_offsets() -> None:
    latest = '{"t":{"0":1200,"1":1000}}'
    assert kafka_position([("KafkaV2[Subscribe[t]]", latest, '{"t":{"0":1100,"1":1000}}')]) == (2200, 100)
    assert kafka_position([("RateStreamV2[rowsPerSecond=5]", "3", "3")]) is None
    assert kafka_position([("KafkaV2[Subscribe[t]]", "not json", latest)]) is None
    offsets = SourceOffsets()
    offsets.observe(0.0, (2200, 100))
    offsets.observe(2.0, (2800, 40))
    assert offsets.lag == 40 and offsets.producer_rate == pytest.approx(300.0)
    offsets.observe(3.0, (10, 0))  # the topic was recreated: the rate starts over
    assert offsets.lag == 0 and offsets.producer_rate == pytest.approx(300.0) and len(offsets.points) == 1
    offsets.observe(4.0, (30, 5))
    offsets.idle()  # Spark says no new data: a stale producer rate must not keep DS2's demand up
    assert offsets.lag == 0 and offsets.producer_rate == 0.0 and not offsets.points


loads_strategy = st.lists(
    st.builds(QueryLoad, st.text(min_size=1, max_size=4), st.floats(0, 1e5), st.floats(0, 1e6), st.floats(0, 1e3)),
    max_size=6,
)


@given(loads_strategy, st.integers(0, 10), st.floats(1.0, 10.0))
def test_within_bounds_and_more_load_never_means_fewer_executors(loads: list[QueryLoad], current: int, factor: float) -> None:
    base = decide(loads, current, BOUNDS, now=1e6)
    assert BOUNDS.min_executors <= base.target <= BOUNDS.max_executors or base.target == current
    busier = [replace(q, input_rate=q.input_rate * factor) for q in loads]
    assert decide(busier, current, BOUNDS, now=1e6).target >= base.target


@given(st.integers(1, 40), st.floats(0.05, 1.0), st.floats(0, 1e4))
def test_a_shrink_never_removes_more_than_the_factor(current: int, factor: float, rate: float) -> None:
    bounds = Bounds(0, 40, 1, scale_down_delay=0.0, max_scale_down_factor=factor)
    decision = decide([QueryLoad("a", rate, 1000, 1)], current, bounds, now=0.0)
    if decision.target < current:  # the factor's share, or one executor where that share is less than one
        assert current - decision.target <= max(current * factor + 1e-9, 1)


def run(loads: list[QueryLoad], start: int, bounds: Bounds, steps: int = 40, every: float = 15.0) -> list[int]:
    """The targets DS2 sets, one decision every `every` seconds, on an unchanging load."""
    current, memory, targets = start, Memory(), [start]
    for i in range(steps):
        decision: Decision = decide(loads, current, bounds, now=i * every, memory=memory)
        current, memory = decision.target, decision.memory
        targets.append(current)
    return targets


@settings(max_examples=200)
@given(st.floats(0, 2e4), st.integers(1, 12), st.floats(0.1, 1.0), st.floats(0, 120), st.floats(0, 600))
def test_a_steady_load_never_oscillates(rate: float, start: int, factor: float, window: float, delay: float) -> None:
    bounds = Bounds(1, 12, 2, utilization=0.7, stabilization=window, scale_down_delay=delay, max_scale_down_factor=factor)
    targets = run([QueryLoad("a", rate, 1000, 1)], start, bounds, steps=600)
    moves = [b - a for a, b in pairwise(targets) if b != a]
    assert all(m > 0 for m in moves) or all(m < 0 for m in moves), targets  # one direction, no flapping
    final = decide([QueryLoad("a", rate, 1000, 1)], targets[-1], replace(bounds, scale_down_delay=0, stabilization=0),
                   now=1e9).target
    assert targets[-1] == final  # and it settled where the demand is
