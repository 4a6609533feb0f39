"""Executor targets on real Spark in local-cluster mode (a standalone master and workers in-process,
executors as real JVMs): the control API grows the application through requestTotalExecutors and
shrinks it by draining executors through the scheduler backend, while a stateful query keeps
running and loses nothing."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sluice.runtime.control import make_control_app
from sluice.runtime.executors import ExecutorScaler
from sluice.runtime.host import QueryHost
from sluice.scheduler.core import Scheduler
from sluice.scheduler.local import LocalScheduler
from sluice.scheduler.server import ServerThread
from sluice.testing.waiting import wait_for

from .test_control_api import call
from .test_runtime import files_source, iso, query, write_rows

pytestmark = [pytest.mark.spark, pytest.mark.slow]
TOKEN = "s3cret-token"


@pytest.fixture
def api(cluster_spark: Any, tmp_path: Path) -> Iterator[tuple[str, QueryHost, ExecutorScaler]]:
    host = QueryHost(cluster_spark, tmp_path / "ck", LocalScheduler(Scheduler("cameo", capacity=2)))
    scaler = ExecutorScaler(cluster_spark, grace=40.0, interval=0.25, stateful=host.stateful_batches)
    server = ServerThread(make_control_app(host, TOKEN, executors=scaler)).start()
    try:
        yield server.url, host, scaler
    finally:
        server.stop()
        host.stop_all()


@pytest.fixture
def moving(cluster_spark: Any, tmp_path: Path) -> Iterator[tuple[str, QueryHost, ExecutorScaler]]:
    """As `api`, with state partitions moved between batches (Megaphone)."""
    host = QueryHost(cluster_spark, tmp_path / "ck", LocalScheduler(Scheduler("cameo", capacity=2)))
    scaler = ExecutorScaler.for_host(host, grace=60.0, interval=0.25)
    server = ServerThread(make_control_app(host, TOKEN, executors=scaler)).start()
    try:
        yield server.url, host, scaler
    finally:
        server.stop()
        host.stop_all()


def executors(url: str) -> dict[str, Any]:
    code, body = call(f"{url}/v1/executors", "GET", token=TOKEN)
    assert code == 200, body
    return body


def has_executors(url: str, count: int) -> bool:
    """Whether the application runs `count` executors; a 503 while Spark's status API first
    answers (a new application in a JVM that ran another: over the API's 5 s in this test
    module's order, with or without this session's changes) is not yet."""
    code, body = call(f"{url}/v1/executors", "GET", token=TOKEN)
    assert code in (200, 503), body
    return code == 200 and body["current"] == count


def test_scale_down_drains_paced_by_batches_and_scale_up_adds_while_a_stateful_query_runs(api: Any, tmp_path: Path) -> None:
    url, host, _ = api
    wait_for(lambda: has_executors(url, 3), timeout=90, what="the three starting executors")
    data = tmp_path / "in"
    counts = host.add(query("counts", "t", files_source(data), [{"groupBy": ["user"]}, {"aggregate": [{"fn": "count", "name": "n"}]}]))
    written = 0

    def write(round_: int) -> None:
        nonlocal written
        rows = [{"id": written + i, "user": f"u{i % 3}", "amount": 1.0, "produced_at": iso(time.time())} for i in range(30)]
        write_rows(data, f"r{round_}.json", rows)
        written += len(rows)

    def latest() -> dict[str, int]:
        out: dict[str, int] = {}
        for row in counts.memory:  # update mode: each batch carries the changed groups' new counts
            out[row["user"]] = row["n"]
        return out

    write(0)
    wait_for(lambda: sum(latest().values()) == written, what="the first round's counts")

    # shrink to one while state is held: one idle executor at a time, the next only after a batch
    code, body = call(f"{url}/v1/executors", "PUT", {"target": 1}, token=TOKEN)
    assert code == 202 and body["target"] == 1
    started = time.monotonic()
    wait_for(lambda: executors(url)["current"] == 2, timeout=60, what="the first executor to go")
    first_step = time.monotonic() - started
    batches = counts.batches
    time.sleep(3)  # no batch has committed since: the second executor stays
    state = executors(url)
    assert state["current"] == 2 and len(state["removed"]) == 1 and counts.batches == batches
    write(1)  # a batch commits (and reloads the moved state) ...
    wait_for(lambda: executors(url)["current"] == 1, timeout=60, what="the second executor to go after a batch")
    assert counts.batches > batches
    state = executors(url)
    assert state["target"] == 1 and len(state["removed"]) == 2 and state["removing"] == []
    removed = set(state["removed"])
    assert not removed & {e["id"] for e in state["executors"]}
    wait_for(lambda: sum(latest().values()) == written, what="counts after the shrink")
    time.sleep(3)  # the lowered request stands: nothing replaces the removed executors
    assert executors(url)["current"] == 1

    # grow back to two: the cluster manager starts a new executor
    code, _ = call(f"{url}/v1/executors", "PUT", {"target": 2}, token=TOKEN)
    assert code == 202
    wait_for(lambda: executors(url)["current"] == 2, timeout=60, what="a new executor")
    ids = {e["id"] for e in executors(url)["executors"]}
    assert not removed & ids and len(ids) == 2
    write(2)
    wait_for(lambda: sum(latest().values()) == written, what="counts after the growth")

    # the state survived both changes: every row counted exactly once per user
    assert latest() == {f"u{k}": sum(1 for i in range(written) if (i % 30) % 3 == k) for k in range(3)}
    assert counts.phase == "Running" and not counts.message
    print(f"first executor gone after {first_step:.1f}s")


def test_after_the_grace_a_busy_executor_is_killed_by_force_and_its_tasks_rerun(api: Any, cluster_spark: Any) -> None:
    url, _, scaler = api

    def slow_partition(rows: Any) -> Any:  # nested, so it is shipped by value to the executors
        import time as t

        t.sleep(6)
        return [sum(rows)]

    code, _ = call(f"{url}/v1/executors", "PUT", {"target": 2}, token=TOKEN)
    assert code == 202
    wait_for(lambda: executors(url)["current"] == 2, timeout=60, what="two executors")
    result: list[int] = []
    job = threading.Thread(target=lambda: result.extend(
        cluster_spark.sparkContext.parallelize(range(100), 2).mapPartitions(slow_partition).collect()))
    job.start()
    wait_for(lambda: all(e["activeTasks"] > 0 for e in executors(url)["executors"]), timeout=30, what="both executors busy")
    scaler.grace = 1.0
    code, _ = call(f"{url}/v1/executors", "PUT", {"target": 1}, token=TOKEN)
    assert code == 202
    wait_for(lambda: len(executors(url)["removed"]) == 1, timeout=5, what="a forced kill after the grace")
    assert job.is_alive()  # the kill came while the tasks were still running
    job.join(timeout=60)
    assert sum(result) == sum(range(100))  # the lost task ran again on the executor that stayed
    wait_for(lambda: executors(url)["current"] == 1, timeout=30, what="one executor")


def test_the_removal_internals_still_exist(cluster_spark: Any) -> None:
    """Spark's scheduler backend calls the scaler removes executors with (py4j): a Spark upgrade
    that renames or retypes them fails here, by name, not as a shrink that never happens."""
    from sluice.runtime.executors import decommission, kill

    assert cluster_spark.sparkContext.getConf().get("spark.decommission.enabled") == "true"
    assert decommission(cluster_spark, [], "a check") == [] and kill(cluster_spark, [], force=False) == []
    assert decommission(cluster_spark, ["no-such-executor"], "a check") == []  # Spark skips unknown executors


def test_a_warm_up_job_runs_every_task_on_the_executor_it_names(api: Any, cluster_spark: Any) -> None:
    """`executor_warmup` (py4j: Scala's makeRDD with location preferences, and Spark's location tag
    for an executor): every task of the job runs on the named executor, none elsewhere. A Spark
    upgrade that changes the call fails by name; one that changes the tag spreads the tasks."""
    from sluice.runtime import executor_warmup

    url, _, scaler = api
    assert call(f"{url}/v1/executors", "PUT", {"target": 2}, token=TOKEN)[0] == 202
    wait_for(lambda: len(scaler.executors()) == 2, timeout=90, what="two executors (none leaving)")
    before = {e.id: e for e in scaler.executors()}
    target = sorted(before)[-1]
    assert executor_warmup.run_on(cluster_spark, before[target].host, target) == executor_warmup.TASKS

    def done() -> dict[str, int]:
        return {e.id: e.completed_tasks - before[e.id].completed_tasks for e in scaler.executors() if e.id in before}

    wait_for(lambda: sum(done().values()) == executor_warmup.TASKS, timeout=10, what="the status API to count the tasks")
    assert done() == {e: executor_warmup.TASKS if e == target else 0 for e in before}


def test_the_locality_wait_is_read_live_so_a_raised_one_keeps_tasks_on_the_executor_they_prefer(
        api: Any, cluster_spark: Any) -> None:
    """`locality.Hold` (py4j: SparkContext's live SparkConf, read by every new TaskSetManager): with
    no wait, tasks that prefer one executor spread to the others' free cores (how moved state went
    back to leaving executors); held at 60 s, every one waits for its executor; released, the
    application's own settings come back. A Spark upgrade that stops reading the live conf fails
    the held half (or, if it ignores the wait, the unheld one)."""
    from sluice.runtime import executor_warmup, locality

    _, _, scaler = api
    wait_for(lambda: len(scaler.executors()) >= 2, timeout=90, what="two executors")
    conf = cluster_spark.sparkContext._jsc.sc().conf()
    own = {key: (str(conf.get(key)) if conf.contains(key) else None) for key in locality.KEYS}
    own_ms = locality.wait_ms(cluster_spark)
    tasks = 24

    def ran_on() -> tuple[str, dict[str, int]]:
        """The executor the job's tasks prefer, and how many each executor ran."""
        before = {e.id: e for e in scaler.executors()}
        target = sorted(before)[-1]
        assert executor_warmup.run_on(cluster_spark, before[target].host, target, tasks) == tasks

        def done() -> dict[str, int]:
            return {e.id: e.completed_tasks - before[e.id].completed_tasks for e in scaler.executors() if e.id in before}

        wait_for(lambda: sum(done().values()) == tasks, timeout=10, what="the status API to count the tasks")
        return target, {e: n for e, n in done().items() if n}

    hold = locality.Hold(cluster_spark)
    try:
        for key in locality.KEYS:
            conf.set(key, "0ms")
        target, spread = ran_on()
        assert len(spread) >= 2 and spread.get(target, 0) < tasks, spread  # others' free cores took some
        hold.raise_to(60.0)
        assert locality.wait_ms(cluster_spark) == {key: 60_000 for key in locality.KEYS}
        target, held = ran_on()
        assert held == {target: tasks}
    finally:
        hold.release()
        for key, value in own.items():
            conf.remove(key) if value is None else conf.set(key, value)
    assert hold.seconds is None and locality.wait_ms(cluster_spark) == own_ms


def test_bad_targets_get_one_sentence(api: Any) -> None:
    url, _, _ = api
    code, body = call(f"{url}/v1/executors", "PUT", {"target": "two"}, token=TOKEN)
    assert code == 400 and "whole number" in body["error"]
    code, body = call(f"{url}/v1/executors", "PUT", b"{", token=TOKEN)
    assert code == 400 and "body" in body["error"]
    assert call(f"{url}/v1/executors", "GET", token=None)[0] == 401


def test_state_partitions_move_off_a_leaving_executor_and_onto_a_new_one(moving: Any, tmp_path: Path) -> None:
    """Megaphone on Spark: a shrink moves the victim's state partitions to the staying executors
    before it kills the victim (empty); a grow moves partitions onto the new executor until state
    is balanced. A moved partition's location stays where the planner put it across later batches
    (a task run elsewhere would report its own executor). Counts are exact throughout."""
    url, host, scaler = moving
    assert call(f"{url}/v1/executors", "PUT", {"target": 3}, token=TOKEN)[0] == 202  # an earlier test may have left fewer
    wait_for(lambda: has_executors(url, 3), timeout=90, what="three executors")
    data = tmp_path / "in"
    spec = query("moved", "t", files_source(data), [{"groupBy": ["user"]}, {"aggregate": [{"fn": "count", "name": "n"}]}],
                 sla="30s")
    spec.spec.resources.shufflePartitions = 6
    counts = host.add(spec)
    written = 0
    stop = threading.Event()

    def writer() -> None:
        nonlocal written
        round_ = 0
        while not stop.is_set():
            rows = [{"id": written + i, "user": f"u{i % 12}", "amount": 1.0, "produced_at": iso(time.time())} for i in range(24)]
            write_rows(data, f"r{round_}.json", rows)
            written += len(rows)
            round_ += 1
            stop.wait(0.7)

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    try:
        def placement() -> dict[str, int]:
            return dict(executors(url)["placement"].get("t/moved", {}))

        wait_for(lambda: sum(placement().values()) == 6, timeout=90, what="all six state partitions listed")

        # shrink: the victim is chosen, its partitions move off, then it is killed empty
        assert call(f"{url}/v1/executors", "PUT", {"target": 2}, token=TOKEN)[0] == 202
        wait_for(lambda: executors(url)["current"] == 2, timeout=90, what="the victim to go")
        state = executors(url)
        (victim,) = state["removed"]
        assert state["stateMoves"] >= 1
        batches = counts.batches
        wait_for(lambda: counts.batches >= batches + 3, timeout=60, what="three batches after the kill")
        after = placement()
        assert victim not in after and sorted(after.values()) == [3, 3], after  # balanced on the two left

        # grow: the new executor gets its share of the partitions within a few batches
        assert call(f"{url}/v1/executors", "PUT", {"target": 3}, token=TOKEN)[0] == 202
        wait_for(lambda: executors(url)["current"] == 3, timeout=90, what="a new executor")
        new = ({e["id"] for e in executors(url)["executors"]} - set(after)).pop()
        wait_for(lambda: scaler.warm_ups.get(new) is not None, timeout=30, what="the new executor's warm-up job")
        batches = counts.batches
        wait_for(lambda: placement().get(new) == 2, timeout=90, what="two partitions on the new executor")
        grown = placement()
        settled_at = counts.batches
        wait_for(lambda: counts.batches >= settled_at + 3, timeout=60, what="three batches after the moves")
        assert placement() == grown and sorted(grown.values()) == [2, 2, 2], grown  # stayed where moved
        assert counts.batches - batches <= 10 + 3
    finally:
        stop.set()
        thread.join()

    def latest() -> dict[str, int]:
        out: dict[str, int] = {}
        for row in counts.memory:
            out[row["user"]] = row["n"]
        return out

    wait_for(lambda: sum(latest().values()) == written, timeout=60, what="every row counted")
    assert latest() == {f"u{k}": sum(1 for i in range(written) if (i % 24) % 12 == k) for k in range(12)}
    assert counts.phase == "Running" and not counts.message
