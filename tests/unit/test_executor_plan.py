"""The pure scale-down planner: which executors go, when by force."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from sluice.runtime.executors import WARM_AFTER, ExecutorView, Step, parse_executors, plan, victims


def ex(id_: str, tasks: int = 0, added: float = 0.0, blocks: int = 0) -> ExecutorView:
    return ExecutorView(id_, tasks, added, blocks)


def test_idle_then_fewest_cached_blocks_then_newest() -> None:
    pool = [ex("old-idle", 0, 10.0), ex("busy", 3, 50.0), ex("new-idle", 0, 40.0), ex("cached", 0, 60.0, blocks=5)]
    assert victims(pool, 1) == ["new-idle"]
    assert victims(pool, 2) == ["new-idle", "old-idle"]
    assert victims(pool, 3) == ["new-idle", "old-idle", "cached"]
    assert victims(pool, 4)[-1] == "busy"
    assert victims(pool, 0) == [] and victims(pool, -1) == []


def test_within_the_grace_victims_are_asked_gracefully_and_after_it_they_go_by_force() -> None:
    pool = [ex("a", 2, 1.0), ex("b", 1, 2.0), ex("c", 0, 3.0)]
    # the idle one first; a busy victim is asked too, gracefully: Spark refuses it while it runs a task
    assert plan(pool, 1, frozenset(), since=100.0, now=105.0, grace=30.0) == Step(("c", "b"), False)
    graceful = plan(pool, 1, frozenset({"c"}), since=100.0, now=110.0, grace=30.0)
    assert not graceful.force and graceful.kill == ("b",)
    late = plan(pool, 1, frozenset({"c"}), since=100.0, now=130.0, grace=30.0)
    assert late.force and len(late.kill) == 1 and late.kill[0] in {"a", "b"}


def test_nothing_to_do_at_or_below_target_and_kills_under_way_count_as_gone() -> None:
    pool = [ex("a"), ex("b")]
    assert plan(pool, 2, frozenset(), 0.0, 100.0, 1.0) == Step()
    assert plan(pool, 5, frozenset(), 0.0, 100.0, 1.0) == Step()
    assert plan(pool, 1, frozenset({"a"}), 0.0, 100.0, 1.0) == Step()  # "a" is already going


def test_with_state_held_the_shrink_is_paced_one_executor_at_a_time() -> None:
    pool = [ex("a", 0, 1.0), ex("b", 0, 2.0), ex("c", 0, 3.0)]
    first = plan(pool, 1, frozenset(), since=0.0, now=1.0, grace=30.0, paced=True)
    assert first == Step(("c",), False)  # one, not two
    assert plan(pool, 1, frozenset({"c"}), 0.0, 2.0, 30.0, paced=True) == Step()  # the kill is under way
    gone = [e for e in pool if e.id != "c"]
    assert plan(gone, 1, frozenset(), 0.0, 3.0, 30.0, paced=True, settled=False) == Step()  # no batch since
    assert plan(gone, 1, frozenset(), 0.0, 4.0, 30.0, paced=True, settled=True) == Step(("b",), False)
    # the grace bounds the whole shrink: after it, the rest go together
    late = plan(pool, 1, frozenset(), 0.0, 31.0, 30.0, paced=True, settled=False)
    assert late.force and set(late.kill) == {"b", "c"}


executors = st.lists(
    st.builds(ExecutorView, st.uuids().map(str), st.integers(0, 4), st.floats(0, 1e6), st.integers(0, 3)),
    max_size=12, unique_by=lambda e: e.id,
)


@given(executors, st.integers(0, 12), st.floats(0, 100), st.floats(0, 100))
def test_never_more_than_the_surplus_and_never_by_force_before_the_grace(
    pool: list[ExecutorView], target: int, elapsed: float, grace: float
) -> None:
    step = plan(pool, target, frozenset(), since=0.0, now=elapsed, grace=grace)
    surplus = max(len(pool) - target, 0)
    assert len(step.kill) <= surplus and len(set(step.kill)) == len(step.kill)
    assert len(step.kill) == surplus and (step.force == (elapsed >= grace) or not surplus)
    idle = [e.id for e in pool if e.active_tasks == 0]
    assert set(step.kill[:len(idle)]) <= set(idle)  # idle victims are asked first


def test_parse_the_status_api_list() -> None:
    rows = [
        {"id": "driver", "isActive": True, "activeTasks": 0, "addTime": "2026-11-21T10:00:00.000GMT"},
        {"id": "1", "isActive": True, "activeTasks": 2, "addTime": "2026-11-21T10:00:05.500GMT", "rddBlocks": 3},
        {"id": "0", "isActive": False, "activeTasks": 0, "addTime": "2026-11-21T10:00:01.000GMT"},
    ]
    [one] = parse_executors(rows)
    assert one == ExecutorView("1", 2, 1795255205.5, 3)
    rows[1]["completedTasks"] = 5
    assert parse_executors(rows)[0].completed_tasks == 5


def test_a_new_executor_is_warm_once_it_ran_a_task_or_has_been_up_long_enough() -> None:
    fresh = ExecutorView("3", 1, added_at=100.0)  # running its first task: not done yet
    assert not fresh.warm(now=101.0)
    assert ExecutorView("3", 0, added_at=100.0, completed_tasks=1).warm(now=101.0)
    assert not fresh.warm(now=100.0 + WARM_AFTER - 0.1) and fresh.warm(now=100.0 + WARM_AFTER)


def test_with_state_moving_the_surplus_is_chosen_once_and_killed_only_when_it_holds_no_partition() -> None:
    from sluice.runtime.executors import plan_moving

    pool = [ex("a", 0, 1.0), ex("b", 0, 2.0), ex("c", 0, 3.0), ex("d", 0, 4.0)]
    leaving, step = plan_moving(pool, 2, frozenset(), frozenset(), {"a", "b", "c", "d"}, since=0.0, now=1.0, grace=30.0)
    assert leaving == {"d", "c"} and step == Step()  # both still hold state: move it first
    again, step = plan_moving(pool, 2, frozenset(), leaving, {"a", "b", "c"}, since=0.0, now=5.0, grace=30.0)
    assert again == leaving and step == Step(("d",), False)  # d is empty now: it goes, gracefully
    lower, _ = plan_moving(pool, 1, frozenset({"d"}), leaving, {"a", "b", "c"}, since=0.0, now=6.0, grace=30.0)
    assert lower == {"c", "b"}  # a lowered target tops the set up; the kill under way is not counted
    _, late = plan_moving(pool, 2, frozenset(), leaving, {"a", "b", "c", "d"}, since=0.0, now=31.0, grace=30.0)
    assert late.force and set(late.kill) == {"c", "d"}
    assert plan_moving(pool, 4, frozenset(), leaving, set(), 0.0, 1.0, 30.0) == (frozenset(), Step())  # no surplus
    # the grace counts from the last state moved: at 31 s a move at 20 s keeps the drain graceful
    # (the state is still leaving), and 30 s after that move with none since, the rest go by force
    _, moving = plan_moving(pool, 2, frozenset(), leaving, {"a", "b", "c", "d"}, since=0.0, now=31.0, grace=30.0,
                            moved_at=20.0)
    assert moving == Step()
    _, stalled = plan_moving(pool, 2, frozenset(), leaving, {"a", "b", "c", "d"}, since=0.0, now=50.0, grace=30.0,
                             moved_at=20.0)
    assert stalled.force and set(stalled.kill) == {"c", "d"}
    # a move from before the target changed does not shorten the grace
    _, early = plan_moving(pool, 2, frozenset(), leaving, {"a", "b", "c", "d"}, since=10.0, now=35.0, grace=30.0,
                           moved_at=2.0)
    assert early == Step()
