"""Chaos: the Kafka broker killed and restarted (same data, same ports) while a Kafka-to-files
query runs in the pool runtime under load. The query recovers by itself, and the sink holds
exactly what the topic holds: nothing lost, nothing twice.

Real parts: a broker of its own (so the session's shared one is not disturbed), the runtime
process, the producer. Seeded by `--chaos-seed`; `--chaos-rounds` restarts (at most 3 by default
runs of `make test`, since each costs a broker start)."""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from sluice.testing.kafka import KafkaBroker
from sluice.testing.load import LoadPlan, generate
from sluice.testing.runtime_process import RuntimeProcess, kafka_to_files, sink_seqs
from sluice.testing.waiting import wait_for

pytestmark = [pytest.mark.soak, pytest.mark.chaos, pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow]


def topic_seqs(broker: KafkaBroker, topic: str) -> list[int]:
    """Every record's seq in the topic, read from the start."""
    from confluent_kafka import Consumer

    total = broker.count(topic)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"truth-{time.time_ns()}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    seqs: list[int] = []
    deadline = time.time() + 60
    try:
        while len(seqs) < total and time.time() < deadline:
            seqs += [json.loads(m.value())["seq"] for m in consumer.consume(1000, timeout=1) if not m.error()]
    finally:
        consumer.close()
    return seqs


def test_a_broker_restarted_mid_run_loses_nothing(own_broker: KafkaBroker, tmp_path: Path, chaos_rounds: int,
                                                  chaos_seed: int) -> None:
    rng = random.Random(chaos_seed)
    rounds = min(chaos_rounds, 3) if chaos_rounds <= 5 else chaos_rounds
    topic = own_broker.create_topic("orders", partitions=2)
    out = tmp_path / "out"
    runtime = RuntimeProcess(tmp_path / "runtime")
    runtime.workdir.mkdir()
    done = threading.Event()
    load = threading.Thread(target=lambda: generate(LoadPlan(topic, 200, None), own_broker.bootstrap, stop=done.is_set),
                            daemon=True)
    restarts: list[str] = []
    try:
        runtime.start()
        runtime.register(kafka_to_files(own_broker.bootstrap, topic, out))
        load.start()
        for round_ in range(rounds):
            wait_for(lambda: (s := runtime.status("chaos", "orders")) is not None and s.phase == "Running" and s.batches > 0,
                     180, f"round {round_}: the query running (seed {chaos_seed}, restarts {restarts})")
            time.sleep(rng.uniform(1.0, 5.0))
            down = rng.uniform(1.0, 8.0)
            own_broker.restart(down=down)
            restarts.append(f"down {down:.1f}s")
        time.sleep(5)
        done.set()
        load.join(60)
        truth = Counter(topic_seqs(own_broker, topic))
        assert sum(truth.values()) > 0

        def caught_up() -> bool:
            return Counter(sink_seqs(out)) == truth

        status = runtime.status("chaos", "orders")
        wait_for(caught_up, 180, f"the sink to hold what the topic holds (seed {chaos_seed}, restarts {restarts}, "
                                 f"status {status and (status.phase, status.message)})")
        status = runtime.status("chaos", "orders")
        assert status is not None and status.phase == "Running", status
        print(f"chaos seed {chaos_seed}: {rounds} broker restarts ({', '.join(restarts)}), "
              f"{sum(truth.values())} records, 0 lost, 0 twice")
    finally:
        done.set()
        runtime.stop()
