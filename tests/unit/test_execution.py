"""The execution mode per query, chosen by hand-computed cases."""

from __future__ import annotations

import pytest

from sluice.api.query import realtime_problem
from sluice.scheduler.execution import (
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
