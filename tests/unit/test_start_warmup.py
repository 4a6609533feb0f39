"""Warm at start (`runtime/start_warmup.py`): the synthetic queries are valid specs of the two
shapes, and the wait for the pool's first executor keeps to its bound (Spark's side:
tests/spark/test_start_warmup.py)."""

from __future__ import annotations

from typing import Any

from sluice.runtime import start_warmup


def test_the_warm_up_s_queries_are_a_critical_filter_and_a_stateful_aggregation_on_the_pool_s_slots() -> None:
    filter_query, aggregate = start_warmup.queries("shared", 4)
    assert {filter_query.tenant, aggregate.tenant} == {start_warmup.TENANT}
    assert filter_query.spec.sla.critical and not aggregate.spec.sla.critical
    assert [s.kind for s in aggregate.spec.pipeline][-4:] == ["watermark", "window", "groupBy", "aggregate"]
    assert filter_query.spec.source.numPartitions == aggregate.spec.source.numPartitions == 4
    assert start_warmup.queries("shared", 0)[0].spec.source.numPartitions == 1


def test_the_warmup_waits_for_an_executor_within_its_bound() -> None:
    clock = [0.0]
    seen = iter([OSError("status API not up"), [], ["exec-1"]])

    def executors() -> list[Any]:
        got = next(seen)
        if isinstance(got, Exception):
            raise got
        return got

    def sleep(s: float) -> None:
        clock[0] += s

    assert start_warmup.wait_for_executor(executors, 10.0, lambda: clock[0], sleep)
    assert clock[0] == 2.0
    assert not start_warmup.wait_for_executor(lambda: [], 3.0, lambda: clock[0], sleep)
