"""Kafka end to end: the broker, the load generator's rate and timestamps, exactly-once counts across a restart."""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from sluice.api.query import StreamingQuery
from sluice.runtime.host import QueryHost
from sluice.scheduler.core import Scheduler
from sluice.scheduler.local import LocalScheduler
from sluice.testing.kafka import KafkaBroker
from sluice.testing.load import EVENT_SCHEMA, Burst, LoadPlan, generate
from sluice.testing.waiting import wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def kafka_query(name: str, bootstrap: str, topic: str, sink: dict[str, Any]) -> StreamingQuery:
    return StreamingQuery.model_validate({
        "apiVersion": "sluice.dev/v1alpha1", "kind": "StreamingQuery",
        "metadata": {"name": name, "namespace": "t"},
        "spec": {
            "pool": "test",
            "source": {"type": "kafka", "bootstrapServers": bootstrap, "topic": topic, "schema": EVENT_SCHEMA,
                       "startingOffsets": "earliest"},
            "pipeline": [{"filter": "amount >= 0"}, {"select": ["key", "seq", "amount"]}],
            "sink": sink, "sla": {"latencyTarget": "2s"}, "trigger": {"interval": "300ms"},
            "resources": {"shufflePartitions": 2},
        },
    })


def test_generator_keeps_its_rate_and_stamps_production_time(broker: KafkaBroker, topic: str) -> None:
    plan = LoadPlan(topic, rate=3000, duration=4.0, bursts=[Burst(1.0, 1.0, 3.0)], keys=10)
    result = generate(plan, broker.bootstrap)
    expected = plan.expected(4.0)  # 3000 * 4 + 3000 * 2 * 1 = 18000
    assert result["failed"] == 0
    assert abs(result["sent"] - expected) <= 0.03 * expected
    assert broker.count(topic) == result["sent"]
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "check", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    messages = consumer.consume(200, timeout=10)
    consumer.close()
    assert messages
    for message in messages:
        event = json.loads(message.value())
        _, stamp = message.timestamp()
        produced = time.mktime(time.strptime(event["produced_at"][:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone
        assert abs(stamp / 1000 - (produced + int(event["produced_at"][20:23]) / 1000)) < 0.002


def test_a_counted_load_sends_exactly_its_count_however_long_it_takes(broker: KafkaBroker, topic: str) -> None:
    # 2,500 events at 5,000/s: half a second's schedule; no duration bounds it, the count does
    result = generate(LoadPlan(topic, rate=5000, keys=7, count=2500), broker.bootstrap)
    assert (result["sent"], result["failed"]) == (2500, 0)
    assert broker.count(topic) == 2500


def test_every_event_is_counted_once_across_a_restart(kafka_spark: Any, broker: KafkaBroker, topic: str, tmp_path: Path) -> None:
    out, checkpoints = tmp_path / "out", tmp_path / "ck"
    query = kafka_query("copy", broker.bootstrap, topic, {"type": "files", "format": "parquet", "path": str(out)})
    producing, stop = threading.Event(), threading.Event()
    result: dict[str, Any] = {}

    def produce() -> None:  # until told to stop: the restart is mid-stream however slow the machine
        result.update(generate(LoadPlan(topic, rate=1000), broker.bootstrap, stop=stop.is_set))
        producing.set()

    threading.Thread(target=produce, daemon=True).start()
    first = QueryHost(kafka_spark, checkpoints, LocalScheduler(Scheduler("cameo", capacity=2)))
    hosted = first.add(query)
    assert hosted.phase == "Running", hosted.message
    wait_for(lambda: hosted.output_rows > 2000, 90, "rows before the restart")
    first.stop_all()  # mid-stream: the generator is still producing
    assert not producing.is_set()
    second = QueryHost(kafka_spark, checkpoints, LocalScheduler(Scheduler("cameo", capacity=2)))
    again = second.add(query)
    try:
        wait_for(lambda: again.output_rows > 1000, 90, "rows after the restart")
        stop.set()
        wait_for(producing.is_set, 60, "the generator")
        total = result["sent"]
        wait_for(lambda: hosted.output_rows + again.output_rows >= total, 90, "every event at the sink")
        time.sleep(2)  # nothing more may arrive
        seqs = [r["seq"] for r in kafka_spark.read.parquet(str(out)).select("seq").collect()]
        assert len(seqs) == total and len(set(seqs)) == total and set(seqs) == set(range(total))
        status = second.status("t/copy")
        assert status.p99_ms is not None and status.p99_ms < 30_000
    finally:
        second.stop_all()


def test_unreachable_broker_or_missing_topic_waits_with_a_sentence(kafka_spark: Any, broker: KafkaBroker, tmp_path: Path) -> None:
    host = QueryHost(kafka_spark, tmp_path / "ck", LocalScheduler(Scheduler("cameo", capacity=2)))
    host.retry_every = 0.5
    try:
        nowhere = host.add(kafka_query("nowhere", "127.0.0.1:1", "x", {"type": "memory"}))
        assert nowhere.phase == "Pending" and "127.0.0.1:1" in nowhere.message
        missing = host.add(kafka_query("missing", broker.bootstrap, "not-yet", {"type": "memory"}))
        assert missing.phase == "Pending" and "'not-yet'" in missing.message
        broker.create_topic("not-yet")
        time.sleep(0.6)
        host.refresh()  # the retry starts it now that the topic exists
        assert missing.phase == "Running", missing.message
        assert nowhere.phase == "Pending"
    finally:
        host.stop_all()


def test_a_pending_query_starts_once_however_many_ask(kafka_spark: Any, broker: KafkaBroker, tmp_path: Path,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    """Retries once ran unlocked from several threads: each started the query, every start but
    one failed ("already active"), and the query showed Failed until the last one returned."""
    from sluice.runtime.listener import listen
    from sluice.runtime.pipeline import spark_name

    started: list[str] = []
    starts = listen(kafka_spark, on_started=started.append)
    host = QueryHost(kafka_spark, tmp_path / "ck", LocalScheduler(Scheduler("cameo", capacity=2)), retry_every=0.2)
    try:
        late = host.add(kafka_query("late", broker.bootstrap, "late-topic", {"type": "memory"}))
        assert late.phase == "Pending"
        caplog.set_level(logging.WARNING, logger="sluice.runtime")
        broker.create_topic("late-topic")
        time.sleep(0.3)
        askers = [threading.Thread(target=host.refresh) for _ in range(4)]
        for asker in askers:
            asker.start()
        for asker in askers:
            asker.join(60)
        assert late.phase == "Running", late.message
        wait_for(lambda: spark_name("t/late") in started, 30, "the query's start event")
        time.sleep(2)  # any second start would be reported by now
        assert started.count(spark_name("t/late")) == 1, started
        assert not [r.message for r in caplog.records if "failed to start" in r.message]
    finally:
        host.stop_all()
        kafka_spark.streams.removeListener(starts)
