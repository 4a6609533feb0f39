"""A query's cold start as `sluice run --report` records it (`runtime.hosted.still_cold`), by hand."""

from __future__ import annotations

from sluice.runtime.hosted import COLD_BATCHES, COLD_MAX, still_cold


def record(costs_ms: list[float], interval: float | None) -> list[float]:
    """What the intake keeps of a query's batches with rows, in order."""
    kept: list[float] = []
    for cost in costs_ms:
        if still_cold(kept, interval):
            kept.append(cost)
    return kept


def test_the_first_three_batches_are_always_kept() -> None:
    assert COLD_BATCHES == 3
    assert record([50.0, 40.0, 30.0, 20.0, 10.0], 1.0) == [50.0, 40.0, 30.0]  # fast from the start


def test_after_them_batches_are_kept_until_one_runs_within_its_interval() -> None:
    # 1 s interval: the third batch (4.2 s) left a backlog, so did the fourth (2.5 s); the fifth
    # (0.9 s) caught up and is the last kept
    assert record([5800.0, 4700.0, 4200.0, 2500.0, 900.0, 3000.0, 800.0], 1.0) == [5800.0, 4700.0, 4200.0, 2500.0, 900.0]
    # a batch exactly as long as its interval left no backlog
    assert record([3000.0, 2000.0, 1500.0, 1000.0, 5000.0], 1.0) == [3000.0, 2000.0, 1500.0, 1000.0]


def test_without_a_trigger_three_and_a_query_that_never_catches_up_at_most_the_cap() -> None:
    assert record([5000.0] * 10, None) == [5000.0] * 3
    assert record([5000.0] * (COLD_MAX + 10), 1.0) == [5000.0] * COLD_MAX
