"""The runtime's latency window (pure): weighted quantiles and attainment over batches."""

from __future__ import annotations

from sluice.runtime.latency import GRID, LatencyWindow, batch_latency


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
