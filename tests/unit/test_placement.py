"""The Megaphone planner: which state partitions move next, within a byte budget."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from sluice.runtime.placement import (
    MIN_EXTRA_SECONDS,
    SLACK_SHARE,
    Partition,
    balanced,
    budget_bytes,
    locality_wait,
    max_units,
    next_moves,
    reload_rate,
    spread,
    took,
)

MB = 2**20
UNLIMITED = 1 << 62


def units(placement: dict[str, int], size: int = MB, operator: int = 0) -> list[Partition]:
    out, n = [], 0
    for executor, count in placement.items():
        for _ in range(count):
            out.append(Partition((operator, n), executor, size))
            n += 1
    return out


def apply(partitions: list[Partition], moves: list[object]) -> list[Partition]:
    where = {m.unit: m.target for m in moves}  # type: ignore[attr-defined]
    return [Partition(p.unit, where.get(p.unit, p.executor), p.bytes) for p in partitions]


def test_a_grow_moves_partitions_onto_the_new_executor_until_balanced() -> None:
    parts = units({"1": 3, "2": 3})
    moves = next_moves(parts, ["1", "2", "3"], frozenset(), UNLIMITED)
    assert [(m.source, m.target) for m in moves] == [("2", "3"), ("1", "3")]
    assert spread(apply(parts, moves)) == {"1": 2, "2": 2, "3": 2}


def test_the_skew_spark_leaves_is_fixed() -> None:
    parts = units({"1": 5, "2": 1})  # SPARK-33814's pattern, seen on 4.2 in the issue
    after = apply(parts, next_moves(parts, ["1", "2"], frozenset(), UNLIMITED))
    assert spread(after) == {"1": 3, "2": 3}


def test_a_cold_executor_takes_no_partition_until_warm_and_keeps_what_it_holds() -> None:
    parts = units({"1": 3, "2": 3})
    assert next_moves(parts, ["1", "2", "3"], frozenset(), UNLIMITED, cold=frozenset({"3"})) == []
    warm = next_moves(parts, ["1", "2", "3"], frozenset(), UNLIMITED)
    assert {m.target for m in warm} == {"3"} and len(warm) == 2
    # units already on a cold executor (Spark placed them there) stay; others balance around it
    parts = [*units({"1": 4}), Partition((0, 50), "3", MB)]
    moves = next_moves(parts, ["1", "2", "3"], frozenset(), UNLIMITED, cold=frozenset({"3"}))
    assert [(m.source, m.target) for m in moves] == [("1", "2"), ("1", "2")]
    # a cold executor that is leaving is emptied like any leaving one
    moves = next_moves(parts, ["1", "2", "3"], frozenset({"3"}), UNLIMITED, cold=frozenset({"3"}))
    assert ("3", "2") in [(m.source, m.target) for m in moves]


def test_a_shrink_moves_the_leaving_executors_partitions_first() -> None:
    parts = units({"1": 2, "2": 2, "3": 2})
    moves = next_moves(parts, ["1", "2", "3"], frozenset({"3"}), UNLIMITED)
    assert {m.source for m in moves} == {"3"} and {m.target for m in moves} == {"1", "2"}
    assert spread(apply(parts, moves)) == {"1": 3, "2": 3}


def test_partitions_of_a_gone_executor_are_placed_and_unplaced_ones_left_to_spark() -> None:
    parts = [*units({"9": 2, "1": 1}), Partition((0, 99), None, MB)]
    moves = next_moves(parts, ["1", "2"], frozenset(), UNLIMITED)
    assert sorted((m.source, m.target) for m in moves) == [("9", "1"), ("9", "2")]


def test_the_budget_bounds_a_step_and_a_partition_bigger_than_it_moves_alone() -> None:
    parts = units({"1": 4}, size=10 * MB)
    assert len(next_moves(parts, ["1", "2"], frozenset(), 25 * MB)) == 2
    assert len(next_moves(parts, ["1", "2"], frozenset(), 5 * MB)) == 1  # else it would never move
    assert next_moves(parts, ["1", "2"], frozenset(), 0) == []


def test_the_budget_is_half_the_slack_at_the_measured_reload_rate() -> None:
    assert budget_bytes(2.0, rate=10 * MB) == 10 * MB  # hand-computed: 2 s x 0.5 x 10 MB/s
    assert budget_bytes(-1.0, rate=10 * MB) == 0 and budget_bytes(0.0, rate=10 * MB) == 0


def test_a_step_moves_at_most_twice_the_units_of_the_last_even_as_units_grow() -> None:
    # 2026-11-29's 1 GiB shrink: units of 48-117 MB, each a little larger than the one before it
    # (smallest first); with twice the last step's bytes as the cap every step moved one unit.
    # Capped by units, a step after one of 1 unit moves 2, after 2 moves 4, within the byte budget.
    grown = [Partition((0, i), "gone", (48 + i) * MB) for i in range(8)]
    assert max_units(0) is None and max_units(1) == 2 and max_units(2) == 4
    assert len(next_moves(grown, ["1", "2"], frozenset(), 10_000 * MB, most=max_units(1))) == 2
    assert len(next_moves(grown, ["1", "2"], frozenset(), 10_000 * MB, most=max_units(2))) == 4
    assert len(next_moves(grown, ["1", "2"], frozenset(), 10_000 * MB)) == 8  # no step yet: the bytes decide
    assert len(next_moves(grown, ["1", "2"], frozenset(), 100 * MB, most=4)) == 2  # 48 + 49 MB fit 100, 50 more do not


def test_an_unmeasured_rate_moves_one_unit() -> None:
    assert budget_bytes(5.0, rate=None) == 1 and budget_bytes(0.0, rate=None) == 0
    parts = units({"1": 4}, size=10 * MB)
    assert len(next_moves(parts, ["1", "2"], frozenset(), budget_bytes(5.0, rate=None))) == 1


def test_the_reload_rate_is_the_bytes_over_the_extra_time_after_the_step() -> None:
    # hand-computed: median before 1.0 s, worst after 3.0 s, so 2 s for 8 MB
    assert reload_rate(8 * MB, [1.0, 0.9, 1.2], [1.1, 3.0]) == 4 * MB
    assert reload_rate(8 * MB, [1.0, 1.0], [0.9, 1.0]) == 8 * MB / MIN_EXTRA_SECONDS  # no visible cost
    assert reload_rate(0, [1.0], [2.0]) is None and reload_rate(MB, [], [2.0]) is None and reload_rate(MB, [1.0], []) is None


def test_a_step_took_once_any_moved_unit_is_listed_on_its_target() -> None:
    parts = units({"1": 3, "2": 0})
    moves = next_moves(parts, ["1", "2"], frozenset(), 2 * MB)
    assert [m.target for m in moves] == ["2"]
    assert not took(moves, parts)  # the next batch ran the unit where it was: no reload happened
    assert took(moves, apply(parts, moves))
    assert not took([], parts)


def test_nothing_moves_when_balanced_or_nowhere_to_go() -> None:
    parts = units({"1": 2, "2": 3})
    assert next_moves(parts, ["1", "2"], frozenset(), UNLIMITED) == [] and balanced(parts, ["1", "2"])
    assert next_moves(parts, ["1", "2"], frozenset({"1", "2"}), UNLIMITED) == []


placements = st.dictionaries(st.sampled_from("abcdef"), st.integers(0, 12), min_size=1)
sizes = st.lists(st.integers(0, 50 * MB), min_size=80, max_size=80)


@given(placements, sizes, st.lists(st.sampled_from("abcdefgh"), min_size=1, max_size=6, unique=True),
       st.sets(st.sampled_from("abcdefgh")), st.integers(0, 100 * MB))
def test_steps_stay_within_budget_keep_every_partition_once_and_converge(
        placement: dict[str, int], size_list: list[int], executors: list[str], leaving: set[str], budget: int) -> None:
    parts = [Partition(p.unit, p.executor, size_list[i % len(size_list)]) for i, p in enumerate(units(placement))]
    staying = [e for e in executors if e not in leaving]
    for _ in range(200):
        moves = next_moves(parts, executors, frozenset(leaving), budget)
        if not moves:
            break
        assert sum(m.bytes for m in moves) <= budget or len(moves) == 1
        assert len({m.unit for m in moves}) == len(moves)  # never a unit twice in a step
        assert all(m.target in staying for m in moves)
        before = sorted(p.unit for p in parts)
        parts = apply(parts, moves)
        assert sorted(p.unit for p in parts) == before  # nothing dropped, nothing doubled
    else:
        raise AssertionError("the plan did not converge in 200 steps")
    if budget > 0 and staying:
        assert balanced(parts, executors, frozenset(leaving))
        counts = [spread(parts).get(e, 0) for e in staying]
        assert max(counts) - min(counts) <= 1 and not any(p.executor in leaving for p in parts)


def test_the_locality_wait_is_half_the_least_slack_of_any_query_while_units_are_pending() -> None:
    # three queries with 50 s, 4 s and 9 s of slack: every query's tasks wait alike, so the
    # tightest bounds it, at SLACK_SHARE (0.5) of its 4 s
    assert SLACK_SHARE == 0.5 and locality_wait(3, [50.0, 4.0, 9.0]) == 2.0
    assert locality_wait(0, [50.0, 4.0]) is None  # nothing to move: the application's own wait
    assert locality_wait(3, []) is None
    assert locality_wait(3, [50.0, -0.2]) is None  # a query over its SLA: no wait may be added
