"""SnailTrail on a micro-batch (pure): the critical path through a batch's phases and stages."""

from __future__ import annotations

import pytest

from sluice.runtime.critical_path import BatchTimeline, StageSpan, bottleneck, critical_path, shares


def batch() -> BatchTimeline:
    # two parallel scans (a is short, b long), then an aggregation after b; then a final job's stage
    stages = [
        StageSpan("scan a", submitted=100.00, first_task=100.00, completed=100.10),
        StageSpan("scan b", submitted=100.00, first_task=100.05, completed=100.40),
        StageSpan("aggregate", submitted=100.45, first_task=100.60, completed=100.90),
        StageSpan("collect", submitted=100.95, first_task=100.95, completed=101.00),
    ]
    durations = {"latestOffset": 20, "getBatch": 5, "walCommit": 25, "queryPlanning": 50, "addBatch": 1300,
                 "commitOffsets": 30, "triggerExecution": 1450}
    return BatchTimeline(durations, gate_wait=0.2, stages=stages)


def test_the_path_takes_the_stage_that_finished_last_before_each_start() -> None:
    path: dict[str, float] = {}
    for label, seconds in critical_path(batch()):
        path[label] = path.get(label, 0.0) + seconds
    assert "stage scan a" not in path  # finished early: off the path
    assert path["stage scan b"] == pytest.approx(0.35)
    assert path["waiting for cores"] == pytest.approx(0.05 + 0.15)
    assert path["stage aggregate"] == pytest.approx(0.30) and path["stage collect"] == pytest.approx(0.05)
    assert path["gate wait"] == pytest.approx(0.2)
    # the action's remainder is driver time; offsets, planning and commit come from Spark's durations
    assert path["driver"] == pytest.approx(1.3 - 0.2 - (0.05 + 0.35 + 0.15 + 0.30 + 0.05))
    assert path["offsets"] == pytest.approx(0.05) and path["planning"] == pytest.approx(0.05)
    assert path["commit"] == pytest.approx(0.03)
    assert sum(path.values()) == pytest.approx(1.45)  # the whole trigger, nothing double-counted


def test_shares_and_the_bottleneck_sentence() -> None:
    slow_gate = BatchTimeline({"addBatch": 1000, "triggerExecution": 1000}, gate_wait=0.9,
                              stages=[StageSpan("collect", 10.0, 10.0, 10.1)])
    share = shares([critical_path(batch()), critical_path(slow_gate)])
    assert sum(share.values()) == pytest.approx(1.0)
    top = next(iter(share))
    assert top == "gate wait" and share[top] == pytest.approx(1.1 / 2.45)
    assert bottleneck(share, 2) == "gate wait (45% of the critical path over the last 2 batches)"
    assert bottleneck({}, 0) == "" and shares([]) == {}
