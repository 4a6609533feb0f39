"""DS2's modes, lag and ineffective-scaling rules through the real operator and apiserver, on a
real runtime reading a real Kafka broker.

The runtime runs Spark in local mode (no kubelet here), so it refuses executor targets: what is
tested is the operator's handling, which only reads the runtime's measurements and writes the
pool's status. A Kafka query capped by `maxOffsetsPerTrigger` reads far less than its producer
writes, so its lag grows; a scale-up cannot raise what a capped trigger reads, which is exactly
an ineffective scaling (here the executors also never come, which the check cannot tell apart).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sluice.testing.controlplane import ControlPlane, free_port
from sluice.testing.kafka import KafkaBroker
from sluice.testing.load import EVENT_SCHEMA, LoadPlan, generate
from sluice.testing.waiting import wait_for

from .test_operator import World, open_world, pool

pytestmark = [pytest.mark.cluster, pytest.mark.spark, pytest.mark.kafka, pytest.mark.slow]


@pytest.fixture(scope="module")
def kafka_world(crds_installed: ControlPlane, spark: Any, broker: KafkaBroker,
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[World, KafkaBroker]]:
    with open_world(crds_installed, spark, Path(tmp_path_factory.mktemp("ck"))) as world:
        yield world, broker


def capped_query(name: str, pool_name: str, bootstrap: str, topic: str) -> dict[str, Any]:
    return {"apiVersion": "sluice.dev/v1alpha1", "kind": "StreamingQuery",
            "metadata": {"name": name, "namespace": "team-a"},
            "spec": {"pool": pool_name,
                     "source": {"type": "kafka", "bootstrapServers": bootstrap, "topic": topic, "schema": EVENT_SCHEMA,
                                "startingOffsets": "earliest", "maxOffsetsPerTrigger": 50},
                     "pipeline": [{"filter": "amount >= 0"}], "sink": {"type": "memory"},
                     "sla": {"latencyTarget": "2s"}, "trigger": {"interval": "1s"}}}


@pytest.fixture(scope="module")
def backlog(kafka_world: tuple[World, KafkaBroker]) -> Iterator[tuple[World, str, str]]:
    """A producer at 400 events/s into a topic two capped queries read at 50 per 1 s batch."""
    world, broker = kafka_world
    topic = broker.create_topic("backlog", partitions=1)
    stop = threading.Event()
    thread = threading.Thread(target=generate, args=(LoadPlan(topic, 400), broker.bootstrap), kwargs={"stop": stop.is_set},
                              daemon=True)
    thread.start()
    try:
        yield world, topic, broker.bootstrap
    finally:
        stop.set()
        thread.join(timeout=30)


def pool_status(world: World, name: str) -> dict[str, Any]:
    return dict(((world.get("sp", name) or {}).get("status")) or {})


def test_recommend_mode_shows_ds2s_choice_and_changes_nothing(backlog: tuple[World, str, str]) -> None:
    world, topic, bootstrap = backlog
    port = free_port()
    world.apply(pool("advisor", port, minExecutors=1, maxExecutors=3,
                     autoscaling={"mode": "recommend", "utilization": 0.0001, "stabilizationWindow": "0s"}))
    world.serve_pool_runtime("advisor", port)
    world.apply(capped_query("advised", "advisor", bootstrap, topic))
    # The producer writes 400 events/s; status' rate is the latest offsets' growth over the last few
    # batches, so its first readings span the producer's start (197/s was seen). Wait for a reading
    # over a window of steady production: within half of 400/s either way (batches a second apart
    # on a loaded machine move a window's ends by up to a batch).
    readings: list[float] = []

    def settled() -> dict[str, object] | None:
        s = (world.get("sq", "advised", "team-a") or {}).get("status") or {}
        if s.get("kafkaLag", 0) > 0 and s.get("producerRate", 0) > 0:
            readings.append(float(s["producerRate"]))
            return s if 200 < readings[-1] < 600 else None
        return None

    try:
        wait_for(settled, timeout=120, every=1, what="a producer rate near 400/s in status")
    except AssertionError as timed_out:
        raise AssertionError(f"{timed_out}; producer rates read: {readings}") from None
    status = wait_for(lambda: (s := pool_status(world, "advisor")).get("autoscaling", {}).get("recommendation", {})
                      .get("executors") == 3 and s, timeout=60, every=1,
                      what="DS2's recommendation (maxExecutors, at this utilization) in the pool's status")
    auto = status["autoscaling"]
    assert auto["mode"] == "recommend" and auto["recommendation"]["executors"] == 3
    assert auto["lagRows"] > 0
    assert status["executors"]["target"] == 1 and "lastScalingDecision" not in status  # nothing changed
    assert "capped at maxExecutors 3" in auto["recommendation"]["reason"]
    assert "growing from 1" in auto["recommendation"]["reason"]


def test_a_scale_up_that_adds_no_throughput_is_recorded_as_ineffective(backlog: tuple[World, str, str]) -> None:
    world, topic, bootstrap = backlog
    port = free_port()
    # both pools' runtimes are the test's one QueryHost, so this pool sees both capped queries
    world.apply(pool("capped", port, minExecutors=1, maxExecutors=5,
                     autoscaling={"utilization": 0.0001, "stabilizationWindow": "4s"}))
    world.serve_pool_runtime("capped", port)
    world.apply(capped_query("stuck", "capped", bootstrap, topic))
    grown = wait_for(lambda: (d := pool_status(world, "capped").get("lastScalingDecision")) and d,
                     timeout=120, every=1, what="DS2 growing the pool behind its backlog")
    assert (grown["fromExecutors"], grown["toExecutors"]) == (1, 5)
    bad = wait_for(lambda: pool_status(world, "capped").get("autoscaling", {}).get("ineffectiveScaling"),
                   timeout=60, every=1, what="the scale-up recorded as ineffective")
    assert (bad["fromExecutors"], bad["toExecutors"]) == (1, 5)
    assert bad["expectedRate"] > 0 and bad["observedRate"] < 0.1 * bad["expectedRate"]
    assert bad["generation"] == world.get("sp", "capped")["metadata"]["generation"]  # type: ignore[index]
    events = world.plane.kubectl("get", "events", "-A", "--field-selector", "involvedObject.name=capped").stdout
    assert "IneffectiveScaling" in events
    # a spec change clears the record: DS2 may try again
    world.apply(pool("capped", port, minExecutors=1, maxExecutors=5,
                     autoscaling={"utilization": 0.0001, "stabilizationWindow": "5s"}))
    wait_for(lambda: not pool_status(world, "capped").get("autoscaling", {}).get("ineffectiveScaling"),
             timeout=60, every=1, what="the record cleared by the spec change")
