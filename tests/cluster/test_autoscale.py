"""The whole DS2 loop on real parts: the operator (kopf, in-process, real apiserver) reads a real
runtime's measurements over its control API, decides, and the runtime really adds and removes
executors. The runtime runs Spark in local-cluster mode (standalone master and three one-core
workers in the test's JVM, executors as separate JVMs); pods never run here (no kubelet), so the
pool's `sluice.dev/runtime-url` points the operator at that runtime on loopback."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sluice.testing.controlplane import ControlPlane, free_port
from sluice.testing.waiting import wait_for

from .test_operator import World, condition, open_world, pool, query

pytestmark = [pytest.mark.cluster, pytest.mark.spark, pytest.mark.slow]


@pytest.fixture(scope="module")
def elastic(crds_installed: ControlPlane, cluster_spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    with open_world(crds_installed, cluster_spark, Path(tmp_path_factory.mktemp("ck"))) as world:
        yield world


def status(world: World) -> dict[str, Any]:
    return dict(((world.get("sp", "elastic") or {}).get("status")) or {})


def decision_to(world: World, executors: int, what: str) -> dict[str, Any]:
    return wait_for(lambda: (d := status(world).get("lastScalingDecision")) and d["toExecutors"] == executors and d,
                    timeout=60, what=what)


def running(world: World, executors: int, what: str) -> None:
    wait_for(lambda: status(world).get("executors") == {"current": executors, "target": executors}, timeout=90, what=what)


def at_target(world: World, what: str) -> dict[str, Any]:
    return wait_for(lambda: (c := condition(world.get("sp", "elastic"), "Scaled")) and c["reason"] == "AtTarget" and c,
                    timeout=30, what=what)


def test_ds2_grows_and_shrinks_a_real_application(elastic: World) -> None:
    world = elastic
    port = free_port()
    quick = {"stabilizationWindow": "0s", "scaleDownDelay": "0s"}
    world.apply(pool("elastic", port, minExecutors=1, maxExecutors=2, autoscaling=quick))
    world.serve_pool_runtime("elastic", port)
    # a 2 s trigger: few batches, so the measured demand (task overhead included) fits one executor
    # at the default utilization; at 500 ms it measured 0.5-0.8 cores, too close to 0.7 to rely on
    world.apply(query("steady", "team-a", pool_name="elastic", trigger={"interval": "2s"}))
    # the application started with three executors; the pool asks for its size (1) and the runtime drains two
    running(world, 1, "one executor")
    # DS2 reads a query's batches from `RATES_WARMUP` (this tier's 15 s, test_operator.py) after its first with rows on
    wait_for(lambda: (h := world.host.queries.get("team-a/steady")) and h.measured_load().batches >= 2,
             timeout=150, what="the query's load measured")

    # the same load now needs more than the pool allows
    world.apply(pool("elastic", port, minExecutors=1, maxExecutors=2, autoscaling={**quick, "utilization": 0.0001}))
    grown = decision_to(world, 2, "DS2 deciding to grow")
    assert grown["fromExecutors"] == 1 and "capped at maxExecutors 2" in grown["reason"]
    running(world, 2, "a second executor started by Spark")
    at = at_target(world, "Scaled AtTarget at two")
    assert "2 of 2 executors running; DS2:" in at["message"]

    world.apply(pool("elastic", port, minExecutors=1, maxExecutors=2, autoscaling=quick))
    shrunk = decision_to(world, 1, "DS2 deciding to shrink at the default utilization")
    assert shrunk["fromExecutors"] == 2 and "shrinking from 2" in shrunk["reason"]
    running(world, 1, "the surplus executor drained")
    scaled = at_target(world, "Scaled AtTarget")
    assert scaled["status"] == "True" and "1 of 1 executors running" in scaled["message"]
    hosted = world.host.queries["team-a/steady"]
    before = hosted.batches
    wait_for(lambda: hosted.batches > before, what="the query still committing batches")
    assert hosted.phase == "Running"


def test_the_pool_status_shows_where_state_partitions_run_and_the_moves(elastic: World) -> None:
    """After DS2's test the pool runs one executor; a stateful query's six state partitions sit
    there. Fixed at two executors, the runtime moves three onto the new one, and the pool's status
    (written by the operator from GET /v1/executors) shows the placement and the moves."""
    world = elastic
    port = int(world.get("sp", "elastic")["metadata"]["annotations"]["sluice.dev/runtime-url"].rsplit(":", 1)[1])  # type: ignore[index]
    world.apply(query("counted", "team-a", pool_name="elastic", sla="30s", trigger={"interval": "1s"},
                      pipeline=[{"select": ["value % 40 AS k"]}, {"groupBy": ["k"]}, {"aggregate": [{"fn": "count"}]}],
                      resources={"shufflePartitions": 6}))
    wait_for(lambda: sum(((status(world).get("state") or {}).get("placement") or {}).values()) == 6, timeout=120,
             what="six state partitions in the pool's status")
    world.apply(pool("elastic", port, minExecutors=1, maxExecutors=2, executors=2))
    running(world, 2, "two executors")
    state = wait_for(lambda: (s := status(world).get("state")) and sorted(v for v in s["placement"].values() if v) == [3, 3]
                     and s, timeout=120, what="the partitions spread three and three")
    assert state["moves"] >= 3 and state["movedBytes"] > 0 and state["pendingMoves"] == 0
    world.plane.kubectl("delete", "sq", "counted", "-n", "team-a", "--wait=false")


def test_the_slas_raise_ds2_s_count_and_the_status_says_which_bound_decided(elastic: World) -> None:
    """Six critical filters with a 1 s trigger make a fraction of a core of work, so DS2 alone
    sizes the pool at one one-core executor. But their batches start together every second and
    each holds a slot for its cost c (fixed cost plus offset commit, measured here first): with an
    SLA of 1 s + 3.5 c, two slots keep it (the last of three rounds of batches waits 2c) and one
    does not (the last waits 5c). The operator simulates the pool from the runtime's measured costs
    and grows it past DS2's count, naming the SLAs as the bound. Two executors, as the first test
    here: Spark starts a third executor on this machine's local-cluster only some of the time
    after the earlier tests' drains (a full run once waited 120 s for it)."""
    world = elastic
    for leftover in ("steady", "counted"):  # the earlier tests' queries and pool, off the shared runtime
        world.plane.kubectl("delete", "sq", leftover, "-n", "team-a", "--ignore-not-found", "--wait=true", "--timeout=60s")
    world.plane.kubectl("delete", "sp", "elastic", "--ignore-not-found", "--wait=true", "--timeout=60s")
    port = free_port()
    world.apply(pool("tight", port, minExecutors=1, maxExecutors=2, executors=1))
    world.serve_pool_runtime("tight", port)

    def tight(sla_ms: int) -> None:
        for i in range(6):
            manifest = query(f"tight-{i}", "team-b", pool_name="tight", trigger={"interval": "1s"})
            manifest["spec"]["sla"] = {"latencyTarget": f"{sla_ms}ms", "critical": True}
            world.apply(manifest)

    def costs() -> list[float] | None:  # a batch's hold on its slot: its cost (20 rows) and its commit
        found = [s.costs for k, s in world.host.statuses().items() if k.startswith("team-b/")]
        return ([c.fixed_ms + c.per_row_us * 20 / 1000 + c.commit_ms for c in found if c is not None]
                if len(found) == 6 and all(found) else None)

    def pool_status() -> dict[str, Any]:
        return dict(((world.get("sp", "tight") or {}).get("status")) or {})

    tight(10_000)  # loose while their costs are measured on the one executor
    wait_for(lambda: pool_status().get("executors") == {"current": 1, "target": 1}, timeout=90, what="one executor")
    measured = wait_for(costs, timeout=120, every=1, what="the six queries' batch costs measured")
    cost = max(measured)
    tight(round(1000 + 3.5 * cost))
    world.apply(pool("tight", port, minExecutors=1, maxExecutors=2,
                     autoscaling={"stabilizationWindow": "0s", "scaleDownDelay": "10m"}))
    try:
        decided = wait_for(lambda: (d := pool_status().get("lastScalingDecision")) and d.get("bound") == "slas" and d,
                           timeout=180, every=1, what="a scaling decision the SLAs made")
    except AssertionError as error:
        raise AssertionError(f"{error} (cost {cost:.0f} ms); the pool's autoscaling status: "
                             f"{pool_status().get('autoscaling')}") from None
    found = re.search(r"that is (\d+) executors? of 1 core; the SLAs need more, so they decide: the simulated schedule "
                      r"(keeps every SLA at (\d+) executor|misses an SLA even at maxExecutors 2)", decided["reason"])
    assert found is not None, decided["reason"]
    by_rates = int(found.group(1))
    assert decided["toExecutors"] > by_rates, decided  # N + k: the SLAs' count, above DS2's
    autoscaling = pool_status()["autoscaling"]
    assert autoscaling["recommendation"]["bound"] == "slas"
    # what the sizing cost this sync: six queries, well below the sync interval
    assert isinstance(autoscaling.get("slaSizingMs"), int) and 0 <= autoscaling["slaSizingMs"] < 15_000, autoscaling
    try:
        # a later sync may grow it further (costs measured on more executors differ), never below
        wait_for(lambda: (e := pool_status().get("executors") or {}).get("current") == e.get("target")
                 and e["target"] >= decided["toExecutors"], timeout=120, what="the executors the SLAs need, started by Spark")
    except AssertionError as error:
        raise AssertionError(f"{error}; the pool's status: {pool_status()}") from None
    # the condition carries each sync's reasoning: DS2's alone while a re-registered query has
    # fewer than 3 measured batches, the SLAs' once all are measured
    wait_for(lambda: (c := condition(world.get("sp", "tight"), "Scaled")) and c["reason"] == "AtTarget"
             and "executors running; DS2 and the SLAs:" in c["message"], timeout=90,
             what="Scaled AtTarget, the SLAs deciding")
    for i in range(6):
        world.plane.kubectl("delete", "sq", f"tight-{i}", "-n", "team-b", "--wait=false")
