"""The benchmark's sink reader on a real broker: records counted when a read_committed reader
sees them, each matched to its input's production time by seq."""

from __future__ import annotations

import json
import time
import uuid

import pytest

from sluice.testing.kafka import KafkaBroker
from sluice.testing.load import LoadPlan, generate
from sluice.testing.sink_reads import SinkReader, latencies, production_times

pytestmark = [pytest.mark.kafka]


def test_the_reader_sees_committed_records_once_each_and_matches_them_to_their_inputs(broker: KafkaBroker, topic: str) -> None:
    from confluent_kafka import Producer

    load = generate(LoadPlan(topic, rate=1000, duration=0.3, keys=5), broker.bootstrap)
    assert load["sent"] >= 20
    sink = broker.create_topic(f"out-{uuid.uuid4().hex[:8]}", partitions=2)
    reader = SinkReader(broker.bootstrap, sink).start()
    transactional = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"t-{uuid.uuid4().hex[:8]}"})
    transactional.init_transactions(30)
    transactional.begin_transaction()
    for seq in range(10):
        transactional.produce(sink, json.dumps({"key": "k", "seq": seq}).encode())
    transactional.commit_transaction(30)
    transactional.begin_transaction()
    for seq in range(10, 15):  # never committed: a read_committed reader never sees them
        transactional.produce(sink, json.dumps({"key": "k", "seq": seq}).encode())
    transactional.abort_transaction(30)
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    plain.produce(sink, json.dumps({"key": "k", "seq": 3}).encode())  # an at-least-once retry's copy
    plain.produce(sink, json.dumps({"key": "k", "n": 7}).encode())  # an aggregate's row: nothing to match
    plain.flush(30)
    reader.stop(idle=1.5)
    assert reader.error is None
    assert sorted(reader.arrivals) == list(range(10))
    assert (reader.records, reader.unmatched) == (12, 1)
    produced = production_times(broker.bootstrap, topic)
    assert sorted(produced) == list(range(load["sent"]))
    started = load["started_at"]
    assert all(started - 0.01 <= at <= started + load["seconds"] + 0.01 for at in produced.values())
    measured = latencies(reader.arrivals, produced, since=started)
    assert len(measured) == 10 and all(0 <= ms < 120_000 for _, ms in measured)
    assert all(at <= time.time() for at, _ in measured)
