"""The driver's density limit (pure): predicted intervals, driver load, and admission refusing the
query a pool's driver cannot carry. Every figure below is computed by hand in its comment."""

from __future__ import annotations

from typing import Any

from sluice.api.manifest import load_query
from sluice.api.pool import StreamingPool
from sluice.api.query import StreamingQuery
from sluice.operator.admission import admit, batching, batchings
from sluice.scheduler.density import Batching, density_problem, driver_load, sla_interval


def _query(name: str = "q", sla: str = "2s", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "sluice.dev/v1alpha1", "kind": "StreamingQuery", "metadata": {"name": name, "namespace": "t"},
            "spec": {"pool": "p", "sla": {"latencyTarget": sla}, "pipeline": [{"filter": "value > 1"}],
                     "source": {"type": "rate", "rowsPerSecond": 10}, "sink": {"type": "noop"}, **spec}}


def _model(**kw: Any) -> StreamingQuery:
    return load_query(_query(**kw))


def _pool(cores: int) -> StreamingPool:
    return StreamingPool.model_validate({"metadata": {"name": "p"}, "spec": {"driver": {"cores": cores}}})


def test_a_query_is_predicted_to_batch_at_its_trigger_or_its_slas_interval() -> None:
    # 0.8 x 2 s - 150 ms fixed - 50 ms commit, no rows known: 1.4 s
    assert abs(sla_interval(2.0) - 1.4) < 1e-9
    # 0.8 x 5 min is far above the 60 s cap
    assert sla_interval(300.0) == 60.0
    # a window with a 10 s watermark delay waits two intervals, its delay and the emitting batch:
    # (24 - 10 - 0.2 - 0.2) / 2 = 6.8 s
    assert abs(sla_interval(30.0, delay=10.0) - 6.8) < 1e-9
    assert sla_interval(2.0, trigger=0.5) == 0.5
    assert sla_interval(2.0, trigger=0.0) == 0.2  # back to back: Spark's floor here


def test_driver_load_is_cpu_per_batch_over_interval() -> None:
    # 0.12 / 1.2 + 0.12 / 0.6 = 0.1 + 0.2; a Real-time query (0) adds nothing
    assert abs(driver_load([Batching("a", 1.2), Batching("b", 0.6), Batching("rt", 0.0)], 0.12) - 0.3) < 1e-9


def test_the_query_that_would_overfill_the_driver_is_refused_with_one_sentence() -> None:
    kept = [Batching(f"t/k{i}", 1.2) for i in range(8)]  # 8 x 0.1 = 0.8 cores
    assert density_problem("p", 1, kept, Batching("t/new", 1.2), 0.12) is None  # 0.9 <= 1
    problem = density_problem("p", 1, kept, Batching("t/new", 0.5), 0.12)  # 0.8 + 0.24 = 1.04 > 1
    assert problem is not None and problem.startswith("pool 'p' driver would need 1.04 cores") and "0.80" in problem
    assert "spec.driver.cores" in problem
    assert density_problem("p", 2, kept, Batching("t/new", 0.5), 0.12) is None  # a 2-core driver carries it
    assert density_problem("p", 1, kept * 4, Batching("t/rt", 0.0), 0.12) is None  # Real-time: no batches


def test_admission_counts_measured_intervals_and_refuses_past_the_driver() -> None:
    # measured intervals are read from status without parsing; a suspended query batches never
    bodies = [{**_query(f"k{i}"), "status": {"batchIntervalMs": 500}} for i in range(4)]
    bodies.append({**_query("paused", suspend=True)})
    kept = batchings(bodies)
    assert [b.interval for b in kept] == [0.5, 0.5, 0.5, 0.5, 0.0]
    # 4 x 0.12 / 0.5 = 0.96 cores; one more at a 2 s SLA (1.4 s) adds 0.086: over a 1-core driver
    refused = admit(_model(), _pool(1), 0, kept=kept)
    assert not refused.admitted and refused.reason == "DriverFull" and refused.retry
    assert refused.message.startswith("Pool 'p' driver would need 1.05 cores") and refused.message.endswith("(retrying).")
    assert admit(_model(), _pool(2), 0, kept=kept).admitted
    # its own measured interval counts once it runs: 60 s batches fit where 1.4 s ones do not
    assert admit(_model(), _pool(1), 0, kept=kept, status={"batchIntervalMs": 60000}).admitted
    assert batching(_model(trigger={"interval": "250ms"})).interval == 0.25
