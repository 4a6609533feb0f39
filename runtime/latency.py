"""Latency bookkeeping per query (pure): per-batch latency quantiles in, sliding-window figures out.

Each committed batch contributes the latencies of its output rows as a quantile grid (from one
`percentile_approx` over the batch's `_sluice_ts`), weighted by the batch's row count. The
window's p50/p99 and SLA attainment (share of rows within the target) are read from the merged,
weighted sample: exact for the grid points, an interpolation between them.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from sluice.api.constants import MASSES

LATENCY_BUCKETS: tuple[float, ...] = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
"""Upper bounds (seconds) of the latency histogram's buckets: around typical SLAs, from a
Real-time Mode filter's 100 ms to a windowed report's minutes."""


@dataclass(frozen=True, slots=True)
class BatchLatency:
    committed: float
    """Wall-clock time the batch's output was committed."""
    rows: int
    """Output rows."""
    latencies: tuple[float, ...]
    """Latency in seconds at each GRID quantile of the batch's production times (oldest first)."""


def batch_latency(committed: float, rows: int, produced_quantiles: list[float]) -> BatchLatency:
    """From production-time quantiles (ascending: oldest first) to latencies (descending)."""
    return BatchLatency(committed, rows, tuple(max(committed - t, 0.0) for t in produced_quantiles))


@dataclass(frozen=True, slots=True)
class Summary:
    p50: float | None
    p99: float | None
    maximum: float | None
    attainment: float | None


def weighted_quantile(sample: list[tuple[float, float]], q: float) -> float | None:
    """Weighted quantile of a sorted (value, weight) sample."""
    total = sum(w for _, w in sample)
    if total <= 0:
        return None
    goal, seen = q * total, 0.0
    for value, weight in sample:
        seen += weight
        if seen >= goal:
            return value
    return sample[-1][0]


def _bucket(latency: float) -> int:
    for i, bound in enumerate(LATENCY_BUCKETS):
        if latency <= bound:
            return i
    return len(LATENCY_BUCKETS)


@dataclass
class LatencyWindow:
    target: float
    horizon: float = 60.0
    batches: deque[BatchLatency] = field(default_factory=deque)
    all_rows: int = 0
    all_within: float = 0.0
    buckets: list[float] = field(default_factory=lambda: [0.0] * (len(LATENCY_BUCKETS) + 1))
    """Rows per latency bucket since the start (not cumulative; the last is +Inf), each grid point
    standing for its share of the batch's rows."""
    latency_sum: float = 0.0
    """Sum of the rows' latencies (seconds), with the same weights."""

    def add(self, batch: BatchLatency) -> None:
        self.batches.append(batch)
        self.all_rows += batch.rows
        self.all_within += self._within(batch)
        for latency, mass in zip(batch.latencies, MASSES, strict=False):
            rows = batch.rows * mass
            self.buckets[_bucket(latency)] += rows
            self.latency_sum += rows * latency

    def _within(self, batch: BatchLatency) -> float:
        return batch.rows * sum(m for lat, m in zip(batch.latencies, MASSES, strict=False) if lat <= self.target)

    def _trim(self, now: float) -> None:
        while self.batches and self.batches[0].committed < now - self.horizon:
            self.batches.popleft()

    def sample(self, now: float) -> list[tuple[float, float]]:
        self._trim(now)
        return sorted(
            (lat, b.rows * m) for b in self.batches if b.rows > 0 for lat, m in zip(b.latencies, MASSES, strict=False)
        )

    def summary(self, now: float) -> Summary:
        """p50, p99, max and attainment from one pass over the window (one sort)."""
        sample = self.sample(now)
        total = sum(w for _, w in sample)
        if total <= 0:
            return Summary(None, None, None, None)
        within = sum(w for lat, w in sample if lat <= self.target)
        return Summary(weighted_quantile(sample, 0.5), weighted_quantile(sample, 0.99), sample[-1][0], within / total)

    def overall_attainment(self) -> float | None:
        return None if self.all_rows == 0 else self.all_within / self.all_rows

