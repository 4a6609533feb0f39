"""What a benchmark run of a scenario needs on either target (`cameo` locally, `node` on pods):
the variants, each query's manifest for a run, the load, the drain, and the machine's cores."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, cast

from sluice.api.constants import POLICIES
from sluice.api.query import Delivery, KafkaSink, StreamingQuery
from sluice.api.scenario import LoadSpec, Scenario

from .procfs import cpu_seconds, machine_busy_seconds

AUTO = "auto"
"""The variant beside the policies: cameo, with each query in the execution mode its manifest asks
(by default `auto`: Spark's Real-time Mode where the SLA needs it). Under fifo, fair and cameo
every query runs in micro-batches, so the variants compare Real-time Mode with micro-batches."""
LANE = "auto-lane"
"""`auto`, but the Real-time queries run in an application of their own (a second `sluice run`,
as a second Spark application per pool would): what the slot reservation is compared with."""
VARIANTS = (*POLICIES, AUTO, LANE)


def for_run(query: StreamingQuery, load: LoadSpec, bootstrap: str, topic: str, variant: str,
             sink_topic: str | None = None, critical: bool = False, delivery: Delivery | None = None) -> dict[str, Any]:
    """The manifest one run applies: the scenario's, on this run's topics, in the variant's mode;
    `delivery` (`sluice bench cameo --delivery`) overrides every Kafka sink's."""
    manifest = query.model_dump(mode="json", by_alias=True, exclude_none=True, exclude={"status"})
    if critical:  # the scenario's `critical` is the query's own `spec.sla.critical`
        manifest["spec"]["sla"]["critical"] = True
    manifest["spec"]["source"]["bootstrapServers"] = bootstrap
    manifest["spec"]["source"]["topic"] = topic
    manifest["spec"]["source"]["startingOffsets"] = "earliest"
    if isinstance(query.spec.sink, KafkaSink) and sink_topic is not None:
        manifest["spec"]["sink"]["bootstrapServers"] = bootstrap
        manifest["spec"]["sink"]["topic"] = sink_topic
        if delivery is not None:
            manifest["spec"]["sink"]["delivery"] = delivery
    if variant not in (AUTO, LANE):
        manifest["spec"]["execution"] = "microBatch"
    if load.trigger is not None:
        manifest["spec"]["trigger"] = {"interval": load.trigger.text}
    return manifest


DRAIN_MARGIN_S = 2.0
"""Seconds of the drain tail beyond the longest SLA (a batch's commit after the deadline)."""


def drain_seconds(queries: list[StreamingQuery]) -> float:
    """How long a run goes on after its load stops: any row still unread then is late."""
    return max((q.spec.sla.latencyTarget.seconds for q in queries), default=0.0) + DRAIN_MARGIN_S


BROKER_WARMUP_S = 30.0
"""Seconds of the scenario's load a benchmark's fresh broker carries before the first run, at most
the scenario's own warm-up. A broker that has run for a while has compiled its produce and fetch
paths; a fresh one compiles them (0.5-0.6 cores for its first 30 s at two-tenants' rate, 0.3 after)
on the cores the runs need, and only the first run of a benchmark, one policy's, would meet it so."""


def warm_broker(broker: Any, scenario: Scenario, log: Callable[[str], None]) -> dict[str, Any]:
    """Produce the scenario's total rate into a scratch topic for BROKER_WARMUP_S (at most the
    scenario's warm-up) while a consumer reads it back, before a benchmark's first run; returns
    what was done (results.json's `broker_warmup`)."""
    from confluent_kafka import Consumer

    from sluice.testing.load import LoadPlan, generate

    seconds = min(BROKER_WARMUP_S, scenario.warmup.seconds)
    log(f"warming the broker: the scenario's load into a scratch topic for {seconds:g} s, read back as it goes")
    rate = sum(q.load.rate for q in scenario.queries)
    topic = f"sluice-broker-warmup-{int(time.time())}"
    broker.create_topic(topic, partitions=4)
    stop, read = threading.Event(), [0]

    def consume() -> None:
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": topic, "auto.offset.reset": "earliest",
                             "enable.auto.commit": False})
        consumer.subscribe([topic])
        try:
            while not stop.is_set():
                read[0] += sum(1 for m in consumer.consume(1000, 0.2) if m.error() is None)
        finally:
            consumer.close()

    reader = threading.Thread(target=consume, daemon=True)
    reader.start()
    began = time.monotonic()
    sent = generate(LoadPlan(topic, rate, seconds), broker.bootstrap)["sent"] if seconds > 0 else 0
    stop.set()
    reader.join(timeout=10)
    done = {"topic": topic, "seconds": round(time.monotonic() - began, 1), "rate": rate, "sent": sent, "read": read[0]}
    log(f"broker warm: {sent} events sent, {read[0]} read in {done['seconds']:g} s")
    return done


def start_load(scenario: Scenario, queries: list[StreamingQuery], topics: list[str], bootstrap: str,
               seconds: float, place: Callable[[], None] | None = None,
               ) -> tuple[list[threading.Thread], threading.Event, dict[str, Any]]:
    """One producer thread per query, each its scenario load (bursts included) for `seconds` or
    until the event is set; returns the threads, the event and {query key: the load's result},
    filled as each load ends. `place`: called first on each producer thread, before its client
    starts threads of its own (`placement.Placement.load_thread`)."""
    from sluice.api.scenario import Burst
    from sluice.testing.load import LoadPlan, generate

    stop, sent = threading.Event(), cast("dict[str, Any]", {})

    def produce(i: int) -> None:
        if place is not None:
            place()
        load = scenario.queries[i].load
        bursts = [Burst(b.at.seconds, b.length.seconds, b.factor) for b in load.bursts]
        sent[queries[i].key] = generate(LoadPlan(topics[i], load.rate, seconds, bursts, load.keys), bootstrap, stop.is_set)

    producers = [threading.Thread(target=produce, args=(i,), daemon=True) for i in range(len(queries))]
    for p in producers:
        p.start()
    return producers, stop, sent


def machine_sample(pids: list[int]) -> tuple[float, float, float]:
    """(wall seconds, the machine's busy CPU seconds, the runs' CPU seconds: each `sluice run` and
    its Spark JVM) now."""
    return time.monotonic(), machine_busy_seconds(), sum(cpu_seconds(pid) for pid in pids)


def machine_use(began: tuple[float, float, float], ended: tuple[float, float, float]) -> dict[str, float]:
    """The cores busy while the load ran (pure): the machine's, the runs' own, and the rest (the
    broker, the load generator, the sink readers, anything else on the machine), which the
    runs' batches could not use (what-if's `--other-cores`)."""
    wall = max(ended[0] - began[0], 1e-9)
    busy, runs = (ended[1] - began[1]) / wall, (ended[2] - began[2]) / wall
    return {"seconds": round(wall, 1), "busy_cores": round(busy, 3), "run_cores": round(runs, 3),
            "other_cores": round(max(busy - runs, 0.0), 3)}
