"""The execution mode per query, chosen by hand-computed cases."""

from __future__ import annotations

import pytest

from sluice.api.query import realtime_problem
from sluice.scheduler.execution import choose, micro_batch_floor
from sluice.scheduler.intervals import COMMIT_PRIOR, FIXED_PRIOR, MARGIN, MIN_INTERVAL


def test_the_floor_is_the_shortest_interval_plus_a_batch_over_the_margin() -> None:
    assert micro_batch_floor() == pytest.approx((MIN_INTERVAL + FIXED_PRIOR + COMMIT_PRIOR) / MARGIN)
    assert micro_batch_floor(fixed=0.3, commit=0.1) == pytest.approx((0.2 + 0.3 + 0.1) / 0.8)  # 750 ms


@pytest.mark.parametrize(
    ("requested", "sla", "problem", "mode", "words"),
    [
        ("auto", 0.2, None, "realTime", "below the micro-batch floor (750 ms)"),
        ("auto", 0.75, None, "microBatch", "micro-batches keep a 750 ms SLA"),
        ("auto", 30.0, None, "microBatch", "keep a 30 s SLA"),
        ("auto", 0.2, "the sink is noop", "microBatch", "will miss it"),
        ("microBatch", 0.05, None, "microBatch", "spec.execution sets it."),
        ("realTime", 60.0, None, "realTime", "spec.execution sets it."),
    ],
)
def test_choices(requested: str, sla: float, problem: str | None, mode: str, words: str) -> None:
    choice = choose(requested, sla, problem, floor=0.75)
    assert choice.mode == mode and words in choice.reason


def test_what_real_time_mode_can_run() -> None:
    assert realtime_problem("kafka", "kafka", ["filter", "select", "withColumn"]) is None
    assert "reads Kafka only" in (realtime_problem("files", "kafka", ["filter"]) or "")
    assert "writes Kafka only" in (realtime_problem("kafka", "noop", ["filter"]) or "")
    assert "groupBy" in (realtime_problem("kafka", "kafka", ["watermark", "groupBy", "aggregate"]) or "")
