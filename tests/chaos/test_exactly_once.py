"""Chaos against both Kafka deliveries: a Kafka-to-Kafka query under load in the pool runtime
(local-cluster mode: executors are JVMs of their own) while its executors are SIGKILLed mid-run,
its broker is killed and restarted, and the runtime (driver and JVM) is SIGKILLed between a
batch's write and its commit log. Every produced event is then read at the sink as a
read_committed consumer sees it: with exactlyOnce none is lost and none is there twice; with
atLeastOnce none is lost, and the batch replayed after the driver's kill is there twice.

The kill "between the write and the commit log" is made exact: after the SIGKILL, the newest
commit log entry is removed, so Spark runs that batch again (its rows were written). Real parts:
the runtime process, its executor JVMs, a broker of its own, the producer. Seeded by
`--chaos-seed`; `--chaos-rounds` above 3 sets the executor kills (else 1)."""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from sluice.testing.kafka import KafkaBroker
from sluice.testing.load import EVENT_SCHEMA, LoadPlan, generate
from sluice.testing.runtime_process import RuntimeProcess
from sluice.testing.waiting import wait_for

pytestmark = [pytest.mark.chaos, pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow]


def kafka_to_kafka(bootstrap: str, source: str, sink: str, delivery: str) -> dict[str, Any]:
    return {
        "apiVersion": "sluice.dev/v1alpha1", "kind": "StreamingQuery",
        "metadata": {"name": "payments", "namespace": "chaos"},
        "spec": {"pool": "p", "sla": {"latencyTarget": "5s"}, "trigger": {"interval": "300ms"},
                 "execution": "microBatch",
                 "source": {"type": "kafka", "bootstrapServers": bootstrap, "topic": source, "schema": EVENT_SCHEMA,
                            "startingOffsets": "earliest"},
                 "pipeline": [{"select": ["key", "seq", "amount"]}],
                 "sink": {"type": "kafka", "bootstrapServers": bootstrap, "topic": sink, "delivery": delivery},
                 "resources": {"shufflePartitions": 2}},
    }


def seqs(broker: KafkaBroker, topic: str) -> list[int]:
    return [json.loads(value)["seq"] for value in broker.values(topic)]


def newest_commit(workdir: Path) -> Path:
    commits = sorted(workdir.rglob("commits/[0-9]*"), key=lambda f: int(f.name))
    assert commits, f"no commit log under {workdir}"
    return commits[-1]


@pytest.mark.parametrize("delivery", ["atLeastOnce", "exactlyOnce"])
def test_faults_double_rows_only_at_least_once(own_broker: KafkaBroker, tmp_path: Path, chaos_rounds: int,
                                               chaos_seed: int, delivery: str) -> None:
    rng = random.Random(f"{chaos_seed}-{delivery}")
    source, sink = own_broker.create_topic("orders", partitions=2), own_broker.create_topic("ledger", partitions=2)
    manifest = kafka_to_kafka(own_broker.bootstrap, source, sink, delivery)
    runtime = RuntimeProcess(tmp_path / "runtime", master="local-cluster[2,1,1024]",
                             conf=("spark.executor.memory=512m",))
    runtime.workdir.mkdir()
    done = threading.Event()
    sent: list[int] = []
    load = threading.Thread(target=lambda: sent.append(generate(LoadPlan(source, 200, None), own_broker.bootstrap,
                                                                  stop=done.is_set)["sent"]), daemon=True)
    faults: list[str] = []

    def committing(after: int = 0) -> int:
        return int(wait_for(lambda: (s := runtime.status("chaos", "payments")) is not None and s.phase == "Running"
                            and s.batches > after and s.batches, 240,
                            f"batches committed after {faults} (seed {chaos_seed})"))

    try:
        runtime.start()
        runtime.register(manifest)
        load.start()
        # executors killed mid-write, their tasks run again elsewhere: one in `make test` (each
        # costs an executor's relaunch, ~15 s here), --chaos-rounds for a soak
        for _ in range(1 if chaos_rounds <= 3 else chaos_rounds):
            batches = committing()
            time.sleep(rng.uniform(0.5, 3.0))
            faults.append(f"executor {runtime.kill_executor(rng)} killed after batch {batches}")
            committing(batches + 2)
        down = rng.uniform(1.0, 5.0)  # the broker: open transactions aborted, writes retried
        own_broker.restart(down=down)
        faults.append(f"broker down {down:.1f} s")
        batches = committing(committing())
        time.sleep(rng.uniform(0.0, 1.0))
        runtime.kill()  # the driver at a random point: the batch in flight, if any, runs again
        faults.append(f"runtime killed after batch {batches}")
        runtime.start()
        runtime.register(manifest)
        committing()
        done.set()
        load.join(60)
        assert sent and sent[0] > 0
        expected = sent[0]
        wait_for(lambda: len(set(seqs(own_broker, sink))) >= expected, 180,
                 f"every produced event at the sink (seed {chaos_seed}, faults {faults})")
        # the driver killed between a batch's write and its commit log, made exact: with the load
        # stopped, the last batch's rows are written and committed; the kill, then its commit log
        # entry removed, leave what a kill in between leaves, so a restart runs it again
        time.sleep(2)
        runtime.kill()
        last = newest_commit(runtime.workdir)
        last.unlink()
        faults.append(f"runtime killed, batch {last.name} uncommitted")
        runtime.start()
        runtime.register(manifest)
        committing()
        time.sleep(3)  # a row written twice late shows by now
        at_sink = Counter(seqs(own_broker, sink))
        twice = sum(n - 1 for n in at_sink.values())
        report = (f"{delivery}, seed {chaos_seed}: {expected} events, {len(at_sink)} at the sink, {twice} twice; "
                  f"faults: {'; '.join(faults)}")
        print(report)
        assert len(at_sink) == expected and set(at_sink) == set(range(expected)), report
        if delivery == "exactlyOnce":
            assert twice == 0, report
        else:  # Spark's own writer wrote the replayed batch's rows again
            assert twice > 0, report
    finally:
        done.set()
        runtime.stop()
