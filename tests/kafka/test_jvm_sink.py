"""Sluice's JVM sink writing to Kafka on the real broker: every record once, without the runtime's
timestamp column, and the runtime's latency against the records' own timestamps."""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from sluice.api.query import StreamingQuery
from sluice.runtime.host import QueryHost
from sluice.scheduler.core import Scheduler
from sluice.scheduler.local import LocalScheduler
from sluice.testing.kafka import KafkaBroker
from sluice.testing.load import EVENT_SCHEMA, LoadPlan, generate
from sluice.testing.waiting import wait_for

from .test_realtime import _read_all

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def test_kafka_records_are_written_once_and_their_latency_matches_the_records(
        kafka_spark: Any, broker: KafkaBroker, tmp_path: Path) -> None:
    source, sink = broker.create_topic("jvm-in", 2), broker.create_topic("jvm-out", 1)
    query = StreamingQuery.model_validate({
        "apiVersion": "sluice.dev/v1alpha1", "kind": "StreamingQuery",
        "metadata": {"name": "alerts", "namespace": "pay"},
        "spec": {
            "pool": "test", "execution": "microBatch",
            "source": {"type": "kafka", "bootstrapServers": broker.bootstrap, "topic": source, "schema": EVENT_SCHEMA,
                       "startingOffsets": "earliest"},
            "pipeline": [{"filter": "amount > 500"}, {"select": ["key", "seq", "amount", "produced_at"]}],
            "sink": {"type": "kafka", "bootstrapServers": broker.bootstrap, "topic": sink},
            "sla": {"latencyTarget": "2s"}, "trigger": {"interval": "300ms"}, "resources": {"shufflePartitions": 2},
        },
    })
    host = QueryHost(kafka_spark, tmp_path / "ck", LocalScheduler(Scheduler("cameo", capacity=2)))
    try:
        hosted = host.add(query)
        assert hosted.phase == "Running", hosted.message
        sent = generate(LoadPlan(source, 300, 10), broker.bootstrap)
        produced = {}
        for value, *_ in _read_all(broker.bootstrap, source, time.time() + 5):
            if value["amount"] > 500:
                produced[value["seq"]] = value
        wait_for(lambda: hosted.output_rows >= len(produced), 60, "every matching event at the sink")
        assert hosted.handle.lastProgress["sink"]["description"].startswith("sluice(")
        records = [(value, stamp) for value, stamp, *_ in _read_all(broker.bootstrap, sink, time.time() + 5)]
        assert sent["sent"] >= 2500
        # each matching event once, as JSON of the selected columns only
        assert sorted(v["seq"] for v, _ in records) == sorted(produced)
        assert all(set(v) == {"key", "seq", "amount", "produced_at"} for v, _ in records)
        # latency: the runtime's (sink commit - production time, from the sink's tasks) against the
        # records' own (Kafka's timestamp, set as each was sent, before the batch's commit)
        independent = sorted(stamp - datetime.fromisoformat(v["produced_at"].replace("Z", "+00:00")).timestamp()
                             for v, stamp in records)
        status = host.status("pay/alerts")
        assert status.p50_ms is not None and status.max_ms is not None and status.scheduler == "gated"
        p50, ind_p50 = status.p50_ms / 1000, independent[len(independent) // 2]
        # committed after every record was sent (so not below them, beyond the age histogram's 1%),
        # and within one batch's write of them
        assert ind_p50 * 0.99 - 0.002 <= p50 <= ind_p50 + 0.5, (p50, ind_p50)
        assert status.max_ms / 1000 >= independent[-1] - 0.002
    finally:
        host.stop_all()
