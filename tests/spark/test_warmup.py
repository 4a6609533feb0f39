"""Warm before work on real Spark in local-cluster mode (executors as JVMs of their own): an
executor that joins runs the bulk bands' tasks at once and no urgent band's task until it is warm
(`Warmup.java`), and the Spark internals that keeps it so still exist."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sluice.api.constants import BANDS, WARMUP_CONF
from sluice.runtime import jvm_sink
from sluice.runtime.executors import ExecutorScaler
from sluice.scheduler.bands import band_name, urgent_bands
from sluice.testing.waiting import wait_for

pytestmark = [pytest.mark.spark, pytest.mark.slow]
BOUND = 30.0
"""The warm-up bound these executors run with (`spark.sluice.warmup.maxSeconds`); the task
count they would need first is out of reach, so the bound alone makes them warm."""


@pytest.fixture(scope="module")
def laned(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A local-cluster session with the urgent lane (two one-core executors)."""
    from sluice.runtime.runner import stop_session
    from sluice.runtime.session import SessionConfig, build_session

    stop_session()
    session = build_session(SessionConfig(
        master="local-cluster[2,1,1024]", workdir=Path(tmp_path_factory.mktemp("warmup")), urgent_lane=True,
        extra={WARMUP_CONF: str(BOUND), "spark.sluice.warmup.minTasks": "1000000"},
    ))
    if not jvm_sink.loaded(session):
        pytest.fail("Sluice's sink jar is not on the class path: the warm-up lives in it")
    yield session
    session.stop()


def ran_on(spark: Any, pool: str, tasks: int = 12) -> set[str]:
    """The executors whose JVMs ran the tasks of a `tasks`-task job in FAIR pool `pool`."""
    sc = spark.sparkContext
    sc.setLocalProperty("spark.scheduler.pool", pool)
    try:
        rows = (spark.range(0, tasks * 4, 1, tasks)
                .selectExpr("reflect('dev.sluice.sink.Warmup', 'executorOf', id) AS executor")
                .distinct().collect())
    finally:
        sc.setLocalProperty("spark.scheduler.pool", None)
    return {row.executor for row in rows}


def test_the_scheduler_internals_the_warm_up_uses_still_exist(laned: Any) -> None:
    """`Warmup.check` looks up every Spark internal the warm-up touches (a task set's exclude list
    and its private set of excluded executors, Pool's hooks): a Spark upgrade that moves one
    fails here by name, not as urgent tasks quietly landing on cold executors."""
    assert laned.sparkContext._jvm.dev.sluice.sink.Warmup.check() == ""
    assert laned.sparkContext.getConf().get("spark.excludeOnFailure.taskAndStage.enabled") == "true"


def test_the_warm_rule_waits_for_quiet_compilers_after_enough_tasks_or_for_the_bound(laned: Any) -> None:
    rule = laned.sparkContext._jvm.dev.sluice.sink.Warmup.warmWhy
    assert rule(10.0, 20, 0.05, 60.0, 16).startswith("compilers quiet")
    assert rule(10.0, 20, 0.50, 60.0, 16) is None  # still compiling
    assert rule(10.0, 3, 0.01, 60.0, 16) is None  # quiet, but too few tasks yet
    assert rule(3.0, 20, 0.01, 60.0, 16) is None  # not a whole window yet
    assert rule(60.0, 3, 0.50, 60.0, 16).startswith("the 60 s bound")


@pytest.mark.extended  # the node tier's joining executor pod asserts the same from Spark's listener, on pods
def test_a_joining_executor_takes_bulk_tasks_at_once_and_urgent_ones_only_once_warm(laned: Any) -> None:
    urgent, bulk = band_name(0), band_name(BANDS - 1)
    assert urgent_bands(BANDS) >= 1 and bulk != urgent
    wait_for(lambda: set(jvm_sink.warmth(laned).executors.values()) == {"warm"}
             and len(jvm_sink.warmth(laned).executors) == 2, timeout=BOUND + 90, what="both first executors warm")
    first = set(jvm_sink.warmth(laned).executors)
    assert ran_on(laned, urgent) == first  # warm executors take urgent tasks

    scaler = ExecutorScaler(laned, grace=5.0, interval=0.25, paced=False)
    try:
        scaler.set_target(1)
        wait_for(lambda: len(jvm_sink.warmth(laned).executors) == 1, timeout=90, what="one executor left")
        scaler.set_target(2)
        joined = wait_for(lambda: set(jvm_sink.warmth(laned).executors) - first, timeout=90, what="a new executor")
    finally:
        scaler.stop()
    (new,) = joined
    assert jvm_sink.warmth(laned).executors[new] == "cold"
    wait_for(lambda: {e.id: e.warm for e in scaler.state().executors}.get(new) is False, timeout=15,
             what="GET /v1/executors to list the new executor as not warm")

    urgent_ran = ran_on(laned, urgent)
    bulk_ran = ran_on(laned, bulk)
    assert jvm_sink.warmth(laned).executors[new] == "cold", "the executor warmed up before the check ended"
    assert new not in urgent_ran and urgent_ran  # the urgent band's tasks all ran on the warm one
    assert new in bulk_ran  # the bulk band's tasks warm the new one meanwhile

    wait_for(lambda: jvm_sink.warmth(laned).executors.get(new) == "warm", timeout=BOUND + 30, what="the new one warm")
    assert new in ran_on(laned, urgent)  # once warm, it takes urgent tasks too
    listed = {e.id: e for e in scaler.state().executors}
    assert listed[new].warm is True and listed[new].warmAt is not None
    states = [line.split(" ", 3)[2:] for line in jvm_sink.warmth(laned).events if line.split(" ")[1] == new]
    assert [state[0] for state in states] == ["cold", "warm"] and "bound" in states[1][1]
    assert jvm_sink.warmth(laned).trouble == ""
