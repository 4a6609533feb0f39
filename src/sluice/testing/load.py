"""`sluice load`: a Kafka load generator whose events carry their true production time.

Each event is JSON `{"key", "seq", "produced_at", "amount"}` (schema EVENT_SCHEMA), and its Kafka
timestamp is the same wall-clock instant, so latency at the sink is commit time minus production
time. The rate is paced every few milliseconds against the schedule `rate x elapsed` (times the
burst factor inside a burst), so a slow tick is caught up at the next one.

The generator shares the benchmark's cores with Spark, so each event costs it little: the
timestamp's text is rebuilt once a second, the JSON is one f-string (the same bytes
`json.dumps` writes), and the broker reports only failed deliveries.
"""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sluice.api.scenario import Burst

EVENT_SCHEMA = "key STRING, seq BIGINT, produced_at TIMESTAMP, amount DOUBLE"


@dataclass
class LoadPlan:
    topic: str
    rate: float
    duration: float | None = None
    bursts: list[Burst] = field(default_factory=list)
    keys: int = 100
    first_seq: int = 0
    """The first event's `seq` (a second load on one topic continues the first's numbers)."""
    count: int | None = None
    """Stop once this many events are sent (a preload that must be whole however slowly the
    producer keeps pace; `duration` may then be None)."""

    def rate_at(self, elapsed: float) -> float:
        factor = 1.0
        for burst in self.bursts:
            if burst.at <= elapsed < burst.at + burst.length:
                factor *= burst.factor
        return self.rate * factor

    def expected(self, elapsed: float) -> float:
        """Events due by `elapsed` seconds: the integral of the rate (pure, for pacing and tests)."""
        total = self.rate * elapsed
        for burst in self.bursts:
            inside = max(0.0, min(elapsed, burst.at + burst.length) - burst.at)
            total += self.rate * (burst.factor - 1) * inside
        return total


def iso_ms(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


class EventText:
    """An event's JSON text, byte for byte what `json.dumps` writes for it, without building a dict.

    The timestamp's text down to the second is kept until the second changes; `millis` is the
    event's Kafka timestamp, so the two always agree.
    """

    def __init__(self) -> None:
        self._second = -1
        self._prefix = ""

    def stamp(self, millis: int) -> str:
        second, fraction = divmod(millis, 1000)
        if second != self._second:
            self._second = second
            self._prefix = time.strftime("%Y-%m-%dT%H:%M:%S.", time.gmtime(second))
        return f"{self._prefix}{fraction:03d}Z"

    def event(self, key: str, seq: int, millis: int, amount: float) -> bytes:
        return f'{{"key": "{key}", "seq": {seq}, "produced_at": "{self.stamp(millis)}", "amount": {amount!r}}}'.encode()


def generate(
    plan: LoadPlan, bootstrap: str, stop: Callable[[], bool] = lambda: False,
    progress: Callable[[str], None] | None = None, tick: float = 0.005,
) -> dict[str, Any]:
    """Produce until the duration passes or `stop()`; returns what was sent."""
    from confluent_kafka import KafkaException, Producer

    # idempotent: a produce request retried after a timeout or a dropped connection is not
    # written twice, so an event twice at a sink is the pipeline's doing, never the producer's
    failures = 0

    def delivered(error: object, message: object) -> None:
        nonlocal failures
        if error is not None:
            failures += 1

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all", "enable.idempotence": True,
                         "queue.buffering.max.messages": 1_000_000, "message.timeout.ms": 30_000,
                         "on_delivery": delivered, "delivery.report.only.error": True})
    text = EventText()
    keys = [(f"k{i}", f"k{i}".encode()) for i in range(plan.keys)]
    rng = random.Random(7)
    sent = 0
    start = time.time()
    last_report = start
    try:
        while not stop():
            now = time.time()
            elapsed = now - start
            if plan.duration is not None and elapsed >= plan.duration:
                break
            due = int(plan.expected(elapsed))
            if plan.count is not None:
                if sent >= plan.count:
                    break
                due = min(due, plan.count)
            while sent < due:
                millis = int(time.time() * 1000)
                key, key_bytes = keys[sent % plan.keys]
                value = text.event(key, plan.first_seq + sent, millis, round(rng.random() * 1000, 2))
                try:
                    producer.produce(plan.topic, value, key=key_bytes, timestamp=millis)
                except BufferError:
                    producer.poll(0.05)
                    continue
                except KafkaException as error:
                    raise RuntimeError(f"cannot produce to {plan.topic} at {bootstrap}: {error}") from None
                sent += 1
            producer.poll(0)
            if progress and now - last_report >= 5:
                progress(f"sent {sent} events in {elapsed:.0f}s ({sent / max(elapsed, 1e-9):.0f}/s, now {plan.rate_at(elapsed):.0f}/s)")
                last_report = now
            time.sleep(tick)
    finally:
        left = producer.flush(30)
    elapsed = time.time() - start
    return {"topic": plan.topic, "started_at": start, "sent": sent, "failed": failures + left, "seconds": round(elapsed, 3),
            "rate": round(sent / elapsed, 1) if elapsed > 0 else 0.0, "target_rate": plan.rate}


def main_progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
