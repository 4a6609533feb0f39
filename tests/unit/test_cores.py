"""`sluice.scheduler.cores` and the work fit: batches sharing a pool's cores, computed by hand."""

from __future__ import annotations

import pytest

from sluice.runtime.critical_path import BatchTimeline, StageSpan, critical_path, driver_seconds
from sluice.scheduler.cores import URGENT_WEIGHT, Cores, Job, fits
from sluice.scheduler.costs import WorkSample, fit_work


def test_two_one_thread_batches_on_one_core_each_run_at_half_speed() -> None:
    cores = Cores(1, 1, driver_shares=False)
    cores.start(0.0, Job("a", 0.0, 1.0, 1))
    cores.start(0.0, Job("b", 0.0, 1.0, 1))
    assert cores.next_end() == pytest.approx(2.0)
    assert cores.advance(1.9) == []
    assert sorted(j.key for j in cores.advance(2.0)) == ["a", "b"]
    assert cores.running == 0 and cores.next_end() is None


def test_a_batch_that_joins_later_slows_the_one_running() -> None:
    # a: 2 core-seconds from 0; b: 0.5 from 1. Alone a does 1 by t=1; then each runs at half a
    # core: b ends at 2, a has 0.5 left and ends alone at 2.5
    cores = Cores(1, 4, driver_shares=False)
    cores.start(0.0, Job("a", 0.0, 2.0, 1))
    cores.start(1.0, Job("b", 0.0, 0.5, 1))
    end = cores.next_end()
    assert end == pytest.approx(2.0)
    assert [j.key for j in cores.advance(end)] == ["b"]
    end = cores.next_end()
    assert end == pytest.approx(2.5)
    assert [j.key for j in cores.advance(end)] == ["a"]


def test_a_change_of_the_cores_left_speeds_up_the_work_from_then_on() -> None:
    # 1 core-second on 0.5 core until 1 s (0.5 done), then on 1 core: ends at 1.5 s
    cores = Cores(0.5, 1, driver_shares=False)
    cores.start(0.0, Job("a", 0.0, 1.0, 1))
    assert cores.next_end() == pytest.approx(2.0)
    cores.set_cores(1.0, 1.0)
    assert cores.next_end() == pytest.approx(1.5)
    cores.set_cores(1.25, 0.0)  # never no core: a tenth of one, 0.25 left takes 2.5 s
    assert cores.next_end() == pytest.approx(3.75)


def test_the_driver_shares_the_cores_only_on_a_local_master() -> None:
    # one core: a's driver work (1 s) beside b's task work (1 core-second)
    for shares, ends in ((True, 2.0), (False, 1.0)):
        cores = Cores(1, 1, driver_shares=shares)
        cores.start(0.0, Job("a", 1.0, 0.0, 1))
        cores.start(0.0, Job("b", 0.0, 1.0, 1))
        end = cores.next_end()
        assert end == pytest.approx(ends)
        assert sorted(j.key for j in cores.advance(end)) == ["a", "b"]


def test_a_batch_s_tasks_spread_over_the_cores_after_its_driver_phase() -> None:
    # 0.5 s on the driver, then 2 core-seconds over 2 tasks on 2 cores: 1 s more
    cores = Cores(2, 2, driver_shares=True)
    cores.start(0.0, Job("a", 0.5, 2.0, 2))
    assert cores.advance(0.5) == []  # the driver phase ends; the tasks begin
    end = cores.next_end()
    assert end == pytest.approx(1.5)
    assert [j.key for j in cores.advance(end)] == ["a"]


def test_a_task_holds_its_turn_through_its_time_off_the_cpu_which_takes_no_core() -> None:
    # bulk turns one at a time, two cores: 2 tasks of 0.1 CPU-seconds, each as long off the CPU
    # (hold 1): 0.2 s of turn each, one after the other: 0.4 s (0.2 s without the hold)
    for hold, end in ((1.0, 0.4), (0.0, 0.2)):
        cores = Cores(2, 4, driver_shares=False, bulk_slots=1)
        cores.start(0.0, Job("a", 0.0, 0.2, 2, hold=hold))
        assert ends(cores) == [("a", pytest.approx(end))]
    # one core: a (0.1 CPU-s, hold 1: weighs half a thread) beside b (0.1, never off the CPU): 1.5
    # threads on it, each at 1 / 1.5; b ends at 0.15 s, when a has done 0.1 of its 0.2 s of slot
    # time, the rest alone at full speed: 0.25 s (both at 0.2 s without the hold)
    cores = Cores(1, 2, driver_shares=False)
    cores.start(0.0, Job("a", 0.0, 0.1, 1, hold=1.0))
    cores.start(0.0, Job("b", 0.0, 0.1, 1))
    assert ends(cores) == [("b", pytest.approx(0.15)), ("a", pytest.approx(0.25))]


def ends(cores: Cores) -> list[tuple[str, float]]:
    """Every job's end, in order, with nothing else starting."""
    out = []
    while (end := cores.next_end()) is not None:
        out += [(job.key, round(end, 6)) for job in cores.advance(end)]
    return out


def test_an_urgent_batch_s_tasks_take_the_slots_first() -> None:
    # one slot, one core: bulk (4 core-seconds) from 0, urgent (1) from 1. Urgent takes the slot:
    # it ends at 2 while bulk waits (1 done by 1), bulk's other 3 end at 5. Without the band both
    # share the slot at half speed: the urgent one ends at 3, bulk (2 left there) at 5.
    for urgent, expected in ((True, [("u", 2.0), ("bulk", 5.0)]), (False, [("u", 3.0), ("bulk", 5.0)])):
        cores = Cores(1, 1, driver_shares=False)
        cores.start(0.0, Job("bulk", 0.0, 4.0, 1))
        cores.start(1.0, Job("u", 0.0, 1.0, 1, urgent=urgent))
        assert ends(cores) == expected


def test_urgent_tasks_beyond_the_slots_leave_none_to_the_others() -> None:
    # 2 slots, 4 cores: an urgent batch of 4 tasks (4 core-seconds) holds both slots for 2 s; the
    # other batch's task (1 core-second) then runs alone: 3
    cores = Cores(4, 2, driver_shares=False)
    cores.start(0.0, Job("bulk", 0.0, 1.0, 1))
    cores.start(0.0, Job("u", 0.0, 4.0, 4, urgent=True))
    assert ends(cores) == [("u", 2.0), ("bulk", 3.0)]


def close(got: list[tuple[str, float]], expected: list[tuple[str, float]]) -> bool:
    return [k for k, _ in got] == [k for k, _ in expected] and \
        all(t == pytest.approx(e, abs=1e-5) for (_, t), (_, e) in zip(got, expected, strict=True))


def test_with_priority_urgent_threads_weigh_more_on_the_cores() -> None:
    # one core, two slots: urgent (1 core-second) and bulk (2) from 0. With priority the urgent
    # thread weighs W (nice -5 against 0): it runs at W / (W + 1) and ends at (W + 1) / W; bulk,
    # 1 / W done by then, ends alone at 3. Without, each has half the core: urgent at 2, bulk at 3.
    w = URGENT_WEIGHT
    assert w == pytest.approx(3.0479, abs=1e-4)
    for priority, expected in ((True, [("u", (w + 1) / w), ("bulk", 3.0)]), (False, [("u", 2.0), ("bulk", 3.0)])):
        cores = Cores(1, 2, driver_shares=False, priority=priority)
        cores.start(0.0, Job("bulk", 0.0, 2.0, 1))
        cores.start(0.0, Job("u", 0.0, 1.0, 1, urgent=True))
        assert close(ends(cores), expected)


def test_with_priority_an_urgent_thread_takes_at_most_a_core_and_the_others_share_the_rest() -> None:
    # 1.5 cores, local master: an urgent task (1 core-second), a driver phase (0.25 s) and a bulk
    # task (1 core-second). Three threads weigh W + 2: the urgent one runs at 1.5 W / (W + 2)
    # (under a core), the driver and bulk at 1.5 / (W + 2); the driver ends at tA = 0.25 (W + 2) / 1.5.
    # Then two threads: the urgent one's weighted share is over a core, so it runs at 1 and bulk at
    # the 0.5 left: urgent (1 - 0.25 W left) ends at tA + 1 - 0.25 W; bulk (0.25 done at tA, then
    # half as fast) ends alone after: tA + (1 - 0.25 W) + 0.25 + 0.125 W
    w = URGENT_WEIGHT
    t_a = 0.25 * (w + 2) / 1.5
    cores = Cores(1.5, 2, driver_shares=True, priority=True)
    cores.start(0.0, Job("u", 0.0, 1.0, 1, urgent=True))
    cores.start(0.0, Job("d", 0.25, 0.0, 1))
    cores.start(0.0, Job("bulk", 0.0, 1.0, 1))
    assert close(ends(cores), [("d", t_a), ("u", t_a + 1 - 0.25 * w), ("bulk", t_a + 1 - 0.25 * w + 0.25 + 0.125 * w)])


def test_the_lane_s_bulk_turns_run_other_tasks_a_few_at_a_time() -> None:
    # 4 cores, 8 slots: a bulk batch of 4 tasks (4 core-seconds) runs 2 at a time with 2 bulk
    # slots (2 s), all 4 at once without (1 s); an urgent batch is not held by the turns
    for bulk, expected in ((2, 2.0), (None, 1.0)):
        cores = Cores(4, 8, driver_shares=False, bulk_slots=bulk)
        cores.start(0.0, Job("bulk", 0.0, 4.0, 4))
        assert close(ends(cores), [("bulk", expected)])
    cores = Cores(4, 8, driver_shares=False, bulk_slots=2)
    cores.start(0.0, Job("u", 0.0, 4.0, 4, urgent=True))
    assert close(ends(cores), [("u", 1.0)])


def test_tasks_beyond_spark_s_slots_wait_for_one() -> None:
    # 4 tasks, 4 core-seconds, 4 cores but 2 task slots: 2 run at a time, 2 s
    cores = Cores(4, 2, driver_shares=False)
    cores.start(0.0, Job("a", 0.0, 4.0, 4))
    assert cores.next_end() == pytest.approx(2.0)
    # 8 slots on 2 cores (the urgent lane's): all 4 run, each on half a core, 2 s too
    lane = Cores(2, 8, driver_shares=False)
    lane.start(0.0, Job("a", 0.0, 4.0, 4))
    assert lane.next_end() == pytest.approx(2.0)


def test_fits_says_when_no_thread_can_share_a_core() -> None:
    assert fits(2, 2, batches=2, widest=1)
    assert not fits(2, 2, batches=2, widest=2)
    assert not fits(2, 16, batches=4, widest=1)
    assert not fits(4, 2, batches=4, widest=1)


def test_work_fit_takes_the_quieter_driver_and_task_cpu_by_the_rows() -> None:
    # run time to CPU 2, 3, 1 and 4: the 25th percentile (nearest rank) is 2
    alike = [WorkSample(100, 0.1, 0.2, 0.4, 2), WorkSample(100, 0.3, 0.2, 0.6, 2), WorkSample(100, 0.2, 0.2, 0.2, 2),
             WorkSample(100, 0.5, 0.2, 0.8, 2)]
    work = fit_work(alike)
    assert work is not None
    assert work.driver == 0.2  # the 25th percentile of 0.1, 0.2, 0.3, 0.5 (nearest rank)
    assert (work.task_fixed, work.tasks, work.run_ratio) == (0.0, 2, 2.0)
    assert work.task_per_row == pytest.approx(0.002)
    assert "4 batches" in work.how and "200 ms" in work.how and "times 2.00" in work.how
    # as a status's costs carry it: milliseconds, microseconds a row
    assert work.figures() == {"driver_ms": 200.0, "task_cpu_ms": 0.0, "task_cpu_per_row_us": 2000.0, "tasks": 2,
                              "task_run_ratio": 2.0, "fit": work.how}
    spread = [WorkSample(rows, 0.1, 0.05 + 0.001 * rows, 0.5 * (0.05 + 0.001 * rows), 1) for rows in (100, 200, 400, 800)]
    line = fit_work(spread)
    assert line is not None
    assert line.task_fixed == pytest.approx(0.05) and line.task_per_row == pytest.approx(0.001)
    assert line.run_ratio == 1.0  # run time below CPU time (a rounding of Spark's) is no work taken away
    assert work.driver_cpu is None and "on the CPU" not in work.how  # no batch reported its driver's CPU
    assert fit_work(alike[:2]) is None  # fewer than 3 batches with task CPU
    # the driver's CPU (the JVM sink's stream-thread time): the median of the batches that have it
    timed = [alike[0]._replace(driver_cpu=None), alike[1]._replace(driver_cpu=0.04),
             alike[2]._replace(driver_cpu=0.02), alike[3]._replace(driver_cpu=0.03)]
    on_cpu = fit_work(timed)
    assert on_cpu is not None and on_cpu.driver_cpu == 0.03 and on_cpu.driver == 0.2
    assert "30 ms of it on the CPU (the median of 3)" in on_cpu.how
    assert on_cpu.figures() == {**work.figures(), "driver_cpu_ms": 30.0, "fit": on_cpu.how}
    assert fit_work([WorkSample(100, 0.1, 0.0, 0.1, 1)] * 5) is None  # no task CPU recorded
    # the run time's waits for a bulk turn (the simulation has the turns) are left out of the ratio:
    # (0.4 - 0.1), (0.6 - 0.3), (0.2 - 0), 0.8 (not seen) over 0.2: 1.5, 1.5, 1 and 4; the 25th percentile 1.5
    turns = [alike[0]._replace(turn_wait=0.1), alike[1]._replace(turn_wait=0.3), alike[2]._replace(turn_wait=0.0),
             alike[3]]
    waited = fit_work(turns)
    assert waited is not None and waited.run_ratio == pytest.approx(1.5)
    assert "run time, less its waits for a bulk turn, to CPU" in waited.how and "bulk turn" not in work.how


def test_a_batch_s_driver_seconds_leave_out_the_gate_the_stages_and_the_commit() -> None:
    # offsets 30 ms, planning 30 ms; the action 500 ms: gate 100 ms, a stage waiting 50 ms for a
    # core and running 200 ms, the driver the other 150 ms; commit 40 ms
    t = 1000.0
    batch = BatchTimeline({"latestOffset": 10, "getBatch": 0, "walCommit": 20, "queryPlanning": 30, "addBatch": 500,
                           "commitOffsets": 40, "triggerExecution": 600}, gate_wait=0.1,
                          stages=[StageSpan("filter", t, t + 0.05, t + 0.25)])
    assert driver_seconds(critical_path(batch)) == pytest.approx(0.03 + 0.03 + 0.15)
