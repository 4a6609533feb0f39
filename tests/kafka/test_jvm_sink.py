"""Sluice's JVM sink writing to Kafka on the real broker: every record once, without the runtime's
timestamp column, and the runtime's latency against the records' own timestamps; a batch replayed
after its rows were written (the driver gone between the write and the commit log) written again
at least once, and not again exactly once."""

from __future__ import annotations

import json
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
            # Spark's own writer: a record's Kafka timestamp (its send) is when a consumer can read
            # it, so the runtime's latency can be checked against it (in a transaction, the rows
            # are read at its commit)
            "sink": {"type": "kafka", "bootstrapServers": broker.bootstrap, "topic": sink, "delivery": "atLeastOnce"},
            "sla": {"latencyTarget": "2s"}, "trigger": {"interval": "300ms"}, "resources": {"shufflePartitions": 2},
        },
    })
    host = QueryHost(kafka_spark, tmp_path / "ck", LocalScheduler(Scheduler("cameo", capacity=2)))
    try:
        hosted = host.add(query)
        assert hosted.phase == "Running", hosted.message
        # a first batch before the load: a cold JVM's first batch takes seconds, and its rows'
        # latency would be that start-up rather than the batches' writes the test compares
        warm = generate(LoadPlan(source, 100, 1), broker.bootstrap)["sent"]
        wait_for(lambda: hosted.batches >= 1, 60, "a first batch")
        sent = generate(LoadPlan(source, 300, 10, first_seq=warm), broker.bootstrap)
        sent["sent"] += warm
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


def batch_rows(offsets: Path, batch: int) -> int:
    """Source rows in a batch, from Spark's offset log: its end offsets less the previous batch's
    (one Kafka source; the log's last line holds its `{topic: {partition: offset}}`)."""
    def ends(n: int) -> int:
        f = offsets / str(n)
        return sum(sum(parts.values()) for parts in json.loads(f.read_text().splitlines()[-1]).values()) if f.exists() else 0

    return ends(batch) - ends(batch - 1)


def _replay_query(name: str, bootstrap: str, source: str, sink: str, delivery: str) -> StreamingQuery:
    return StreamingQuery.model_validate({
        "apiVersion": "sluice.dev/v1alpha1", "kind": "StreamingQuery",
        "metadata": {"name": name, "namespace": "pay"},
        "spec": {
            "pool": "test", "execution": "microBatch",
            "source": {"type": "kafka", "bootstrapServers": bootstrap, "topic": source, "schema": EVENT_SCHEMA,
                       "startingOffsets": "earliest"},
            "pipeline": [{"select": ["key", "seq", "amount"]}],
            "sink": {"type": "kafka", "bootstrapServers": bootstrap, "topic": sink, "delivery": delivery},
            "sla": {"latencyTarget": "5s"}, "trigger": {"interval": "300ms"}, "resources": {"shufflePartitions": 2},
        },
    })


@pytest.mark.parametrize("delivery", ["atLeastOnce", "exactlyOnce"])
def test_a_batch_replayed_after_its_write_is_doubled_only_at_least_once(
        kafka_spark: Any, broker: KafkaBroker, tmp_path: Path, delivery: str) -> None:
    source, sink = broker.create_topic(f"replay-in-{delivery}", 2), broker.create_topic(f"replay-out-{delivery}", 2)
    query = _replay_query(f"replay-{delivery.lower()}", broker.bootstrap, source, sink, delivery)
    host = QueryHost(kafka_spark, tmp_path / "ck", LocalScheduler(Scheduler("cameo", capacity=2)))
    try:
        hosted = host.add(query)
        assert hosted.phase == "Running", hosted.message
        sent = generate(LoadPlan(source, 500, 4), broker.bootstrap)["sent"]
        wait_for(lambda: len(broker.values(sink)) >= sent, 60, "every event at the sink", every=1)
        assert host.remove(query.key, keep_checkpoint=True)
        # the state a driver killed between the batch's write and its commit log leaves: Spark's
        # offset log names the batch, its commit log does not, so a restart runs it again
        commits = sorted((tmp_path / "ck").rglob("commits/[0-9]*"), key=lambda f: int(f.name))
        assert commits, "no commit log"
        last = commits[-1]
        batch = int(last.name)
        replayed = batch_rows(last.parent.parent / "offsets", batch)
        last.unlink()
        hosted = host.add(query)
        assert hosted.phase == "Running", hosted.message
        wait_for(lambda: hosted.batches >= 1, 60, f"batch {batch} run again")
        time.sleep(2)  # a doubled row written late shows by now
        seqs = [json.loads(v)["seq"] for v in broker.values(sink)]
        doubled = len(seqs) - len(set(seqs))
        print(f"{delivery}: {sent} sent, {len(set(seqs))} at the sink, {doubled} doubled by the replay of batch {batch}")
        assert len(set(seqs)) == sent and replayed > 0, (len(set(seqs)), sent, replayed)
        if delivery == "exactlyOnce":
            assert doubled == 0, f"{doubled} rows of batch {batch} written twice"
        else:  # Spark's writer writes the replayed batch's rows again: this is what exactlyOnce is for
            assert doubled == replayed > 0, (doubled, replayed)
    finally:
        host.stop_all()


def test_exactly_once_is_refused_in_one_sentence_where_batches_go_through_foreach_batch(
        kafka_spark: Any, broker: KafkaBroker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLUICE_JVM_SINK", "0")  # as a runtime without a JDK and Maven to build the sink
    source, sink = broker.create_topic("fallback-in", 1), broker.create_topic("fallback-out", 1)
    host = QueryHost(kafka_spark, tmp_path / "ck", LocalScheduler(Scheduler("cameo", capacity=2)))
    try:
        asked = host.add(_replay_query("asked", broker.bootstrap, source, sink, "exactlyOnce"))
        assert asked.phase == "Failed"
        assert asked.message.startswith("sink.delivery is exactlyOnce, but this runtime writes through foreachBatch")
        assert asked.message.endswith("set it to atLeastOnce")
        other = host.add(_replay_query("other", broker.bootstrap, source, f"{sink}", "atLeastOnce"))
        assert other.phase == "Running", other.message  # nothing else is harmed
        sent = generate(LoadPlan(source, 200, 1), broker.bootstrap)["sent"]
        wait_for(lambda: len(broker.values(sink)) >= sent, 60, "the at-least-once query's rows", every=1)
    finally:
        host.stop_all()
