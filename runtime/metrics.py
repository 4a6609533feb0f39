"""The pool runtime's Prometheus metrics, per tenant and query.

Every per-query series carries `tenant` (the namespace) and `query` (the name), as the
operator's and the scheduler's do (`sluice.api.common.query_labels`), so they join.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from .latency import LATENCY_BUCKETS


@dataclass(frozen=True, slots=True)
class LatencySnapshot:
    """One query's latency bookkeeping at scrape time."""

    labels: tuple[str, str]
    target: float
    buckets: tuple[float, ...]
    """Rows per bucket (not cumulative; the last is +Inf)."""
    latency_sum: float
    rows: float
    within: float
    critical_path: tuple[tuple[str, float], ...] = ()
    """Shares of the critical path over recent batches (SnailTrail), by part."""


class LatencyCollector:
    """Read at scrape time, so nothing is added to the batch path: per query, the row-weighted
    latency histogram (Prometheus can aggregate it across queries and time), the rows within the
    SLA and all measured rows as counters (burn rates), and the latency target."""

    def __init__(self, source: Callable[[], list[LatencySnapshot]]) -> None:
        self.source = source

    def collect(self) -> Iterator[Metric]:
        labels = ["tenant", "query"]
        histogram = HistogramMetricFamily("sluice_query_latency_seconds",
                                          "End-to-end latency of output rows (production to commit).", labels=labels)
        within = CounterMetricFamily("sluice_query_rows_within_sla", "Output rows committed within the latency target.",
                                     labels=labels)
        rows = CounterMetricFamily("sluice_query_rows", "Output rows whose latency was measured.", labels=labels)
        target = GaugeMetricFamily("sluice_query_latency_target_seconds", "The query's latency target (spec.sla).",
                                   labels=labels)
        path = GaugeMetricFamily("sluice_query_critical_path_share",
                                 "Share of the recent batches' critical path spent in each part (the bottleneck is the largest).",
                                 labels=[*labels, "part"])
        for snap in self.source():
            cumulative, running = [], 0.0
            for bound, count in zip(LATENCY_BUCKETS, snap.buckets, strict=False):
                # the shares of rows are fractions: clamp their float sums to the exact row count
                running += count
                cumulative.append((repr(bound), min(running, snap.rows)))
            cumulative.append(("+Inf", snap.rows))  # every measured row, exactly
            histogram.add_metric(list(snap.labels), cumulative, snap.latency_sum)
            within.add_metric(list(snap.labels), snap.within)
            rows.add_metric(list(snap.labels), snap.rows)
            target.add_metric(list(snap.labels), snap.target)
            for part, share in snap.critical_path:
                path.add_metric([*snap.labels, part], share)
        yield from (histogram, within, rows, target, path)


class CodegenCollector:
    """Spark's Janino compilations in the driver's JVM (`codegen.compiles`), read at scrape time:
    nothing on the batch path. Nothing is served while the driver does not answer."""

    def __init__(self, source: Callable[[], int]) -> None:
        self.source = source

    def collect(self) -> Iterator[Metric]:
        from py4j.protocol import Py4JError

        try:
            count = self.source()
        except (Py4JError, ConnectionError):  # a driver gone or stopping: the scrape goes on without it
            return
        yield CounterMetricFamily("sluice_runtime_codegen_compiles",
                                  "Generated classes compiled (Janino) in the driver's JVM since it started.", value=count)


class Metrics:
    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        self.registry = registry
        labels = ["tenant", "query"]
        self.batches = Counter("sluice_runtime_batches_total", "Micro-batches committed.", labels, registry=registry)
        self.rows = Counter("sluice_runtime_input_rows_total", "Input rows processed.", labels, registry=registry)
        self.latency_p50 = Gauge("sluice_runtime_latency_p50_seconds", "End-to-end latency p50 over the window.", labels, registry=registry)
        self.latency_p99 = Gauge("sluice_runtime_latency_p99_seconds", "End-to-end latency p99 over the window.", labels, registry=registry)
        self.attainment = Gauge("sluice_runtime_sla_attainment_ratio", "Share of output rows within the latency target.", labels, registry=registry)
        self.batch_seconds = Gauge("sluice_runtime_batch_seconds", "Duration of the last batch's action.", labels, registry=registry)
        self.input_rate = Gauge("sluice_runtime_input_rows_per_second", "Input rate.", labels, registry=registry)
        self.state_rows = Gauge("sluice_runtime_state_rows", "Rows held in state stores.", labels, registry=registry)
        self.state_bytes = Gauge("sluice_runtime_state_memory_bytes", "Memory used by state stores.", labels, registry=registry)
        self.gate_wait = Gauge("sluice_runtime_gate_wait_seconds", "Time the last batch waited for its grant.", labels, registry=registry)
        self.task_run = Counter("sluice_runtime_task_run_seconds_total", "Task run time of the query's stages.", labels, registry=registry)
        self.task_cpu = Counter("sluice_runtime_task_cpu_seconds_total", "Task CPU time of the query's stages.", labels, registry=registry)
        self.fetch_wait = Counter("sluice_runtime_shuffle_fetch_wait_seconds_total", "Task time spent waiting for shuffle data.", labels, registry=registry)
        self.stage_records = Counter("sluice_runtime_stage_input_records_total", "Records read by the query's stages.", labels, registry=registry)
        self.phase = Gauge("sluice_runtime_query_up", "1 while the query runs.", labels, registry=registry)
        self.kafka_lag = Gauge("sluice_query_kafka_lag_rows", "Rows a Kafka query is behind its topics' latest offsets.",
                               labels, registry=registry)
        self.state_moves = Counter("sluice_runtime_state_moves_total",
                                   "State partitions moved to another executor (Megaphone).", labels, registry=registry)
        self.state_moved_bytes = Counter("sluice_runtime_state_moved_bytes_total",
                                         "Checkpointed bytes of the state partitions moved.", labels, registry=registry)

    def forget(self, tenant: str, key: str) -> None:
        for metric in vars(self).values():
            if metric is self.registry:
                continue
            with contextlib.suppress(KeyError):
                metric.remove(tenant, key)
