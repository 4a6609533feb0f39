"""DS2 sizing (pure): cores from true rates, bounds, cooldown, unknown demand."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sluice.operator.autoscaler import Bounds, QueryLoad, decide

BOUNDS = Bounds(min_executors=1, max_executors=8, cores_per_executor=2, utilization=0.5, cooldown=60.0)


def test_demand_is_summed_over_queries_from_their_true_rates() -> None:
    # a: 1,000 rows/s at 500 rows per useful core-second = 2 cores; b: 300 rows/s at 300 = 1 core
    loads = [QueryLoad("a", 1000, rows=5000, useful_seconds=10), QueryLoad("b", 300, rows=3000, useful_seconds=10)]
    decision = decide(loads, current=1, bounds=BOUNDS, now=0.0, last_change=None)
    assert decision.cores_needed == pytest.approx(3.0)
    assert decision.target == 3  # 3 cores / 50% = 6 cores = 3 executors of 2
    assert "growing from 1" in decision.reason and decision.changes(1)


def test_growth_is_immediate_but_shrinking_waits_for_the_cooldown() -> None:
    heavy = [QueryLoad("a", 1000, rows=1000, useful_seconds=2)]  # 2 cores -> 2 executors at 50%
    assert decide(heavy, current=1, bounds=BOUNDS, now=10.0, last_change=5.0).target == 2
    light = [QueryLoad("a", 100, rows=1000, useful_seconds=2)]  # 0.2 cores -> 1 executor
    held = decide(light, current=2, bounds=BOUNDS, now=30.0, last_change=5.0)
    assert held.target == 2 and "cooldown" in held.reason and "35s" in held.reason
    assert decide(light, current=2, bounds=BOUNDS, now=65.0, last_change=5.0).target == 1


def test_unmeasured_input_blocks_a_shrink_and_idle_queries_cost_nothing() -> None:
    loads = [QueryLoad("a", 10, rows=100, useful_seconds=1), QueryLoad("new", 50)]
    decision = decide(loads, current=4, bounds=BOUNDS, now=1000.0, last_change=None)
    assert decision.target == 4 and "new has input and no measurement" in decision.reason
    idle = [QueryLoad("a", 0.0, rows=100, useful_seconds=1), QueryLoad("b", 0.0)]
    assert decide(idle, current=4, bounds=BOUNDS, now=1000.0, last_change=None).target == BOUNDS.min_executors


def test_a_lowered_maximum_applies_at_once() -> None:
    light = [QueryLoad("a", 100, rows=1000, useful_seconds=2), QueryLoad("new", 5)]
    decision = decide(light, current=12, bounds=BOUNDS, now=10.0, last_change=5.0)
    assert decision.target == 8 and decision.reason.startswith("maxExecutors 8 is below the 12 asked for")
    measured = decide(light[:1], current=12, bounds=BOUNDS, now=10.0, last_change=5.0)
    assert measured.target == 8 and "cooldown" in measured.reason  # lowered to the bound, no further yet


def test_bounds_cap_and_say_so() -> None:
    flood = [QueryLoad("a", 1e6, rows=1000, useful_seconds=1)]
    decision = decide(flood, current=1, bounds=BOUNDS, now=0.0, last_change=None)
    assert decision.target == 8 and "capped at maxExecutors 8" in decision.reason
    with pytest.raises(ValueError, match="utilization"):
        decide(flood, 1, Bounds(1, 2, 1, utilization=0.0), 0.0, None)


loads_strategy = st.lists(
    st.builds(QueryLoad, st.text(min_size=1, max_size=4), st.floats(0, 1e5), st.floats(0, 1e6), st.floats(0, 1e3)),
    max_size=6,
)


@given(loads_strategy, st.integers(0, 10), st.floats(1.0, 10.0))
def test_within_bounds_and_more_load_never_means_fewer_executors(loads: list[QueryLoad], current: int, factor: float) -> None:
    base = decide(loads, current, BOUNDS, now=1e6, last_change=None)
    assert BOUNDS.min_executors <= base.target <= BOUNDS.max_executors or base.target == current
    busier = [QueryLoad(q.query, q.input_rate * factor, q.rows, q.useful_seconds) for q in loads]
    assert decide(busier, current, BOUNDS, now=1e6, last_change=None).target >= base.target


@pytest.mark.parametrize(("name", "value", "fix"), [
    ("SLUICE_DS2_UTILIZATION", "abc", "at most 1"), ("SLUICE_DS2_UTILIZATION", "1.5", "at most 1"),
    ("SLUICE_DS2_COOLDOWN", "-3", "0 or more"), ("SLUICE_DS2_COOLDOWN", "soon", "0 or more"),
])
def test_bad_ds2_settings_stop_the_operator_with_one_sentence(name: str, value: str, fix: str) -> None:
    import os
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "sluice.operator"], env={**os.environ, name: value},
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and proc.stderr.startswith(f"{name} is {value!r}; ")
    assert fix in proc.stderr


def test_an_overload_names_the_executors_the_demand_needs() -> None:
    from sluice.operator.scaling import overload

    bounds = Bounds(min_executors=1, max_executors=2, cores_per_executor=2, utilization=0.5, cooldown=60.0)
    # 6 cores of measured demand at 50% utilization: 12 cores, 6 executors of 2; the pool stops at 2
    loads = [QueryLoad("a", 3000, rows=5000, useful_seconds=10)]
    decision = decide(loads, current=1, bounds=bounds, now=0.0, last_change=None)
    assert decision.target == 2 and decision.wanted == 6
    sentence = overload(decision, decision.target, bounds)
    assert sentence is not None and sentence.startswith("the measured demand needs 6 executors (6.00 cores at 50%")
    assert "the pool has 2 (maxExecutors is 2)" in sentence
    assert overload(decide(loads[:0], 1, bounds, 0.0, None), 1, bounds) is None  # no demand, no overload
