"""SLA-aware sizing (pure): the pool's measured queries simulated at each executor count; DS2's
count raised to the one that keeps every SLA, with the bound that decided named."""

from __future__ import annotations

from sluice.api.pool import StreamingPool
from sluice.api.wire import BatchCosts, Load, QueryStatus
from sluice.operator import scaling
from sluice.operator.sla_sizing import (
    QUERY_SECONDS,
    SHORTEST,
    SIMULATED,
    rounded,
    sim_queries,
    sized,
    sla_executors,
    span,
)


def status(sla_ms: float = 1250, fixed_ms: float = 150, critical: bool = True, measured: bool = True,
           **extra: object) -> QueryStatus:
    """A critical filter at 10 rows/s with a 1 s trigger whose batches cost `fixed_ms`; DS2's
    load says 0.05 useful core-seconds a batch."""
    costs = BatchCosts(fixed_ms=fixed_ms, per_row_us=0, commit_ms=0, queueing_ms=0, input_rate=10, batches=8,
                       interval_ms=1000) if measured else None
    return QueryStatus.model_validate({
        "phase": "Running", "sla_ms": sla_ms, "input_rate": 10.0, "interval_ms": 1000, "trigger_ms": 1000,
        "critical": critical, "costs": costs,
        "load": Load(batches=4, rows=40, usefulSeconds=0.2, perBatch=[(10, 0.05)] * 4), **extra})


def four(**extra: object) -> dict[str, QueryStatus]:
    return {f"tenant-{i}/filter": status(**extra) for i in range(4)}  # type: ignore[arg-type]


def pool(**spec: object) -> StreamingPool:
    return StreamingPool.model_validate({
        "apiVersion": "sluice.dev/v1alpha1", "kind": "StreamingPool", "metadata": {"name": "p"},
        "spec": {"minExecutors": 1, "maxExecutors": 8, "executor": {"cores": 1},
                 "autoscaling": {"stabilizationWindow": "0s", "scaleDownDelay": "0s"}, **spec}})


def test_the_status_becomes_the_simulation_s_query() -> None:
    kafka = status(window_ms=10_000, watermark_delay_ms=2000, producer_rate=40.0, critical=False)
    sims, unmeasured = sim_queries({"a/agg": kafka, "b/new": status(measured=False),
                                    "c/rt": status(reserved_slots=2), "d/idle": status(measured=False, input_rate=0)})
    assert unmeasured == ["b/new"]  # has input and no costs; the Real-time and the idle query are not simulated
    (sim,) = sims
    assert (sim.key, sim.tenant, sim.sla, sim.rate, sim.fixed, sim.critical) == ("a/agg", "a", 1.25, 40.0, 0.15, False)
    assert (sim.trigger, sim.window, sim.delay) == (1.0, 10.0, 2.0)  # the producer's rate, not what was read


def test_aligned_triggers_need_a_slot_each_when_the_sla_leaves_no_room_to_queue() -> None:
    # Four critical queries trigger together every second (Spark aligns processing-time triggers
    # to the interval) and each batch holds a slot 150 ms. With one slot per query the oldest row
    # waits 1 s + 150 ms = 1.15 s, within 1.25 s. With 3 slots the fourth batch waits one more
    # batch: its rows older than 0.95 s (5%) are late, below the 99% goal; fewer slots, worse.
    found = sla_executors(four(), cores_per_executor=1, policy="cameo", least=1, most=8)
    assert found is not None and found.executors == 4
    assert found.why.startswith("the simulated schedule keeps every SLA at 4 executor(s); at 3, tenant-")
    # a looser SLA (1.5 s) fits two rounds of batches in a second's wait: 2 slots
    loose = sla_executors(four(sla_ms=1500), cores_per_executor=1, policy="cameo", least=1, most=8)
    assert loose is not None and loose.executors == 2
    # 2 cores an executor: half the executors
    wide = sla_executors(four(), cores_per_executor=2, policy="cameo", least=1, most=8)
    assert wide is not None and wide.executors == 2


def test_nothing_is_simulated_until_every_query_with_input_is_measured() -> None:
    assert sla_executors({**four(), "late/one": status(measured=False)}, 1, "cameo", 1, 8) is None
    assert sla_executors({}, 1, "cameo", 1, 8) is None


def test_the_slas_raise_ds2_s_count_and_status_names_the_bound() -> None:
    spec = pool()
    queries = four()
    sla = scaling.sla_count(spec, queries)
    plan = scaling.plan(spec, 1, queries, now=0.0, sla=sla)
    # DS2: 4 x 0.05 core-seconds a second = 0.2 cores, 1 executor at 70%; the SLAs need 4
    assert plan.recommendation is not None and plan.recommendation.bound == "slas"
    assert plan.target == 4 and plan.decision is not None and plan.decision.wanted == 4
    assert "need 0.20 cores; at 70% utilization that is 1 executor of 1 core; the SLAs need more, so they decide: " \
           "the simulated schedule keeps every SLA at 4 executor(s)" in plan.why
    assert plan.why.startswith("DS2 and the SLAs: ") and plan.overload is None
    # without slaSizing, DS2 alone
    off = pool(autoscaling={"stabilizationWindow": "0s", "scaleDownDelay": "0s", "slaSizing": False})
    assert scaling.sla_count(off, queries) is None
    alone = scaling.plan(off, 1, queries, now=0.0)
    assert alone.target == 1 and alone.recommendation is not None and alone.recommendation.bound == "rates"


def test_the_rates_decide_when_the_slas_are_kept_at_ds2_s_count() -> None:
    spec = pool()
    queries = four(sla_ms=3000)
    plan = scaling.plan(spec, 1, queries, now=0.0, sla=scaling.sla_count(spec, queries))
    assert plan.target == 1 and plan.recommendation is not None and plan.recommendation.bound == "rates"
    assert "(the rates decide; the simulated schedule keeps every SLA at 1 executor(s))" in plan.why


def test_slas_not_kept_even_at_the_maximum_are_an_overload() -> None:
    spec = pool(maxExecutors=3)
    queries = four()
    sla = scaling.sla_count(spec, queries)
    assert sla is not None and sla.executors is None
    plan = scaling.plan(spec, 1, queries, now=0.0, sla=sla)
    assert plan.target == 3  # as far as it may go
    assert plan.overload is not None and plan.overload.startswith(
        "The simulated schedule misses an SLA even at maxExecutors 3: tenant-")
    # a fixed count too small for the SLAs is stated as well
    fixed = pool(executors=2)
    stated = scaling.plan(fixed, 2, queries, now=0.0, sla=scaling.sla_count(fixed, queries))
    assert stated.target == 2 and stated.overload == (
        "the simulated schedule needs 4 executors to keep every SLA but the pool has 2: latency SLAs will be "
        "missed until it has 4.")


def test_a_query_no_executor_count_can_help_does_not_grow_the_pool() -> None:
    # a 2 s trigger and a 2 s SLA: a row that waits the whole interval is late whatever the pool
    # has (the shape of test_autoscale's query); sizing for it would only reach maxExecutors
    hopeless = {"t/steady": status(sla_ms=2000, trigger_ms=2000, interval_ms=2000)}
    found = sla_executors(hopeless, 1, "cameo", 1, 8)
    assert found is not None and found.executors == 1
    assert found.why == ("no executor count keeps the SLAs; t/steady misses the SLA even with a slot each (the "
                         "trigger or the batch's own cost, not the executors, limits it), so the count is sized for "
                         "the others.")
    spec = pool()
    plan = scaling.plan(spec, 1, hopeless, now=0.0, sla=scaling.sla_count(spec, hopeless))
    assert plan.target == 1 and plan.recommendation is not None and plan.recommendation.bound == "rates"
    # beside queries the executors can help, it is named and the others are sized for
    mixed = {**four(sla_ms=1500), **hopeless}
    sized = sla_executors(mixed, 1, "cameo", 1, 8)
    assert sized is not None and sized.executors is not None and sized.executors >= 2
    assert "t/steady misses the SLA even with a slot each" in sized.why


def test_a_large_pool_simulates_a_shorter_span_and_never_below_the_shortest() -> None:
    assert span(10) == SIMULATED and span(200) == SIMULATED  # 200 x 120 s: the budget
    assert span(400) == QUERY_SECONDS / 400 == 60.0
    assert span(10_000) == SHORTEST


def test_measurements_that_barely_moved_are_not_simulated_again() -> None:
    assert rounded(sim_queries({"a/f": status(fixed_ms=153.4)})[0][0]).fixed == 0.15  # two significant digits
    sized.cache_clear()
    first = sla_executors(four(), 1, "cameo", 1, 8)
    again = sla_executors(four(fixed_ms=151), 1, "cameo", 1, 8)  # within the rounding: the same inputs
    assert again is first and sized.cache_info().hits == 1
    moved = sla_executors(four(fixed_ms=400), 1, "cameo", 1, 8)  # a cost that moved is simulated again
    assert moved is not first and sized.cache_info().misses == 2
