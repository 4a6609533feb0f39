"""Spark's Real-time Mode for a query: its writer, and its latency measured at the sink topic.

A Real-time query has no micro-batches to gate: its tasks read Kafka continuously and write each
row as it comes, and the trigger's duration is only how often progress is checkpointed. There is
no batch function either (Real-time Mode writes Kafka itself), so latency cannot be observed
inside the write. It is measured just downstream instead: every output record carries its
input's production time in a header (`sluice-produced-ms`), and a consumer of the sink topic
(read_committed, as a reader of the results would be) takes each record's arrival minus that
header: where a reader sees the row, not when Spark's producer sent it (the record's timestamp,
which leaves out the broker's acknowledgement and the fetch).
Nothing runs per row in Python on the query's own path; the consumer is beside it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from sluice.api.constants import GRID
from sluice.api.query import KafkaSink, KafkaSource, StreamingQuery
from sluice.scheduler.execution import mode_of, reserved_slots

from .latency import BatchLatency
from .pipeline import TS

log = logging.getLogger("sluice.runtime.realtime")
HEADER = "sluice-produced-ms"
CHECKPOINT_SECONDS = 60
"""How often a Real-time query checkpoints its progress (its trigger's duration): the rows it read
are counted (its progress event) only when such an epoch ends, though each is written at once."""
CHECKPOINT_INTERVAL = f"{CHECKPOINT_SECONDS} seconds"


def drain_limit(drain: float, realtime: bool) -> float:
    """How long a run goes on after its load for its rows to be counted: `drain` (the longest SLA
    and a margin), and with a Real-time query besides that its epoch in flight, whose rows are
    counted when it ends (the run stops as soon as every row sent was counted)."""
    return drain + CHECKPOINT_SECONDS if realtime else drain
WINDOW = 0.5
"""Seconds of output records summarized into one latency entry."""


def slots_of(query: StreamingQuery) -> int:
    """Task slots a Real-time query holds (`execution.reserved_slots`), its topic asked now."""
    from .kafka_check import topic_partitions

    source = query.spec.source
    if not isinstance(source, KafkaSource):
        return reserved_slots(None)
    return reserved_slots(topic_partitions(source.bootstrapServers, source.topic), source.minPartitions)


def reserved_total(queries: list[StreamingQuery], slots: Callable[[StreamingQuery], int] = slots_of) -> int:
    """Task slots the Real-time queries among `queries` hold, summed."""
    return sum(slots(q) for q in queries if mode_of(q).mode == "realTime")


def local_master(cores: int, reserved: int) -> str:
    """Spark's local master with `cores` task slots for micro-batches besides the reserved ones
    (Real-time tasks mostly wait on Kafka, so their slots oversubscribe the cores)."""
    return f"local[{max(cores, 1) + reserved}]"


def writer(frame: Any, query: StreamingQuery, checkpoint: str) -> Any:
    """The DataStreamWriter of a Real-time query: JSON values as the micro-batch Kafka sink
    writes them, plus the production-time header."""
    from pyspark.sql import functions as F

    sink = query.spec.sink
    if not isinstance(sink, KafkaSink):
        raise ValueError(f"Real-time Mode writes Kafka only; the sink is {sink.type}")
    columns = [c for c in frame.columns if c != TS]
    produced = F.format_string("%d", (F.col(TS).cast("double") * 1000).cast("long")).cast("binary")
    header = F.array(F.struct(F.lit(HEADER).alias("key"), produced.alias("value")))
    return (
        frame.select(F.to_json(F.struct(*columns)).alias("value"), header.alias("headers"))
        .writeStream.format("kafka")
        .option("kafka.bootstrap.servers", sink.bootstrapServers)
        .option("topic", sink.topic)
        .option("checkpointLocation", checkpoint)
        .outputMode("update")
        .trigger(realTime=CHECKPOINT_INTERVAL)
    )


def summarize(samples: list[tuple[float, float]]) -> BatchLatency | None:
    """(read, produced) epoch seconds of some output records -> one latency entry (GRID quantiles)."""
    if not samples:
        return None
    latencies = sorted((max(w - p, 0.0) for w, p in samples), reverse=True)
    n = len(latencies)
    picks = tuple(latencies[min(int(q * (n - 1) + 0.5), n - 1)] for q in GRID)
    return BatchLatency(max(w for w, _ in samples), n, picks)


class SinkLatency:
    """Consumes a Real-time query's sink topic from its end and reports latency every WINDOW s."""

    def __init__(self, sink: KafkaSink, name: str, report: Callable[[BatchLatency], None]) -> None:
        self.sink = sink
        self.name = name
        self.report = report
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"sluice-rtm-latency-{name}", daemon=True)

    def start(self) -> SinkLatency:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        from confluent_kafka import Consumer, KafkaException

        consumer = Consumer({"bootstrap.servers": self.sink.bootstrapServers, "group.id": f"sluice-latency-{self.name}",
                             "auto.offset.reset": "latest", "enable.auto.commit": False,
                             "isolation.level": "read_committed"})
        try:
            consumer.subscribe([self.sink.topic])
            samples: list[tuple[float, float]] = []
            flushed = time.monotonic()
            while not self._stop.is_set():
                messages = consumer.consume(num_messages=1000, timeout=0.1)
                arrived = time.time()
                for message in messages:
                    if message.error():
                        continue
                    produced = dict(message.headers() or []).get(HEADER)
                    if produced is not None:
                        samples.append((arrived, int(produced) / 1000))
                if time.monotonic() - flushed >= WINDOW:
                    entry = summarize(samples)
                    if entry is not None:
                        self.report(entry)
                    samples, flushed = [], time.monotonic()
        except KafkaException as error:  # the broker went away: status says it through the query
            log.warning("latency of %s is not measured: %s", self.name, error)
        finally:
            consumer.close()
