"""`sluice bench rescale`'s sink check on real Spark and Kafka: lost and doubled counted per key."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from sluice.api.manifest import load_query
from sluice.bench import rescale
from sluice.runtime.host import QueryHost
from sluice.testing.kafka import KafkaBroker
from sluice.testing.load import LoadPlan, generate
from sluice.testing.waiting import wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow]


def test_each_key_s_last_count_is_checked_against_its_own_events(kafka_spark: Any, broker: KafkaBroker, topic: str,
                                                                  tmp_path: Path) -> None:
    sent = generate(LoadPlan(topic, rate=1000, duration=0.35, keys=7), broker.bootstrap)["sent"]
    sink = tmp_path / "sink"
    host = QueryHost(kafka_spark, tmp_path / "ck", None)
    hosted = host.add(load_query(rescale.manifest(broker.bootstrap, topic, sink, "5s")))
    try:
        assert hosted.phase == "Running", hosted.message
        wait_for(lambda: hosted.input_rows >= sent, 120, "every event read")
        time.sleep(1.5)  # the batch that read them has committed its files
    finally:
        handle = hosted.handle  # as the benchmark does: the query's handle, kept across its stop
        host.stop_all()
    consumed, counted, mismatched = rescale._sink_check(kafka_spark, handle, sink, broker.bootstrap)
    assert consumed == counted == sent > 0 and mismatched == []
    # a later batch that lost 2 of k0's events and counted 2 of k1's twice: the net sum is unchanged
    latest = {r["key"]: r["n"] for r in kafka_spark.read.json(str(sink)).orderBy("batch_id").collect()}
    forged = sink / "batch_id=999999"
    forged.mkdir()
    (forged / "part-0.json").write_text(json.dumps({"key": "k0", "n": latest["k0"] - 2}) + "\n"
                                        + json.dumps({"key": "k1", "n": latest["k1"] + 2}) + "\n")
    consumed, counted, mismatched = rescale._sink_check(kafka_spark, handle, sink, broker.bootstrap)
    assert consumed == counted == sent
    assert rescale.per_key(mismatched) == (2, 2)


def test_state_mb_s_values_are_kept_in_the_state_and_only_their_length_written(kafka_spark: Any, broker: KafkaBroker, topic: str,
                                                                          tmp_path: Path) -> None:
    value = 2000
    sent = generate(LoadPlan(topic, rate=1000, duration=0.35, keys=7), broker.bootstrap)["sent"]
    sink = tmp_path / "sink"
    host = QueryHost(kafka_spark, tmp_path / "ck", None)
    hosted = host.add(load_query(rescale.manifest(broker.bootstrap, topic, sink, "5s", value_bytes=value, partitions=4)))
    try:
        assert hosted.phase == "Running", hosted.message
        wait_for(lambda: hosted.input_rows >= sent, 120, "every event read")
        time.sleep(1.5)
        with host.lock:
            rows, held = hosted.state_rows, hosted.state_bytes
    finally:
        handle = hosted.handle
        host.stop_all()
    # each of the 7 keys' state holds its 2,000-byte value besides the count (Spark's own estimate)
    assert rows == 7 and held >= 7 * value
    written = kafka_spark.read.json(str(sink))
    assert set(written.columns) == {"key", "n", "pad_bytes", "batch_id"}
    assert {r["pad_bytes"] for r in written.collect()} == {value}
    consumed, counted, mismatched = rescale._sink_check(kafka_spark, handle, sink, broker.bootstrap)
    assert consumed == counted == sent and mismatched == []
