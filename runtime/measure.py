"""The sink's action for one micro-batch, and the time it completed.

Latency is measured per output row, from its production time (`_sluice_ts`) to the time the
sink's write completed. The production times never reach the sink: every query's plan observes
its output rows' count and production-time quantiles (`pipeline.OBSERVED`), which Spark computes
inside the sink's own job and reports with the batch's progress. So the batch path only writes
and reads the clock: no persisted copy, no second job, no Python pass over the rows. The host
joins the two when the progress arrives (`QueryHost.on_progress`).

The console sink (a debugging aid) shows only its first rows, so its figures may cover only the
rows it read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sluice.api.query import StreamingQuery

from .pipeline import write_batch


@dataclass(frozen=True, slots=True)
class Written:
    committed: float
    """Wall-clock time the sink's write completed."""
    collected: list[dict[str, Any]] = field(default_factory=list)
    """The rows themselves (memory sink only)."""


def write(frame: Any, query: StreamingQuery, batch_id: int, clock: Callable[[], float]) -> Written:
    """Run the sink's action for the batch (Spark calls; blocks)."""
    if query.spec.sink.type == "memory":
        collected = [row.asDict(recursive=True) for row in frame.collect()]
        return Written(clock(), collected)
    write_batch(frame, query, batch_id)
    return Written(clock())
