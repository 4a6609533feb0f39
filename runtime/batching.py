"""Pure rules of the batch path: what the gate guesses before a batch, and what it reads after.

No Spark and no clock here: the gate and the executor drain pass in what they measured.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sluice.api.constants import GRID


def expected_rows(input_rate: float, last_started: float | None, now: float) -> int:
    """Rows the next batch will hold: the input rate over the time since the last batch started.

    Zero before the second batch (no rate yet): the scheduler then uses its prior cost."""
    if last_started is None or input_rate <= 0:
        return 0
    return int(input_rate * max(now - last_started, 0.0))


def oldest_event(newest_input: float | None, newest_output: float | None) -> float | None:
    """The production time of the batch's oldest event, as well as it is known before it runs.

    It is about the newest event the previous batch saw: Spark's input eventTime max for queries
    with a watermark, else the newest production time among the previous batch's output rows."""
    return newest_input if newest_input is not None else newest_output


def gives_group_back(first: int, last: int, batch_id: int, took_ms: float | None, interval: float | None,
                     newest_entered: int) -> bool:
    """At a batch's progress: whether the query gives the rest of its group grant (batches
    first..last, Drizzle) back to the scheduler here.

    Spark starts the next batch at once only when this one took its whole trigger interval;
    otherwise a trigger wait follows, and a group's slot would sit idle through it (at 100
    queries batching every 7.5-60 s, such slots held the pool's gate while critical batches
    waited). So a group holds its slot only while its batches run back to back: given back after
    a batch quicker than the interval, unless it was the group's last (that frees the slot
    anyway) or the next batch already entered the gate under the grant."""
    if not first <= batch_id < last or newest_entered != batch_id:
        return False
    return interval is not None and took_ms is not None and took_ms < interval * 1000


def grid_quantiles(ordered: Sequence[float]) -> list[float]:
    """The values at each GRID quantile of an ascending, non-empty sequence (nearest rank)."""
    top = len(ordered) - 1
    return [ordered[min(top, round(q * top))] for q in GRID]


def settled(marks: Mapping[str, int], batches: Mapping[str, int]) -> bool:
    """Megaphone's pacing test: has every stateful query committed a batch since the last kill?

    `marks` are the committed batch counts when the last executor was killed; `batches` are the
    counts now. A query that has stopped since does not hold the drain back."""
    return all(batches.get(key, count + 1) > count for key, count in marks.items())
