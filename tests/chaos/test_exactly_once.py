"""Chaos in one run against every sink's guarantee: three queries read one topic under load in
the pool runtime (local-cluster mode: executors are JVMs of their own), one per sink and delivery
(Kafka exactlyOnce, Kafka atLeastOnce, files), while an executor is SIGKILLed mid-run, the broker
is killed and restarted, and the runtime (driver and JVM) is SIGKILLed at a random point and then
between a batch's write and its commit log. Every produced event is then read at each sink (Kafka
as a read_committed consumer sees it): none is lost anywhere; none is there twice with
exactlyOnce or files; with atLeastOnce the batch replayed after the driver's kill is there twice.

The kill "between the write and the commit log" is made exact: after the SIGKILL, each query's
newest commit log entry is removed, so Spark runs that batch again (its rows were written). Real
parts: the runtime process, its executor JVMs, a broker of its own, the producer. Seeded by
`--chaos-seed`; `--chaos-rounds` above 3 sets the executor kills (else 1). The multi-round soaks
of runtime kills and broker restarts alone are `tests/chaos/test_runtime_kills.py` and
`test_broker_restart.py` (marker `soak`)."""

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
from sluice.testing.runtime_process import RuntimeProcess, kafka_to_files, sink_seqs
from sluice.testing.waiting import wait_for

pytestmark = [pytest.mark.chaos, pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow]

DELIVERIES = {"once": "exactlyOnce", "least": "atLeastOnce"}


def kafka_to_kafka(bootstrap: str, source: str, sink: str, delivery: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "sluice.dev/v1alpha1", "kind": "StreamingQuery",
        "metadata": {"name": name, "namespace": "chaos"},
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


def newest_commit(workdir: Path, name: str) -> Path:
    commits = sorted(workdir.rglob(f"chaos/{name}/commits/[0-9]*"), key=lambda f: int(f.name))
    assert commits, f"no commit log for {name} under {workdir}"
    return commits[-1]


def test_faults_lose_nothing_and_double_rows_only_at_least_once(own_broker: KafkaBroker, tmp_path: Path,
                                                                 chaos_rounds: int, chaos_seed: int) -> None:
    rng = random.Random(chaos_seed)
    source = own_broker.create_topic("orders", partitions=2)
    sinks = {name: own_broker.create_topic(f"ledger-{name}", partitions=2) for name in DELIVERIES}
    out = tmp_path / "out"
    manifests = [kafka_to_kafka(own_broker.bootstrap, source, sinks[name], delivery, name)
                 for name, delivery in DELIVERIES.items()] + [kafka_to_files(own_broker.bootstrap, source, out)]
    names = [m["metadata"]["name"] for m in manifests]
    runtime = RuntimeProcess(tmp_path / "runtime", master="local-cluster[2,1,1024]",
                             conf=("spark.executor.memory=512m",))
    runtime.workdir.mkdir()
    done = threading.Event()
    sent: list[int] = []
    load = threading.Thread(target=lambda: sent.append(generate(LoadPlan(source, 200, None), own_broker.bootstrap,
                                                                  stop=done.is_set)["sent"]), daemon=True)
    faults: list[str] = []

    def least_batches() -> int | None:
        counts = []
        for name in names:
            s = runtime.status("chaos", name)
            if s is None or s.phase != "Running":
                return None
            counts.append(s.batches)
        return min(counts)

    def committing(after: int = 0) -> int:
        """Every query's batch count past `after` (the least of them)."""
        return int(wait_for(lambda: (n := least_batches()) is not None and n > after and n, 240,
                            f"batches committed after {faults} (seed {chaos_seed})"))

    def start() -> None:
        runtime.start()
        for manifest in manifests:
            runtime.register(manifest)

    try:
        start()
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
        start()
        committing()
        done.set()
        load.join(60)
        assert sent and sent[0] > 0
        expected = sent[0]

        def everywhere() -> bool:
            return (all(len(set(seqs(own_broker, topic))) >= expected for topic in sinks.values())
                    and len(set(sink_seqs(out))) >= expected)

        # each look reads every sink whole (tens of thousands of records): not five times a second,
        # each look's CPU is the runtime's while it catches up
        wait_for(everywhere, 180, f"every produced event at every sink (seed {chaos_seed}, faults {faults})", every=2)
        # the driver killed between a batch's write and its commit log, made exact: with the load
        # stopped, each query's last batch's rows are written and committed; the kill, then its
        # commit log entry removed, leave what a kill in between leaves, so a restart runs it again
        time.sleep(2)
        runtime.kill()
        for name in names:
            last = newest_commit(runtime.workdir, name)
            last.unlink()
            faults.append(f"runtime killed, {name}'s batch {last.name} uncommitted")
        start()
        committing()
        time.sleep(3)  # a row written twice late shows by now
        at_sinks = {name: Counter(seqs(own_broker, topic)) for name, topic in sinks.items()}
        at_sinks["files"] = Counter(sink_seqs(out))
        twice = {name: sum(n - 1 for n in at_sink.values()) for name, at_sink in at_sinks.items()}
        report = (f"seed {chaos_seed}: {expected} events; at the sinks "
                  + ", ".join(f"{DELIVERIES.get(name, name)} {len(at_sinks[name])} ({twice[name]} twice)"
                              for name in at_sinks)
                  + f"; faults: {'; '.join(faults)}")
        print(report)
        for at_sink in at_sinks.values():
            assert len(at_sink) == expected and set(at_sink) == set(range(expected)), report
        assert twice["once"] == 0 and twice["files"] == 0, report
        assert twice["least"] > 0, report  # Spark's own writer wrote the replayed batch's rows again
    finally:
        done.set()
        runtime.stop()
