"""Warm at start: before a pool's runtime serves its API, it runs two synthetic queries of the
common shapes through its own host for a bounded time, so its JVMs compile the batch path on
load that is nobody's.

A pool's JVMs start cold: on a 2-core node their JIT compilers took 0.4-0.6 of the node's cores
under load, and a critical filter born with the pool kept 44-47% of its rows within its 1 s SLA
20-30 s into the load; with this warm-up first, 98-100% (docs/performance.md, "Warm at start"). The warm-up's two queries are StreamingQuery specs like any tenant's
(parsed by the same model, hosted, gated and measured by the same code): a critical filter on a
`rate` source at a 200 ms trigger and a windowed aggregation with a watermark, a shuffle and state
at 1 s, both into `noop`. They are stopped and their checkpoints deleted before the API answers,
so no tenant ever sees them; the driver's planner and the executors' task path (rate rows rather
than Kafka's fetch) are what they warm.

`queries` is pure (data out); `run` is the shell: the host, a clock and a sleep passed in.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sluice.api.constants import API_VERSION
from sluice.api.query import StreamingQuery

TENANT = "sluice-warm-start"
"""The synthetic queries' namespace: nobody's (the runtime serves no query before they are gone)."""
FILTER_RATE = 1000
"""Rows a second into the filter: a critical filter's batch of a few hundred rows at 200 ms."""
AGGREGATE_RATE = 5000
"""Rows a second into the aggregation, over `KEYS` keys: a bulk tenant's state and shuffle."""
KEYS = 5000
"""Distinct keys of the aggregation: its state's rows per window."""
POOL = "warm-start"
"""The synthetic queries' `spec.pool` (the host hosts what it is given; the name is only said)."""


def queries(pool: str, slots: int) -> list[StreamingQuery]:
    """The warm-up's two queries, their sources split in the runtime's `slots` (Spark's task slots)."""
    parts = max(slots, 1)
    columns: list[dict[str, Any]] = [
        {"withColumn": {"name": "key", "expr": f"concat('k', CAST(value % {KEYS} AS STRING))"}},
        {"withColumn": {"name": "amount", "expr": "CAST((value * 7919) % 1000 AS DOUBLE)"}}]

    def query(name: str, rate: int, pipeline: list[dict[str, Any]], sla: str, critical: bool,
              trigger: str) -> StreamingQuery:
        return StreamingQuery.model_validate({
            "apiVersion": API_VERSION, "kind": "StreamingQuery",
            "metadata": {"name": name, "namespace": TENANT},
            "spec": {"pool": pool, "source": {"type": "rate", "rowsPerSecond": rate, "numPartitions": parts},
                     "pipeline": columns + pipeline, "sink": {"type": "noop"},
                     "sla": {"latencyTarget": sla, "critical": critical}, "trigger": {"interval": trigger},
                     "execution": "microBatch"}})

    return [
        query("filter", FILTER_RATE, [{"filter": "amount > 900"}, {"select": ["key", "value", "amount"]}],
              "1s", True, "200ms"),
        query("aggregate", AGGREGATE_RATE, [
            {"watermark": {"column": "timestamp", "delay": "2s"}},
            {"window": {"column": "timestamp", "size": "10s"}},
            {"groupBy": ["window", "key"]},
            {"aggregate": [{"fn": "count", "name": "n"}, {"fn": "sum", "column": "amount"},
                           {"fn": "approx_percentile", "column": "amount", "percentile": 0.99, "name": "p99_amount"}]}],
              "60s", False, "1s"),
    ]


def wait_for_executor(executors: Callable[[], list[Any]], bound: float, clock: Callable[[], float] = time.monotonic,
                      sleep: Callable[[float], None] = time.sleep) -> bool:
    """Whether an executor registered within `bound` seconds (`executors`: the live ones, as
    `ExecutorScaler.executors` lists them; an error reading them counts as none yet)."""
    deadline = clock() + bound
    while True:
        try:
            if executors():
                return True
        except (OSError, ValueError):  # the status API not up yet
            pass
        if clock() >= deadline:
            return False
        sleep(1.0)


@dataclass(frozen=True, slots=True)
class Warmed:
    """What the start's warm-up ran."""

    seconds: float
    batches: dict[str, int]
    """Batches committed by each synthetic query, by name."""

    def sentence(self) -> str:
        return (f"warmed for {self.seconds:.0f} s before serving: a critical filter ran "
                f"{self.batches.get('filter', 0)} batches and a windowed aggregation "
                f"{self.batches.get('aggregate', 0)} on synthetic rows")


def run(host: Any, slots: int, seconds: float, clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep) -> Warmed:
    """Host the warm-up's queries for `seconds`, then remove them with their checkpoints."""
    started = clock()
    chosen = queries(POOL, slots)
    batches: dict[str, int] = {}
    try:
        for q in chosen:
            host.add(q)
        sleep(max(seconds - (clock() - started), 0.0))
        batches = {q.metadata.name: host.queries[q.key].batches for q in chosen if q.key in host.queries}
    finally:
        for q in chosen:
            host.remove(q.key, keep_checkpoint=False)
    return Warmed(round(clock() - started, 1), batches)
