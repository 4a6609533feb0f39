"""Spark's Real-time Mode beside a micro-batch query in one session, on a real Kafka broker."""

from __future__ import annotations

import json
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from sluice.api.manifest import load_query
from sluice.runtime.host import QueryHost
from sluice.runtime.realtime import HEADER
from sluice.scheduler import intervals
from sluice.scheduler.core import Scheduler
from sluice.scheduler.local import LocalScheduler
from sluice.testing.kafka import KafkaBroker
from sluice.testing.load import EVENT_SCHEMA, LoadPlan, generate
from sluice.testing.waiting import wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow]


def _query(name: str, bootstrap: str, source: str, sink: str, execution: str, sla: str, min_partitions: int | None = None,
           critical: bool = False) -> Any:
    return load_query({
        "apiVersion": "sluice.dev/v1alpha1", "kind": "StreamingQuery",
        "metadata": {"name": name, "namespace": "rtm"},
        "spec": {"pool": "p", "execution": execution, "sla": {"latencyTarget": sla, "critical": critical},
                 "source": {"type": "kafka", "bootstrapServers": bootstrap, "topic": source, "schema": EVENT_SCHEMA,
                            "startingOffsets": "earliest",
                            **({"minPartitions": min_partitions} if min_partitions else {})},
                 "pipeline": [{"filter": "amount > 500"}, {"select": ["key", "seq", "produced_at", "amount"]}],
                 "sink": {"type": "kafka", "bootstrapServers": bootstrap, "topic": sink}},
    })


def _read_all(bootstrap: str, topic: str, until: float) -> list[tuple[dict[str, Any], float, float, bytes | None]]:
    """(value, record timestamp, time consumed, the production header) of every record until `until`."""
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    out = []
    try:
        while time.time() < until:
            for m in consumer.consume(num_messages=500, timeout=0.2):
                if not m.error():
                    out.append((json.loads(m.value()), m.timestamp()[1] / 1000, time.time(),
                                dict(m.headers() or []).get(HEADER)))
    finally:
        consumer.close()
    return out


def test_a_real_time_query_runs_beside_a_micro_batch_one_and_loses_nothing(kafka_spark: Any, broker: KafkaBroker,
                                                                           tmp_path: Path) -> None:
    fast_in, fast_out = broker.create_topic("rtm-in", 1), broker.create_topic("rtm-out", 1)
    slow_in, slow_out = broker.create_topic("mb-in", 1), broker.create_topic("mb-out", 1)
    greedy_out = broker.create_topic("greedy-out", 1)
    host = QueryHost(kafka_spark, tmp_path / "ck", LocalScheduler(Scheduler("cameo", capacity=4)))
    try:
        fast = host.add(_query("fast", broker.bootstrap, fast_in, fast_out, "auto", "100ms"))
        slow = host.add(_query("slow", broker.bootstrap, slow_in, slow_out, "auto", "10s"))
        assert (fast.execution, slow.execution) == ("realTime", "microBatch")
        assert "below the micro-batch floor" in fast.execution_reason and "keep a 10 s SLA" in slow.execution_reason
        assert fast.phase == "Running" and slow.phase == "Running", (fast.message, slow.message)
        # the Real-time query holds a slot per source partition (1) out of the scheduler's 4
        core = host.scheduler.core  # type: ignore[union-attr]
        assert fast.reserved_slots == 1 and core.queries["rtm/fast"].spec.reserved_slots == 1 and core.available == 3
        # one that would hold the other 3 leaves the micro-batch query none: refused, in a sentence
        greedy = host.add(_query("greedy", broker.bootstrap, fast_in, greedy_out, "realTime",
                                 "100ms", min_partitions=3))
        assert greedy.phase == "Pending" and greedy.handle is None and len(kafka_spark.streams.active) == 2
        assert "would reserve 3 of the 4 slots with 1 already reserved" in greedy.message, greedy.message
        assert core.reserved == 1 and "rtm/greedy" not in core.queries
        host.remove("rtm/greedy")
        time.sleep(5)  # the Real-time tasks are reading before the load starts
        sent: dict[str, Any] = {}
        loads = [threading.Thread(target=lambda t=t: sent.update({t: generate(LoadPlan(t, 200, 15), broker.bootstrap)}))
                 for t in (fast_in, slow_in)]
        for load in loads:
            load.start()
        records = _read_all(broker.bootstrap, fast_out, time.time() + 25)
        for load in loads:
            load.join(30)
        # nothing lost: every produced event over 500 reached the Real-time query's sink
        expected = sent[fast_in]["sent"]
        seqs = {value["seq"] for value, _, _, _ in records}
        assert expected >= 2500 and len(seqs) >= 0.4 * expected
        produced = _read_all(broker.bootstrap, fast_in, time.time() + 5)
        wanted = {value["seq"] for value, _, _, _ in produced if value["amount"] > 500}
        assert seqs == wanted
        # latency: the runtime's figure (record timestamp - production header) against this test's
        # own (time consumed - production time in the value, which includes the consumer's delay)
        independent = sorted(consumed - datetime.fromisoformat(v["produced_at"].replace("Z", "+00:00")).timestamp()
                             for v, _, consumed, _ in records)
        status = wait_for(lambda: (s := host.status("rtm/fast")).p50_ms is not None and s, 20, "the sink's latency")
        assert status.execution == "realTime" and status.output_rows > 0 and status.scheduler == "ungated"
        assert status.reserved_slots == 1 and core.queries["rtm/fast"].pending is None  # nothing to order
        assert status.p50_ms / 1000 <= independent[len(independent) // 2] + 0.05
        assert status.p50_ms < 1000  # a row is written within a second, not a micro-batch later
        wait_for(lambda: slow.output_rows > 0, 60, "the micro-batch query's rows")  # it kept running too
        host.remove("rtm/fast")
        assert core.reserved == 0 and core.available == 4  # stopping it gives its slots back
    finally:
        host.stop_all()


def test_auto_runs_a_critical_filter_in_real_time_mode_when_its_batches_cost_the_pool_more(
        kafka_spark: Any, broker: KafkaBroker, tmp_path: Path) -> None:
    source = broker.create_topic("budget-in", 1)
    sinks = {name: broker.create_topic(f"budget-{name}", 1) for name in ("steady", "busy", "crowded", "bulk")}
    host = QueryHost(kafka_spark, tmp_path / "ck", LocalScheduler(Scheduler("cameo", capacity=4)))
    try:
        # nothing measured yet: Spark's prior, 76 ms a batch at its interval, is well under a core
        steady = host.add(_query("steady", broker.bootstrap, source, sinks["steady"], "auto", "2s", critical=True))
        assert steady.execution == "microBatch" and steady.phase == "Running", steady.execution_reason
        assert "before the pool measured any" in steady.execution_reason
        assert "less than the 1 core a Real-time reservation holds" in steady.execution_reason
        # the driver measured at 10 s of CPU a batch (a pool past its cores): a reserved core is cheaper
        host._driver_pid = None  # the lifecycle's own samples of this idle driver stay out of the meter
        host.batch_meter.sample(0.0, 0.0, 0)
        host.batch_meter.sample(1.0, 200.0, 20)
        busy = host.add(_query("busy", broker.bootstrap, source, sinks["busy"], "auto", "2s", critical=True))
        assert busy.execution == "realTime" and busy.phase == "Running", (busy.execution_reason, busy.message)
        every = intervals.staggered(1.0, "rtm/busy")  # its own interval at the start cap
        assert (f"10 s of CPU a batch (measured on the pool) every {every * 1000:.0f} ms is {10 / every:.2f} cores"
                in busy.execution_reason)
        assert busy.reserved_slots == 1
        # Real-time would hold 3 of the 4 slots with 1 reserved: refused, so micro-batches, said why
        crowded = host.add(_query("crowded", broker.bootstrap, source, sinks["crowded"], "auto", "2s",
                                  min_partitions=3, critical=True))
        assert crowded.execution == "microBatch" and crowded.phase == "Running", crowded.message
        assert "the pool refused the reservation" in crowded.execution_reason and crowded.reserved_slots == 0
        # a query that is not critical is not weighed
        bulk = host.add(_query("bulk", broker.bootstrap, source, sinks["bulk"], "auto", "2s"))
        assert bulk.execution == "microBatch" and "cores" not in bulk.execution_reason
        assert host.status("rtm/busy").execution_reason == busy.execution_reason  # what the status says
    finally:
        host.stop_all()
