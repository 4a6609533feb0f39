"""The sink's action for one micro-batch, and what it measures: output rows and production times.

Latency is measured per output row, from its production time (`_sluice_ts`) to the time the
sink's write completed. The memory sink collects the batch in one job and measures it in Python;
every other sink persists the batch, writes it, then reads the row count and the GRID quantiles
of the production times in one aggregation over the persisted batch (for `noop`, that
aggregation is the batch's action).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sluice.api.query import StreamingQuery

from .batching import grid_quantiles
from .latency import GRID
from .pipeline import TS, write_batch


@dataclass(frozen=True, slots=True)
class BatchFacts:
    committed: float
    """Wall-clock time the sink's write completed."""
    rows: int
    """Output rows."""
    produced: list[float]
    """Production times at each GRID quantile (oldest first); empty for an empty batch."""
    collected: list[dict[str, Any]] = field(default_factory=list)
    """The rows themselves (memory sink only)."""


def write_and_measure(frame: Any, query: StreamingQuery, batch_id: int, clock: Callable[[], float]) -> BatchFacts:
    """Run the sink's action for the batch and measure it (Spark calls; blocks)."""
    from pyspark.sql import functions as F

    sink = query.spec.sink.type
    if sink == "memory":
        collected = [row.asDict(recursive=True) for row in frame.collect()]
        committed = clock()
        produced = sorted(r.pop(TS).timestamp() for r in collected if r.get(TS) is not None)
        return BatchFacts(committed, len(collected), grid_quantiles(produced) if produced else [], collected)
    cached = frame.persist()
    try:
        if sink != "noop":
            write_batch(cached.drop(TS), query, batch_id)
        committed = clock()
        # the noop sink's action is this aggregation itself: it computes the whole batch
        facts = cached.agg(
            F.count(F.lit(1)).alias("n"),
            F.percentile_approx(F.col(TS).cast("double"), list(GRID), 1000).alias("q"),
        ).collect()[0]
        if sink == "noop":
            committed = clock()
    finally:
        cached.unpersist()
    return BatchFacts(committed, int(facts["n"] or 0), [float(x) for x in (facts["q"] or [])])
