"""A Kafka source's lag and producer rate, from the offsets Spark reports with each batch.

Spark's Kafka source puts two offset maps in every batch's `SourceProgress`: `endOffset`, where
the batch reads to, and `latestOffset`, the partitions' latest offsets when the batch was
planned (`{"topic": {"0": 1200, "1": 1188}}`). Their difference is the rows the query is
behind; the latest offsets over time are the rate its topics grow at (what producers write),
which a capped trigger (`maxOffsetsPerTrigger`) does not hide. Read on Spark's listener thread,
not on the batch path. Pure except for the small window `SourceOffsets` keeps.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

WINDOW = 4
"""Batches whose latest offsets make the producer rate."""


def offsets_total(text: str | None) -> dict[tuple[str, str], int] | None:
    """{(topic, partition): offset} of a Kafka offset map; None if it is not one."""
    if not text:
        return None
    try:
        parsed = json.loads(text)
    except ValueError:
        return None
    if not isinstance(parsed, dict):
        return None
    out = {}
    for topic, partitions in parsed.items():
        if not isinstance(partitions, dict):
            return None
        for partition, offset in partitions.items():
            if not isinstance(offset, int) or isinstance(offset, bool):
                return None
            out[(str(topic), str(partition))] = offset
    return out


def kafka_position(sources: Iterable[tuple[str, str | None, str | None]]) -> tuple[int, int] | None:
    """(sum of latest offsets, rows behind) over a batch's Kafka sources, given each source's
    (description, latestOffset, endOffset); None if the query reads no Kafka source."""
    latest_sum = behind = 0
    found = False
    for description, latest_text, end_text in sources:
        if not description.startswith("Kafka"):
            continue
        latest, end = offsets_total(latest_text), offsets_total(end_text)
        if latest is None or end is None:
            continue
        found = True
        latest_sum += sum(latest.values())
        behind += sum(max(offset - end.get(key, offset), 0) for key, offset in latest.items())
    return (latest_sum, behind) if found else None


@dataclass
class SourceOffsets:
    lag: int | None = None
    """Rows behind the latest offsets when the last batch was planned."""
    producer_rate: float | None = None
    """Rows per second the topics grew at over the last batches."""
    points: deque[tuple[float, int]] = field(default_factory=lambda: deque(maxlen=WINDOW))

    def observe(self, when: float, position: tuple[int, int] | None) -> None:
        """A batch's (latest offsets summed, rows behind), planned at `when` (epoch seconds)."""
        if position is None:
            return
        latest, self.lag = position
        if self.points and latest < self.points[-1][1]:
            self.points.clear()  # the topic was recreated, or partitions went away: start over
        self.points.append((when, latest))
        (t0, first), (t1, last) = self.points[0], self.points[-1]
        if t1 - t0 > 0:
            self.producer_rate = (last - first) / (t1 - t0)

    def idle(self) -> None:
        """Spark found no new data: the topics did not grow and the query is not behind."""
        if self.lag is not None:
            self.lag, self.producer_rate = 0, 0.0
        self.points.clear()
