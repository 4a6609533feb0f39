"""Reads of the hosted queries: status, Prometheus' latency figures, what state moves pace on.

Reads only: each holds the host's lock for a copy and never calls Spark or the scheduler.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from sluice.api.common import query_labels
from sluice.api.wire import BatchList, BatchRecord, QueryStatus

from .host_state import HostState
from .hosted import HostedQuery
from .latency import Summary
from .megaphone import StatefulQuery
from .metrics import LatencySnapshot


class Reads:
    def __init__(self, host: HostState) -> None:
        self.host = host

    def status(self, key: str) -> QueryStatus:
        """A hosted query's status; KeyError if it is not hosted."""
        host = self.host
        with host.lock:
            return host.queries[key].status(host.clock(), host.scheduler is not None)

    def statuses(self) -> dict[str, QueryStatus]:
        host = self.host
        now, gated = host.clock(), host.scheduler is not None
        with host.lock:
            return {key: hosted.status(now, gated) for key, hosted in host.queries.items()}

    def batches(self, key: str, since: float) -> BatchList:
        """The query's measured batches committed after `since` still in its latency window;
        KeyError if it is not hosted."""
        host = self.host
        with host.lock:
            window = host.queries[key].window
            held = [b for b in window.batches if b.committed > since]
        return BatchList(query=key, batches=[BatchRecord(committed=b.committed, rows=b.rows,
                                                         latencies_ms=[round(x * 1000, 1) for x in b.latencies])
                                             for b in held])

    def stateful_batches(self) -> dict[str, int]:
        """Committed batches of each running stateful query (the executor drain paces on them)."""
        with self.host.lock:
            return {key: h.batches for key, h in self.host.queries.items()
                    if h.phase == "Running" and h.query.spec.stateful}

    def stateful_queries(self) -> list[StatefulQuery]:
        """The running stateful queries with Spark's handle and their SLA slack (state moves pace on them)."""
        with self.host.lock:
            running = [(key, h) for key, h in self.host.queries.items()
                       if h.phase == "Running" and h.query.spec.stateful and h.handle is not None]
            return [StatefulQuery(key, h.handle, h.batches, h.spec.latency_target - _recent_latency(h), _recent_batches(h))
                    for key, h in running]

    def slacks(self) -> list[float]:
        """Every running query's SLA slack in seconds (how long its tasks could wait)."""
        with self.host.lock:
            return [h.spec.latency_target - _recent_latency(h) for h in self.host.queries.values() if h.phase == "Running"]

    def latency_snapshots(self) -> list[LatencySnapshot]:
        """Each query's latency bookkeeping, for the scrape-time collector."""
        with self.host.lock:
            return [LatencySnapshot(query_labels(key), h.window.target, tuple(h.window.buckets), h.window.latency_sum,
                                    float(h.window.all_rows), h.window.all_within,
                                    tuple(sorted(h.path_shares()[0].items())))
                    for key, h in self.host.queries.items()]

    def export_latency(self, hosted: HostedQuery) -> None:
        """The latency gauges read the window when Prometheus scrapes, never on the batch path."""
        host, labels = self.host, query_labels(hosted.query.key)

        def read(pick: Callable[[Summary], float | None]) -> Callable[[], float]:
            def value() -> float:
                with host.lock:
                    figure = pick(hosted.window.summary(host.clock()))
                return math.nan if figure is None else figure

            return value

        host.metrics.latency_p50.labels(*labels).set_function(read(lambda s: s.p50))
        host.metrics.latency_p99.labels(*labels).set_function(read(lambda s: s.p99))
        host.metrics.attainment.labels(*labels).set_function(read(lambda s: s.attainment))


def _recent_latency(hosted: HostedQuery, batches: int = 3) -> float:
    """The worst row latency of the query's last few measured batches (0 before any): what a state
    move's budget is judged against, as it reacts within a few batches (the status window's p99
    spans a minute, and a start-up backlog would hold it high that long)."""
    measured = [t.latency for _, t in sorted(hosted.timelines.items()) if t.latency is not None]
    return max(measured[-batches:], default=0.0)


def _recent_batches(hosted: HostedQuery, batches: int = 8) -> tuple[tuple[int, float], ...]:
    """(batch id, seconds) of the query's last few batches with a known duration (what a state
    move's cost is measured on)."""
    done = [(b, t.durations_ms["triggerExecution"] / 1000) for b, t in sorted(hosted.timelines.items())
            if "triggerExecution" in t.durations_ms]
    return tuple(done[-batches:])


