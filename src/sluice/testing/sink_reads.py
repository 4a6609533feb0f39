"""Latency where a reader sees the result: each output record's arrival at a consumer of the sink
topic (isolation.level read_committed, so an exactly-once sink's rows count once their
transaction commits) less its input event's production time.

One definition for micro-batch and Real-time queries alike (`sluice bench cameo`'s
`"latency_end": "sink read"`): the runtime's own figures end at a micro-batch's commit and at a
Real-time record's send, two different points. An output record is matched to its input by the
event's `seq` (the load generator numbers each topic's events; a pipeline that keeps `seq` in its
output can be measured this way), and the input's production time is its source record's Kafka
timestamp, which the load generator sets to the moment it made the event. A record seen twice
(an at-least-once sink after a retry) counts at its first arrival: that is when it could be read.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import dataclass, field

SEQ = "seq"


def seq_of(value: bytes | None) -> int | None:
    """The `seq` of a JSON record value, or None (not JSON, or no whole-number seq)."""
    if not value:
        return None
    try:
        record = json.loads(value)
    except ValueError:
        return None
    seq = record.get(SEQ) if isinstance(record, dict) else None
    return seq if isinstance(seq, int) and not isinstance(seq, bool) else None


def latencies(arrivals: dict[int, float], produced: dict[int, float], since: float) -> list[tuple[float, float]]:
    """(arrival, latency ms) of each output record whose input was produced at or after `since`
    (the measured window's start), by arrival; records whose input is unknown are left out (pure)."""
    out = [(at, max(at - produced[seq], 0.0) * 1000) for seq, at in arrivals.items()
           if seq in produced and produced[seq] >= since]
    return sorted(out)


@dataclass
class SinkReader:
    """Reads a sink topic from its start in a thread, stamping each record's first arrival."""

    bootstrap: str
    topic: str
    arrivals: dict[int, float] = field(default_factory=dict)
    """seq -> epoch seconds of its first arrival."""
    records: int = 0
    """Every record read, matched or not, duplicates included."""
    unmatched: int = 0
    """Records without a `seq` to match their input by."""
    _stop: threading.Event = field(default_factory=threading.Event)
    _idle_since: float = field(default_factory=time.monotonic)
    _thread: threading.Thread | None = None
    error: str | None = None

    def start(self) -> SinkReader:
        self._thread = threading.Thread(target=self._run, name=f"sink-reader-{self.topic}", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        from confluent_kafka import Consumer, KafkaException

        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"sink-reader-{uuid.uuid4()}",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False,
                             "isolation.level": "read_committed"})
        try:
            consumer.subscribe([self.topic])
            while not self._stop.is_set():
                messages = consumer.consume(num_messages=1000, timeout=0.05)
                now = time.time()
                for message in messages:
                    if message.error():
                        continue
                    self.records += 1
                    seq = seq_of(message.value())
                    if seq is None:
                        self.unmatched += 1
                    elif seq not in self.arrivals:
                        self.arrivals[seq] = now
                if messages:
                    self._idle_since = time.monotonic()
        except KafkaException as error:
            self.error = str(error)
        finally:
            consumer.close()

    def stop(self, idle: float = 2.0, limit: float = 60.0) -> SinkReader:
        """Stop once nothing has arrived for `idle` seconds (records already committed are still
        read), or after `limit` seconds."""
        deadline = time.monotonic() + limit
        while time.monotonic() - self._idle_since < idle and time.monotonic() < deadline:
            time.sleep(0.1)
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        return self


def production_times(bootstrap: str, topic: str, timeout: float = 120) -> dict[int, float]:
    """seq -> epoch seconds at which the load generator made each event of a source topic (its
    records' Kafka timestamps), read from the start to the topic's end."""
    from .kafka import read_to_end

    return {seq: m.timestamp()[1] / 1000 for m in read_to_end(bootstrap, topic, timeout=timeout)
            if (seq := seq_of(m.value())) is not None}
