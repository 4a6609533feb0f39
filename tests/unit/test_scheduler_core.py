"""The pure scheduler core: ordering, costs, aging, fairness, group sizes, overload."""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sluice.scheduler.bands import (
    DEFAULT_BAND,
    URGENT_MIN_SHARE,
    URGENT_SLACK,
    band_for_slack,
    band_weights,
    fairscheduler_xml,
    urgent_bands,
)
from sluice.scheduler.core import Completion, GroupTuning, Scheduler, SchedulerError
from sluice.scheduler.costs import CostModel, CostPrior
from sluice.scheduler.policies import BatchRequest, QuerySpec, frontier

T0 = 1_700_000_000.0  # an arbitrary wall-clock instant


def _ids(grants: list) -> list[str]:
    return [g.query for g in grants]


# ---------------------------------------------------------------- frontier and deadlines


def test_frontier_stateless_is_oldest_event_and_windowed_is_window_close() -> None:
    stateless = QuerySpec("a/filter", "a", 0.05)
    windowed = QuerySpec("b/agg", "b", 1.0, window_size=10.0, watermark_delay=2.0)
    batch = BatchRequest("x", 1, rows=10, oldest_event=T0 + 3.5)
    assert frontier(stateless, batch, arrived=T0 + 4) == T0 + 3.5
    # T0 is a multiple of 10: the window [T0, T0+10) closes when the watermark passes T0+10,
    # i.e. at wall-clock T0 + 10 + 2 (delay)
    assert frontier(windowed, batch, arrived=T0 + 4) == T0 + 12.0
    explicit = BatchRequest("x", 1, rows=10, oldest_event=T0 + 3.5, window_end=T0 + 5)
    assert frontier(windowed, explicit, arrived=T0 + 4) == T0 + 7.0
    # unknown event time: the batch's arrival stands in
    assert frontier(stateless, BatchRequest("x", 1), arrived=T0 + 9) == T0 + 9


def _two_tenants(policy: str) -> Scheduler:
    costs = CostModel(CostPrior(fixed=0.1, per_row=0.0, tail=0.0))
    s = Scheduler(policy, capacity=1, costs=costs)
    s.register(QuerySpec("bulk/agg", "bulk", 1.0, window_size=10.0, watermark_delay=0.0))
    s.register(QuerySpec("pay/filter", "pay", 0.05, critical=True))
    return s


def test_cameo_serves_the_tight_filter_before_a_window_that_cannot_close_yet() -> None:
    """The Cameo example: a 50 ms filter beats a 1 s window aggregation whose window cannot close yet.

    agg: window [T0, T0+10) closes at T0+10, ddl = T0 + 10 + 1 - 0.1 = T0 + 10.9
    filter: oldest event T0 + 0.5, ddl = T0 + 0.5 + 0.05 - 0.1 = T0 + 0.45
    """
    s = _two_tenants("cameo")
    now = T0 + 0.5
    s.submit(BatchRequest("bulk/agg", 1, rows=1000, oldest_event=T0 + 0.1), now)  # arrives first
    s.submit(BatchRequest("pay/filter", 1, rows=10, oldest_event=T0 + 0.5), now + 0.001)
    first = s.dispatch(now + 0.002)
    assert _ids(first) == ["pay/filter"]
    assert first[0].deadline == pytest.approx(T0 + 0.45)
    assert first[0].band == "band0"  # slack is negative: already late, and critical: most urgent band
    s.complete(Completion("pay/filter", 1, seconds=0.1))
    second = s.dispatch(now + 0.2)
    assert _ids(second) == ["bulk/agg"]
    assert second[0].deadline == pytest.approx(T0 + 10.9)
    assert second[0].band == "band7"  # ~10 s of slack: a low band


def test_fifo_serves_arrival_order_in_one_band() -> None:
    s = _two_tenants("fifo")
    s.submit(BatchRequest("bulk/agg", 1, rows=1000, oldest_event=T0 + 0.1), T0 + 0.5)
    s.submit(BatchRequest("pay/filter", 1, rows=10, oldest_event=T0 + 0.5), T0 + 0.501)
    grant = s.dispatch(T0 + 0.502)
    assert _ids(grant) == ["bulk/agg"] and grant[0].band == DEFAULT_BAND


def test_edf_uses_the_plain_deadline_and_ignores_windows() -> None:
    s = _two_tenants("edf")
    # agg deadline T0 + 0.1 + 1 = T0 + 1.1; filter deadline T0 + 2.0 + 0.05 = T0 + 2.05
    s.submit(BatchRequest("pay/filter", 1, rows=10, oldest_event=T0 + 2.0), T0 + 2.0)
    s.submit(BatchRequest("bulk/agg", 1, rows=1000, oldest_event=T0 + 0.1), T0 + 2.0)
    assert _ids(s.dispatch(T0 + 2.0)) == ["bulk/agg"]


def test_cameo_subtracts_learned_cost() -> None:
    """Same due time; the batch that costs more must start earlier."""
    s = Scheduler("cameo", capacity=1, costs=CostModel(CostPrior(fixed=0.1, per_row=0.0, tail=0.0)))
    s.register(QuerySpec("t/cheap", "t", 1.0))
    s.register(QuerySpec("t/costly", "t", 1.0))
    for _ in range(5):
        s.costs.observe("t/costly", 0, 0.6)
        s.costs.observe("t/cheap", 0, 0.05)
    s.submit(BatchRequest("t/cheap", 1, oldest_event=T0), T0)
    s.submit(BatchRequest("t/costly", 1, oldest_event=T0), T0)
    assert _ids(s.dispatch(T0)) == ["t/costly"]


def _lane_pool(lane: int, policy: str = "cameo") -> Scheduler:
    """Two bulk queries fill a one-slot gate's slot and queue; a critical filter arrives."""
    s = Scheduler(policy, capacity=1, lane=lane, costs=CostModel(CostPrior(fixed=0.1, per_row=0.0, tail=0.0)))
    s.register(QuerySpec("bulk/a", "bulk", 30.0))
    s.register(QuerySpec("bulk/b", "bulk", 30.0))
    s.register(QuerySpec("pay/filter", "pay", 2.0, critical=True))
    s.submit(BatchRequest("bulk/a", 1, oldest_event=T0), T0)
    assert _ids(s.dispatch(T0)) == ["bulk/a"]
    s.submit(BatchRequest("bulk/b", 1, oldest_event=T0 - 60), T0 + 0.1)  # late by 60 s: first in cameo's order
    s.submit(BatchRequest("pay/filter", 1, oldest_event=T0 + 0.1), T0 + 0.1)
    return s


def test_a_critical_batch_takes_the_lane_where_the_gate_is_full_and_a_bulk_one_never_does() -> None:
    s = _lane_pool(lane=1)
    # bulk/a holds the one slot; bulk/b (start deadline T0 - 60 + 30 - 0.1) comes before the filter
    # (T0 + 0.1 + 2 - 0.1) in cameo's order, but only the filter may take the lane
    assert [(g.query, g.batch_id) for g in s.dispatch(T0 + 0.1)] == [("pay/filter", 1)]
    assert s.in_flight == 2 and s.dispatch(T0 + 0.2) == []
    # the filter's batch ends: the lane is free again, and still no bulk batch takes it
    s.complete(Completion("pay/filter", 1, seconds=0.1))
    assert s.in_flight == 1 and s.dispatch(T0 + 0.3) == []
    # bulk/a ends: bulk/b takes the slot; the filter's next batch takes the lane beside it
    s.complete(Completion("bulk/a", 1, seconds=0.3))
    s.submit(BatchRequest("pay/filter", 2, oldest_event=T0 + 0.3), T0 + 0.4)
    assert _ids(s.dispatch(T0 + 0.4)) == ["bulk/b", "pay/filter"]
    assert s.in_flight == 2 and s.snapshot(T0 + 0.4)["lane"] == 1


def test_the_lane_has_its_slots_for_each_critical_query_so_critical_batches_never_wait_for_each_other() -> None:
    s = _lane_pool(lane=1)
    s.register(QuerySpec("pay/second", "pay", 2.0, critical=True))
    assert s.lane_slots == 2 and s.snapshot(T0)["laneSlots"] == 2
    s.submit(BatchRequest("pay/second", 1, oldest_event=T0 + 0.1), T0 + 0.1)
    # the gate's one slot is bulk/a's; both filters are granted beside it, bulk/b still waits
    assert sorted(_ids(s.dispatch(T0 + 0.1))) == ["pay/filter", "pay/second"] and s.in_flight == 3
    # registering a critical query again (an update) adds no slot; unregistering one takes its slot away
    s.register(QuerySpec("pay/second", "pay", 3.0, critical=True))
    assert s.lane_slots == 2
    s.register(QuerySpec("pay/second", "pay", 3.0))  # no longer critical
    assert s.lane_slots == 1
    s.unregister("pay/filter")
    assert s.lane_slots == 0 and s.in_flight == 2


def test_without_the_lane_or_under_fifo_a_critical_batch_waits_for_the_slot() -> None:
    for s in (_lane_pool(lane=0), _lane_pool(lane=1, policy="fifo")):
        assert s.dispatch(T0 + 0.1) == [] and s.in_flight == 1
        s.complete(Completion("bulk/a", 1, seconds=0.3))
        first = s.dispatch(T0 + 0.4)
        assert len(first) == 1 and s.in_flight == 1  # one slot, whichever policy order
    assert Scheduler("fifo", lane=1).lane == 0 and Scheduler("edf", lane=2).lane == 2
    with pytest.raises(SchedulerError, match="critical lane"):
        Scheduler("cameo", lane=-1)


@settings(max_examples=60, deadline=None)
@given(ops=st.lists(st.tuples(st.integers(0, 5), st.booleans()), min_size=5, max_size=80),
       capacity=st.integers(1, 3), lane=st.integers(0, 2))
def test_bulk_batches_never_exceed_the_capacity_nor_all_batches_capacity_and_lane_nor_critical_ones_wait(
        ops: list[tuple[int, bool]], capacity: int, lane: int) -> None:
    s = Scheduler("cameo", capacity=capacity, lane=lane, costs=CostModel(CostPrior(0.1, 0.0, 0.0)))
    for i in range(6):
        s.register(QuerySpec(f"t/q{i}", "t", 1.0 + i, critical=i < 2))
    batch = dict.fromkeys(range(6), 0)
    running: dict[str, int] = {}
    now = T0
    for query, finish in ops:
        now += 0.05
        key = f"t/q{query}"
        if finish and key in running:
            s.complete(Completion(key, running.pop(key), seconds=0.05))
        elif key not in running:
            batch[query] += 1
            s.submit(BatchRequest(key, batch[query], oldest_event=now), now)
        for grant in s.dispatch(now):
            running[grant.query] = grant.batch_id
        bulk = sum(1 for k in running if int(k[-1]) >= 2)
        assert len(running) == s.in_flight <= capacity + 2 * lane  # two critical queries
        # a bulk batch is granted only below the capacity: bulk ones never outnumber it
        assert bulk <= capacity
        # with a lane, a critical batch never waits for a slot (unless held for a batch more urgent)
        if lane:
            assert all((p := s.queries[f"t/q{i}"].pending) is None or p.waiting for i in (0, 1))


def test_capacity_limits_grants_and_completion_frees_a_slot() -> None:
    s = Scheduler("cameo", capacity=2)
    for i in range(3):
        s.register(QuerySpec(f"t/q{i}", "t", 1.0))
        s.submit(BatchRequest(f"t/q{i}", 7, oldest_event=T0 + i), T0)
    assert _ids(s.dispatch(T0)) == ["t/q0", "t/q1"]
    assert s.dispatch(T0) == []
    s.complete(Completion("t/q0", 7, seconds=0.2))
    assert _ids(s.dispatch(T0 + 0.2)) == ["t/q2"]


def test_real_time_reservations_come_out_of_the_micro_batch_capacity() -> None:
    s = Scheduler("cameo", capacity=4)
    s.register(QuerySpec("rt/filter", "rt", 0.1, reserved_slots=2))
    for i in range(3):
        s.register(QuerySpec(f"t/q{i}", "t", 1.0))
        s.submit(BatchRequest(f"t/q{i}", 7, oldest_event=T0 + i), T0)
    assert _ids(s.dispatch(T0)) == ["t/q0", "t/q1"]  # 4 slots less the 2 held
    assert s.snapshot(T0)["reserved"] == 2
    s.register(QuerySpec("rt/filter", "rt", 0.1, reserved_slots=1))  # re-registered: replaces, not adds
    assert _ids(s.dispatch(T0)) == ["t/q2"]
    s.unregister("rt/filter")
    assert s.reserved == 0 and s.available == 4


def test_a_reservation_that_leaves_no_micro_batch_slot_is_refused_and_changes_nothing() -> None:
    s = Scheduler("cameo", capacity=3)
    s.register(QuerySpec("rt/a", "rt", 0.1, reserved_slots=2))
    with pytest.raises(SchedulerError, match="would reserve 1 of the 3 slots with 2 already reserved"):
        s.register(QuerySpec("rt/b", "rt", 0.1, reserved_slots=1))
    assert "rt/b" not in s.queries and s.reserved == 2 and s.available == 1
    with pytest.raises(SchedulerError, match="would reserve 3"):
        s.register(QuerySpec("rt/a", "rt", 0.1, reserved_slots=3))
    assert s.queries["rt/a"].spec.reserved_slots == 2 and s.reserved == 2


def test_bad_requests_are_refused_with_a_sentence() -> None:
    s = Scheduler("cameo")
    with pytest.raises(SchedulerError, match="not registered"):
        s.submit(BatchRequest("nobody/x", 1), T0)
    with pytest.raises(SchedulerError, match="latency target"):
        s.register(QuerySpec("a/b", "a", 0.0))
    with pytest.raises(ValueError, match="unknown policy"):
        Scheduler("lifo")


def test_a_crashed_holder_frees_its_slot_after_the_lease() -> None:
    s = Scheduler("cameo", capacity=1, lease=5.0)
    s.register(QuerySpec("t/a", "t", 1.0))
    s.register(QuerySpec("t/b", "t", 1.0))
    s.submit(BatchRequest("t/a", 1), T0)
    s.submit(BatchRequest("t/b", 1), T0)
    assert _ids(s.dispatch(T0)) == ["t/a"]
    assert s.dispatch(T0 + 4) == []
    assert _ids(s.dispatch(T0 + 5.1)) == ["t/b"]


# ---------------------------------------------------------------- bands


def test_bands_follow_slack_and_weights_are_steep() -> None:
    assert band_for_slack(-1.0, 8) == 0
    assert band_for_slack(0.05, 8) == 1
    assert band_for_slack(0.3, 8) == 3
    assert band_for_slack(1e9, 8) == 7
    weights = band_weights(8)
    assert weights["band0"] == 128 and weights["band7"] == 1
    xml = fairscheduler_xml(8)
    assert xml.count("<pool ") == 9 and '<pool name="default">' in xml


def test_urgent_bands_hold_slack_below_two_seconds_and_get_a_minimum_share_no_pool_reaches() -> None:
    assert URGENT_SLACK == 2.0 and urgent_bands(8) == 6
    assert band_for_slack(1.99, 8) == 5 and band_for_slack(2.0, 8) == 6  # band5 is the last urgent one
    assert urgent_bands(4) == 3  # band3 would also hold any slack above 0.5 s: never urgent
    pools = re.findall(r'<pool name="(\w+)">.*?<minShare>(\d+)</minShare>', fairscheduler_xml(8), re.S)
    assert pools == [(f"band{i}", str(URGENT_MIN_SHARE if i < 6 else 0)) for i in range(8)] + [("default", "0")]


# ---------------------------------------------------------------- costs


def test_cost_model_reacts_to_a_10x_batch_at_once() -> None:
    costs = CostModel()
    for _ in range(30):
        costs.observe("q", rows=1_000, seconds=0.15 + 1_000 * 50e-6)  # 0.2 s
    usual = costs.estimate("q", 1_000)
    assert usual == pytest.approx(0.2, rel=0.3)
    spike = costs.estimate("q", 10_000)
    # the variable part scales tenfold before any large batch was seen
    assert spike >= 0.15 + 10_000 * 50e-6 * 0.9
    assert spike > 2.5 * usual


def test_cost_model_learns_the_true_line_once_sizes_vary() -> None:
    """Fixed-cost-heavy batches (a stateful query): pessimistic before a big batch, true after a few."""
    costs = CostModel()
    for _ in range(20):
        costs.observe("agg", rows=5_000, seconds=2.0 + 5_000 * 20e-6)  # 2.1 s, mostly fixed cost
    assert costs.estimate("agg", 50_000) > 10.0  # never seen: extrapolated pessimistically
    for _ in range(3):
        costs.observe("agg", rows=50_000, seconds=2.0 + 50_000 * 20e-6)  # 3.0 s
    learned = costs.estimate("agg", 50_000)
    assert 2.5 < learned < 5.0  # the fitted line (plus margin), not 10x the usual cost


def test_cost_model_is_not_poisoned_by_a_cold_first_batch() -> None:
    """Measured on two-tenants (2026-11-26): a windowed aggregation's first batch, on a cold JVM,
    took 8.6 s for 8,682 rows (1 ms a row), its next 18.1 s for 229,499 (78 us a row), its third
    8.2 s for 280,102. Seeding the per-row EWMA with the cold batch priced the third at 266 s.
    Over the first batches the cheapest per row counts: (0.1 + 280,102 x 78.3 us) x 1.25 = 27.5 s;
    once warm, the fourth (130,691 rows, 3.9 s taken) at (0.1 + 130,691 x 29 us) x 1.25 = 4.9 s."""
    costs = CostModel()
    costs.observe("agg", rows=8_682, seconds=8.649)
    costs.observe("agg", rows=229_499, seconds=18.068)
    assert costs.estimate("agg", 280_102) == pytest.approx((0.1 + 280_102 * 17.968 / 229_499) * 1.25, rel=1e-6)
    costs.observe("agg", rows=280_102, seconds=8.206)
    per_row = 8.106 / 280_102
    assert costs.estimate("agg", 130_691) == pytest.approx((0.1 + 130_691 * per_row) * 1.25, rel=1e-6)
    # the cold batch stays in the line, clipped to 4x the warm model's price for its rows
    assert max(c for r, c in costs._get("agg").recent if r == 8_682) == pytest.approx(4 * (0.1 + 8_682 * per_row))


def test_cost_model_is_robust_to_one_outlier_and_conservative_when_new() -> None:
    costs = CostModel(CostPrior(fixed=0.5, per_row=20e-6))
    assert costs.estimate("new", 100) == pytest.approx(0.5 + 100 * 20e-6)
    for _ in range(20):
        costs.observe("q", rows=100, seconds=0.1)
    before = costs.estimate("q", 100)
    costs.observe("q", rows=100, seconds=12.0)  # a fetch-failure retry
    after = costs.estimate("q", 100)
    assert after < 3 * before



def test_cost_model_windows_stay_sorted_past_their_length_and_through_a_nan() -> None:
    # the floor and the margin come from sorted copies kept as batches come (not sorted each
    # time): past the 64-batch window, through the warm-up's re-clip and a NaN cost, they must
    # equal a sort of what the windows hold
    costs = CostModel()
    costs.observe("q", rows=100, seconds=float("nan"))
    for i in range(200):
        costs.observe("q", rows=100 + (i % 7) * 50, seconds=0.1 + (i % 13) * 0.01)
    model = costs._get("q")
    assert model._ranked_costs == sorted(c for _, c in model.recent)
    assert model._ranked_residuals == sorted(model.residuals)
    assert math.isfinite(costs.estimate("q", 100))


# ---------------------------------------------------------------- aging, fairness (properties)


@settings(max_examples=60, deadline=None)
@given(
    n_urgent=st.integers(2, 6),
    rounds=st.integers(20, 60),
    max_wait=st.floats(0.5, 5.0),
)
def test_aging_bounds_waiting(n_urgent: int, rounds: int, max_wait: float) -> None:
    """A batch with a far deadline, under a stream of urgent ones, waits at most max_wait plus one batch."""
    s = Scheduler("cameo", capacity=1, max_wait=max_wait, costs=CostModel(CostPrior(0.1, 0.0, 0.0)))
    s.register(QuerySpec("bulk/agg", "bulk", 3600.0))
    for i in range(n_urgent):
        s.register(QuerySpec(f"pay/f{i}", "pay", 0.05))
    now = T0
    s.submit(BatchRequest("bulk/agg", 1, oldest_event=now), now)
    served_at = None
    batch = {f"pay/f{i}": 0 for i in range(n_urgent)}
    for _ in range(rounds):
        for key in batch:
            batch[key] += 1
            s.submit(BatchRequest(key, batch[key], oldest_event=now), now)
        for grant in s.dispatch(now):
            if grant.query == "bulk/agg":
                served_at = now
            now += 0.1
            s.complete(Completion(grant.query, grant.batch_id, seconds=0.1))
        if served_at is not None:
            break
    if now - T0 >= max_wait + 0.1:
        assert served_at is not None
        assert served_at - T0 <= max_wait + 0.1 + 1e-9


@settings(max_examples=60, deadline=None)
@given(weights=st.lists(st.floats(0.5, 4.0), min_size=2, max_size=5), steps=st.integers(40, 120))
def test_fair_never_starves_and_follows_weights(weights: list[float], steps: int) -> None:
    s = Scheduler("fair", capacity=1, costs=CostModel(CostPrior(0.1, 0.0, 0.0)))
    tenants = [f"t{i}" for i in range(len(weights))]
    for tenant, weight in zip(tenants, weights, strict=True):
        s.register(QuerySpec(f"{tenant}/q", tenant, 1.0, weight=weight))
    served = dict.fromkeys(tenants, 0)
    next_batch = dict.fromkeys(tenants, 1)
    now = T0
    for _ in range(steps):
        for tenant in tenants:  # every tenant always has a batch waiting (backlogged)
            s.submit(BatchRequest(f"{tenant}/q", next_batch[tenant]), now)
        for grant in s.dispatch(now):
            tenant = grant.query.split("/")[0]
            served[tenant] += 1
            next_batch[tenant] += 1
            now += 0.1
            s.complete(Completion(grant.query, grant.batch_id, seconds=0.1))
    total_weight = sum(weights)
    for tenant, weight in zip(tenants, weights, strict=True):
        share = weight / total_weight
        assert served[tenant] >= 1  # nobody starves
        assert served[tenant] >= share * steps - (max(weights) / min(weights)) - 2


# ---------------------------------------------------------------- group grants (AIMD)


def test_group_size_grows_multiplicatively_and_shrinks_additively() -> None:
    s = Scheduler("cameo", capacity=4, group=GroupTuning(k_max=8, grow_above=0.1, shrink_below=0.02))
    s.register(QuerySpec("t/q", "t", 10.0))
    batch = 0

    def cycle(coordination: float, seconds: float = 0.1) -> int:
        nonlocal batch
        batch += 1
        s.submit(BatchRequest("t/q", batch, oldest_event=T0), T0)
        (grant,) = s.dispatch(T0)
        batch = grant.batch_id + grant.k - 1
        s.complete(Completion("t/q", batch, seconds=seconds, coordination=coordination))
        return s.queries["t/q"].k

    assert [cycle(0.05) for _ in range(5)] == [2, 4, 8, 8, 8]  # coordination 33% of the time
    assert [cycle(0.0) for _ in range(3)] == [7, 6, 5]  # coordination negligible: -1 each
    assert cycle(0.005) == 5  # between the bounds: unchanged
    # a change of band (priority moved: from band7 to band6, late and not critical) shrinks the
    # group by one at the next grant
    batch += 1
    s.submit(BatchRequest("t/q", batch, oldest_event=T0 - 100), T0)
    (grant,) = s.dispatch(T0)
    assert grant.band == "band6" and grant.k == 4


def test_a_group_grant_holds_one_slot_until_its_last_batch() -> None:
    s = Scheduler("cameo", capacity=1)
    s.register(QuerySpec("t/q", "t", 10.0))
    s.register(QuerySpec("t/other", "t", 10.0))
    s.queries["t/q"].k = 3
    s.submit(BatchRequest("t/q", 10), T0)
    (grant,) = s.dispatch(T0)
    assert grant.k == 3
    s.submit(BatchRequest("t/other", 1), T0)
    s.complete(Completion("t/q", 10, seconds=0.01, coordination=0.0))
    s.complete(Completion("t/q", 11, seconds=0.01, coordination=0.0))
    assert s.dispatch(T0) == []  # batch 12 still holds the slot
    s.complete(Completion("t/q", 12, seconds=0.01, coordination=0.0))
    assert _ids(s.dispatch(T0)) == ["t/other"]


def test_a_group_given_back_at_a_trigger_wait_frees_its_slot_for_another_query() -> None:
    s = Scheduler("cameo", capacity=1, group=GroupTuning(k_max=8, grow_above=0.1, shrink_below=0.02))
    s.register(QuerySpec("t/q", "t", 10.0))
    s.register(QuerySpec("t/other", "t", 10.0))
    s.queries["t/q"].k = 4
    s.submit(BatchRequest("t/q", 10), T0)
    (grant,) = s.dispatch(T0)
    assert grant.last == 13
    s.submit(BatchRequest("t/other", 1), T0)
    s.complete(Completion("t/q", 10, seconds=0.1, coordination=0.02))
    assert s.dispatch(T0) == [] and s.in_flight == 1  # back to back: the group keeps its slot
    # batch 11 was quicker than its interval: the runtime gives batches 12 and 13 back
    s.complete(Completion("t/q", 11, seconds=0.1, ends_group=True))
    assert s.in_flight == 0 and _ids(s.dispatch(T0)) == ["t/other"]
    # judged on what ran: 0.02 s of asking in 0.22 s of busy time, 9.1%: k unchanged
    assert s.queries["t/q"].k == 4
    # its next batch asks like any other, and waits for the slot it gave back
    s.submit(BatchRequest("t/q", 12), T0 + 1)
    assert s.dispatch(T0 + 1) == []
    s.complete(Completion("t/other", 1, seconds=0.1))
    assert [(g.query, g.batch_id) for g in s.dispatch(T0 + 1)] == [("t/q", 12)]


def test_an_ask_for_a_batch_the_group_covers_frees_the_slot_and_the_granted_batch_is_still_refused() -> None:
    s = Scheduler("cameo", capacity=1)
    s.register(QuerySpec("t/q", "t", 10.0))
    s.queries["t/q"].k = 3
    s.submit(BatchRequest("t/q", 20), T0)
    s.dispatch(T0)
    with pytest.raises(SchedulerError, match="already granted"):
        s.submit(BatchRequest("t/q", 20), T0)  # the granted batch asked again
    # the runtime gave its group back and batch 21 asks before the completion saying so arrived
    s.submit(BatchRequest("t/q", 21), T0 + 0.5)
    assert s.in_flight == 0
    (grant,) = s.dispatch(T0 + 0.5)
    assert (grant.batch_id, s.in_flight) == (21, 1)
    s.complete(Completion("t/q", 20, seconds=0.1, ends_group=True))  # late: its slot is gone already
    assert s.in_flight == 1


# ---------------------------------------------------------------- overload


def test_overload_names_the_violating_queries_and_by_how_much() -> None:
    costs = CostModel(CostPrior(fixed=1.0, per_row=0.0, tail=0.0))
    s = Scheduler("cameo", capacity=1, costs=costs)
    for i in range(3):
        s.register(QuerySpec(f"t{i}/q", f"t{i}", 1.5))
        s.submit(BatchRequest(f"t{i}/q", 1, oldest_event=T0), T0)
    # three 1 s batches due at T0 + 1.5 on one slot finish at +1, +2, +3
    report = {v.query: v for v in s.overload(T0)}
    assert set(report) == {"t1/q", "t2/q"}
    assert report["t2/q"].late_by == pytest.approx(1.5)
    assert report["t1/q"].late_by == pytest.approx(0.5)
    assert all(v.predicted for v in report.values())
    # observed lateness is reported too
    s.dispatch(T0)
    s.complete(Completion("t0/q", 1, seconds=1.0, latency=2.5))
    assert any(v.query == "t0/q" and not v.predicted and v.late_by == pytest.approx(1.0) for v in s.overload(T0 + 1))


def test_aimd_judges_a_group_once_on_its_whole_time() -> None:
    s = Scheduler("cameo", capacity=1, group=GroupTuning(k_max=8, grow_above=0.1, shrink_below=0.02))
    s.register(QuerySpec("t/q", "t", 10.0))
    s.queries["t/q"].k = 4
    s.submit(BatchRequest("t/q", 1), T0)
    (grant,) = s.dispatch(T0)
    assert grant.k == 4
    # one ask (0.05 s) for four 0.1 s batches: 11% of the group's time -> k doubles, once
    s.complete(Completion("t/q", 1, seconds=0.1, coordination=0.05))
    for batch in (2, 3):
        s.complete(Completion("t/q", batch, seconds=0.1))
        assert s.queries["t/q"].k == 4  # mid-group: no change, slot still held
    assert s.in_flight == 1
    s.complete(Completion("t/q", 4, seconds=0.1))
    assert s.queries["t/q"].k == 8 and s.in_flight == 0


# ---------------------------------------------------------------- holding for a predicted urgent batch


def _with_period(s: Scheduler, key: str, period: float, batches: int = 3) -> float:
    """Submit and run `batches` batches of `key`, `period` seconds apart; returns the last submit time."""
    now = T0
    for batch_id in range(1, batches + 1):
        now = T0 + (batch_id - 1) * period
        s.submit(BatchRequest(key, batch_id, oldest_event=now - period), now)
        (grant,) = s.dispatch(now)
        s.complete(Completion(key, grant.batch_id, seconds=0.001))
    return now


def _holding_scheduler(policy: str = "cameo") -> Scheduler:
    # fixed cost 10 ms, 100 us per row: a 10,000-row bulk batch costs about 1 s, a filter's 10 ms
    s = Scheduler(policy, capacity=4, costs=CostModel(CostPrior(0.01, 1e-4, 0.0)))
    s.register(QuerySpec("pay/filter", "pay", 0.5))
    s.register(QuerySpec("bulk/agg", "bulk", 30.0, window_size=10.0))
    return s


def test_a_long_batch_is_held_for_an_urgent_batch_predicted_within_its_cost() -> None:
    s = _holding_scheduler()
    last = _with_period(s, "pay/filter", 0.2)  # the filter arrives every 200 ms
    now = last + 0.05
    s.submit(BatchRequest("bulk/agg", 1, rows=10_000, oldest_event=now), now)
    assert s.dispatch(now) == []  # ~1 s of bulk work would take the cores the filter needs in 150 ms
    assert s.hold_until == pytest.approx(last + 0.2)
    assert s.next_look(now, 1.0) == pytest.approx(0.15)
    # the filter arrives as predicted: it is granted first, and then the bulk batch
    arrived = last + 0.2
    s.submit(BatchRequest("pay/filter", 4, oldest_event=last), arrived)
    assert _ids(s.dispatch(arrived)) == ["pay/filter", "bulk/agg"]
    assert s.snapshot(arrived)["queries"]["bulk/agg"]["held"] == 1  # type: ignore[index]


def test_may_have_pending_is_false_only_when_no_batch_waits() -> None:
    s = Scheduler("cameo", capacity=1)
    assert not s.may_have_pending
    for i in range(2):
        s.register(QuerySpec(f"t/q{i}", "t", 1.0))
        s.submit(BatchRequest(f"t/q{i}", 1, oldest_event=T0), T0)
    assert s.may_have_pending
    assert _ids(s.dispatch(T0)) == ["t/q0"]
    assert s.may_have_pending  # t/q1 waits for the slot
    s.complete(Completion("t/q0", 1, seconds=0.1))
    assert _ids(s.dispatch(T0 + 0.1)) == ["t/q1"]
    assert not s.may_have_pending  # granted: nothing waits, a dispatch would grant nothing
    # a batch held for a predicted urgent arrival still waits
    held = _holding_scheduler()
    last = _with_period(held, "pay/filter", 0.2)
    held.submit(BatchRequest("bulk/agg", 1, rows=10_000, oldest_event=last + 0.05), last + 0.05)
    assert held.dispatch(last + 0.05) == []
    assert held.may_have_pending


def _bulk_held(s: Scheduler) -> tuple[float, float]:
    """The filter arriving every 200 ms, then a ~1 s bulk batch 50 ms after its last arrival,
    held for the next: (the filter's last arrival, the bulk batch's)."""
    last = _with_period(s, "pay/filter", 0.2)
    now = last + 0.05
    s.submit(BatchRequest("bulk/agg", 1, rows=10_000, oldest_event=now), now)
    assert s.dispatch(now) == []
    return last, now


def test_a_missed_prediction_ends_the_hold_at_the_predicted_time() -> None:
    s = _holding_scheduler()
    last, _ = _bulk_held(s)
    assert _ids(s.dispatch(last + 0.2 + 0.001)) == ["bulk/agg"]  # the filter did not come: hold nothing


def test_a_held_batch_waits_off_the_queue_and_comes_back_in_its_place() -> None:
    s = _holding_scheduler()
    last, now = _bulk_held(s)
    # dispatches while it is held grant nothing and count the hold once
    assert s.dispatch(now + 0.01) == [] and s.dispatch(now + 0.02) == []
    assert s.queries["bulk/agg"].held == 1 and s.hold_until == pytest.approx(last + 0.2)
    s.unregister("pay/filter")  # the query it waited for is gone: nothing to wait for
    assert _ids(s.dispatch(now + 0.03)) == ["bulk/agg"]
    assert s.hold_until is None


@pytest.mark.parametrize(
    ("period", "rows", "why"),
    [
        (5.0, 10_000, "the filter's next batch is 5 s away, beyond the bulk batch's ~1 s"),
        (0.2, 100, "the bulk batch costs 20 ms: it ends before the filter arrives"),
    ],
)
def test_nothing_is_held_when_no_urgent_batch_is_near(period: float, rows: int, why: str) -> None:
    s = _holding_scheduler()
    last = _with_period(s, "pay/filter", period)
    now = last + 0.05
    s.submit(BatchRequest("bulk/agg", 1, rows=rows, oldest_event=now), now)
    assert _ids(s.dispatch(now)) == ["bulk/agg"], why
    assert s.hold_until is None


def test_a_hold_never_makes_the_held_batch_late() -> None:
    s = _holding_scheduler()
    s.register(QuerySpec("ops/tight", "ops", 0.3))  # not windowed, SLA 300 ms: its start deadline is near
    last = _with_period(s, "pay/filter", 0.25)
    now = last + 0.05
    # ~0.2 s of work, due in 0.3 s: start deadline ~now + 0.1, before the filter's arrival (now + 0.2)
    s.submit(BatchRequest("ops/tight", 1, rows=2_000, oldest_event=now), now)
    assert _ids(s.dispatch(now)) == ["ops/tight"]


@pytest.mark.parametrize("policy", ["fifo", "fair"])
def test_policies_without_urgency_hold_nothing(policy: str) -> None:
    s = _holding_scheduler(policy)
    last = _with_period(s, "pay/filter", 0.2)
    now = last + 0.05
    s.submit(BatchRequest("bulk/agg", 1, rows=10_000, oldest_event=now), now)
    assert _ids(s.dispatch(now)) == ["bulk/agg"]


def test_an_aged_batch_is_never_held() -> None:
    s = _holding_scheduler()
    s.max_wait = 0.1
    last = _with_period(s, "pay/filter", 0.2)
    now = last + 0.01
    s.submit(BatchRequest("bulk/agg", 1, rows=10_000, oldest_event=now), now)
    assert s.dispatch(now) == []
    assert _ids(s.dispatch(now + 0.11)) == ["bulk/agg"]  # waited max_wait: served, whatever is predicted
