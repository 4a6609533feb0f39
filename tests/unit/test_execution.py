"""The execution mode per query, chosen by hand-computed cases."""

from __future__ import annotations

import time

import pytest

from sluice.api.query import realtime_problem
from sluice.runtime.batch_budget import BatchMeter
from sluice.scheduler.execution import (
    BATCH_CPU_PRIOR,
    Budget,
    choose,
    micro_batch_floor,
    reservation_problem,
    reserved_slots,
)
from sluice.scheduler.intervals import COMMIT_PRIOR, FIXED_PRIOR, MARGIN, MIN_INTERVAL


def test_the_floor_is_the_shortest_interval_plus_a_batch_over_the_margin() -> None:
    assert micro_batch_floor() == pytest.approx((MIN_INTERVAL + FIXED_PRIOR + COMMIT_PRIOR) / MARGIN)
    assert micro_batch_floor(fixed=0.3, commit=0.1) == pytest.approx((0.2 + 0.3 + 0.1) / 0.8)  # 750 ms


@pytest.mark.parametrize(
    ("requested", "sla", "problem", "mode", "words"),
    [
        ("auto", 0.2, None, "realTime", "below the micro-batch floor (750 ms)"),
        ("auto", 0.75, None, "microBatch", "micro-batches keep a 750 ms SLA"),
        ("auto", 30.0, None, "microBatch", "keep a 30 s SLA"),
        ("auto", 0.2, "the sink is noop", "microBatch", "will miss it"),
        ("microBatch", 0.05, None, "microBatch", "spec.execution sets it."),
        ("realTime", 60.0, None, "realTime", "spec.execution sets it."),
    ],
)
def test_choices(requested: str, sla: float, problem: str | None, mode: str, words: str) -> None:
    choice = choose(requested, sla, problem, floor=0.75)
    assert choice.mode == mode and words in choice.reason


def test_what_real_time_mode_can_run() -> None:
    assert realtime_problem("kafka", "kafka", ["filter", "select", "withColumn"]) is None
    assert "reads Kafka only" in (realtime_problem("files", "kafka", ["filter"]) or "")
    assert "writes Kafka only" in (realtime_problem("kafka", "noop", ["filter"]) or "")
    assert "groupBy" in (realtime_problem("kafka", "kafka", ["watermark", "groupBy", "aggregate"]) or "")


def test_real_time_queries_reserve_a_task_slot_per_source_partition() -> None:
    from sluice.api.manifest import load_query
    from sluice.runtime.realtime import local_master, reserved_total

    def query(name: str, sla: str, sink: str = "kafka") -> object:
        return load_query({
            "apiVersion": "sluice.dev/v1alpha1", "kind": "StreamingQuery", "metadata": {"name": name, "namespace": "t"},
            "spec": {"pool": "p", "sla": {"latencyTarget": sla}, "pipeline": [{"filter": "length(value) > 1"}],
                     "source": {"type": "kafka", "bootstrapServers": "k:9092", "topic": name},
                     "sink": {"type": sink, **({"bootstrapServers": "k:9092", "topic": "out"} if sink == "kafka" else {})}},
        })

    partitions = {"fast": 3, "unknown": None, "slow": 8}
    queries = [query("fast", "100ms"), query("unknown", "100ms"), query("slow", "30s"), query("fast2", "100ms", sink="noop")]
    # fast: 3 partitions; unknown: 1; slow runs in micro-batches; fast2 cannot (noop sink)
    assert reserved_total(queries, lambda q: reserved_slots(partitions.get(q.metadata.name))) == 4  # type: ignore[attr-defined]
    assert local_master(2, 4) == "local[6]" and local_master(2, 0) == "local[2]"


def test_a_real_time_reservation_must_leave_the_micro_batch_queries_their_slots() -> None:
    assert reserved_slots(None) == 1 and reserved_slots(3) == 3 and reserved_slots(3, 8) == 8 and reserved_slots(0, None) == 1
    # 8 slots, 2 held, 3 wanted: 3 left, and the micro-batch queries need 3
    assert reservation_problem("shared", 8, 2, 3, 3) is None
    refused = reservation_problem("shared", 8, 2, 3, 4)
    assert refused == ("a Real-time query holds 3 task slots while it runs and pool 'shared' has 8 at most with 2 "
                       "already reserved, leaving 3 of the 4 its micro-batch queries need; raise the pool's "
                       "maxExecutors or set spec.execution to microBatch.")
    # the micro-batch queries always keep one slot, even with no measured need
    assert reservation_problem("shared", 4, 0, 4, 0) is not None and reservation_problem("shared", 4, 0, 3, 0) is None


def test_auto_weighs_a_critical_querys_micro_batches_against_the_cores_its_reservation_holds() -> None:
    # 76 ms of CPU every 500 ms is 0.15 cores: less than the 1 core a one-partition reservation holds
    cheap = choose("auto", 2.0, None, floor=0.75, budget=Budget(0.076, True, 0.5, 1))
    assert cheap.mode == "microBatch" and "0.15 cores, less than the 1 core" in cheap.reason
    assert "measured on the pool" in cheap.reason
    # 300 ms of CPU every 200 ms (batches back to back on a busy pool) is 1.5 cores: more than 1
    dear = choose("auto", 2.0, None, floor=0.75, budget=Budget(0.3, False, 0.2, 1))
    assert dear.mode == "realTime" and "1.50 cores, more than the 1 core" in dear.reason
    assert "before the pool measured any" in dear.reason
    # a reservation of 4 partitions' slots holds 4 cores: the same batches stay micro-batches
    assert choose("auto", 2.0, None, floor=0.75, budget=Budget(0.3, True, 0.2, 4)).mode == "microBatch"
    # what Real-time Mode cannot run, or an explicit mode, is not weighed
    assert choose("auto", 2.0, "the sink is noop", floor=0.75, budget=Budget(0.3, True, 0.2, 1)).mode == "microBatch"
    assert choose("microBatch", 2.0, None, floor=0.75, budget=Budget(0.3, True, 0.2, 1)).mode == "microBatch"


def test_the_batch_meter_divides_the_drivers_cpu_by_the_batches_in_its_window() -> None:
    meter = BatchMeter(window=60.0, min_batches=20)
    assert meter.batch_cpu() == (BATCH_CPU_PRIOR, False)  # nothing measured: the prior
    meter.sample(0.0, 10.0, 100)
    meter.sample(2.0, 10.5, 110)
    assert meter.per_batch() is None  # 10 batches: too few to say
    meter.sample(4.0, 11.6, 140)
    assert meter.batch_cpu() == (pytest.approx(1.6 / 40), True)
    meter.sample(70.0, 20.0, 240)  # the samples older than the window leave it
    assert meter.per_batch() == pytest.approx((20.0 - 11.6) / 100)
    meter.sample(72.0, 20.2, 30)  # queries left with their counts: start over
    assert meter.per_batch() is None
    meter.sample(74.0, 20.3, 60)
    assert meter.per_batch() == pytest.approx(0.1 / 30)


def test_the_batch_meter_reads_the_machine_s_busy_share_over_its_window() -> None:
    meter = BatchMeter(window=60.0, cores=2)
    meter.sample(0.0, 1.0, 0, 100.0)
    assert meter.busy_share() is None  # one sample: nothing to divide
    meter.sample(10.0, 2.0, 10, 115.0)
    assert meter.busy_share() == pytest.approx(15.0 / 20)  # 15 busy seconds of 2 cores' 20
    meter.sample(20.0, 3.0, 20, None)  # /proc/stat not read: not known
    assert meter.busy_share() is None
    # read from this machine's /proc/stat: a core kept busy shows
    from sluice.runtime.batch_budget import machine_busy_seconds

    before = machine_busy_seconds()
    assert before is not None
    end = time.process_time() + 0.3
    while time.process_time() < end:
        pass
    after = machine_busy_seconds()
    assert after is not None and after - before >= 0.2
