"""The runtime's latency window (pure): weighted quantiles and attainment over batches."""

from __future__ import annotations

from sluice.api.constants import GRID
from sluice.runtime.latency import LatencyWindow, batch_latency


def test_summary_matches_the_single_figures_and_a_hand_computed_case() -> None:
    window = LatencyWindow(target=1.0, horizon=60.0)
    t = 1_000.0
    # 90 rows produced 0.5 s before commit, 10 rows produced 3 s before: p50 0.5 s, p99 3 s, 90% within 1 s
    window.add(batch_latency(t, 90, [t - 0.5] * len(GRID)))
    window.add(batch_latency(t + 1, 10, [t + 1 - 3.0] * len(GRID)))
    summary = window.summary(t + 1)
    assert summary.p50 == 0.5
    assert summary.p99 == 3.0
    assert summary.maximum == 3.0
    assert summary.attainment is not None
    assert abs(summary.attainment - 0.9) < 1e-9
    # batches older than the horizon fall out; nothing left gives no figures
    assert window.summary(t + 120).p99 is None


def test_the_histogram_holds_every_row_once_and_agrees_with_attainment() -> None:
    from sluice.runtime.latency import LATENCY_BUCKETS, LatencyWindow, batch_latency

    window = LatencyWindow(target=1.0)
    # 200 rows produced evenly over the 4 s before a commit at t=100: latencies 0..4 s
    window.add(batch_latency(100.0, 200, [96.0 + 4.0 * q for q in GRID]))
    window.add(batch_latency(101.0, 50, [100.9] * len(GRID)))  # 50 rows at 0.1 s
    assert len(window.buckets) == len(LATENCY_BUCKETS) + 1
    assert abs(sum(window.buckets) - 250) < 1e-9
    below_target = sum(window.buckets[: LATENCY_BUCKETS.index(1.0) + 1])
    assert abs(below_target - window.all_within) < 1e-9
    assert window.buckets[-1] == 0  # nothing above 600 s
    assert 0 < window.latency_sum / 250 < 4
