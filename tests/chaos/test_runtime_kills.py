"""Chaos: the pool runtime (driver and JVM) SIGKILLed at random points while a Kafka-to-files
query runs under load, restarted on the same work directory and the query registered again (what
the Deployment and the operator do). After every restart every produced event is at the sink
exactly once.

Real parts: the runtime process (`python -m sluice.runtime`, local Spark), the broker, the
control API over loopback HTTP with its token. Seeded: `--chaos-seed` replays a failure's kill
times; `--chaos-rounds` runs a longer soak.
"""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path

import pytest

from sluice.testing.kafka import KafkaBroker
from sluice.testing.load import LoadPlan, generate
from sluice.testing.runtime_process import RuntimeProcess, kafka_to_files, sink_seqs
from sluice.testing.waiting import wait_for

pytestmark = [pytest.mark.soak, pytest.mark.chaos, pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow]


def test_a_runtime_killed_mid_run_loses_and_duplicates_nothing(broker: KafkaBroker, tmp_path: Path,
                                                               chaos_rounds: int, chaos_seed: int) -> None:
    rng = random.Random(chaos_seed)
    topic = broker.create_topic(f"chaos-{chaos_seed}-{int(time.time())}", partitions=2)
    out = tmp_path / "out"
    manifest = kafka_to_files(broker.bootstrap, topic, out)
    runtime = RuntimeProcess(tmp_path / "runtime")
    runtime.workdir.mkdir()
    done = threading.Event()
    sent: list[int] = []
    load = threading.Thread(target=lambda: sent.append(generate(LoadPlan(topic, 200, None), broker.bootstrap,
                                                                  stop=done.is_set)["sent"]), daemon=True)
    kills: list[str] = []
    try:
        runtime.start()
        runtime.register(manifest)
        load.start()
        for round_ in range(chaos_rounds):
            batches = wait_for(lambda: (s := runtime.status("chaos", "orders")) is not None and s.batches > 0 and s.batches,
                               120, f"round {round_}: a committed batch after the restart (seed {chaos_seed})")
            delay = rng.uniform(0.5, 4.0)
            time.sleep(delay)
            runtime.kill()
            kills.append(f"{delay:.2f}s after batch {batches}")
            runtime.start()
            runtime.register(manifest)  # the operator's resume does this after a restart
        done.set()
        load.join(30)
        assert sent and sent[0] > 0
        expected = sent[0]
        wait_for(lambda: len(set(sink_seqs(out))) >= expected, 120,
                 f"every produced event at the sink (seed {chaos_seed}, kills {kills})")
        time.sleep(3)  # a duplicate written late would show by now
        seqs = sink_seqs(out)
        duplicates = len(seqs) - len(set(seqs))
        assert len(kills) == chaos_rounds
        assert duplicates == 0 and len(set(seqs)) == expected, (
            f"seed {chaos_seed}: {len(set(seqs))} of {expected} events at the sink, {duplicates} twice; kills: {kills}")
        print(f"chaos seed {chaos_seed}: {chaos_rounds} runtime kills ({'; '.join(kills)}), "
              f"{expected} events, 0 lost, 0 twice")
    finally:
        done.set()
        runtime.stop()
