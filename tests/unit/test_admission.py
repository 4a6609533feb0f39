"""Admission (pure): pools, namespaces, quotas, and a Real-time query's task-slot reservation."""

from __future__ import annotations

from typing import Any

from sluice.api.manifest import load_query
from sluice.api.pool import StreamingPool
from sluice.api.query import StreamingQuery
from sluice.operator.admission import Held, Ledger, admit


def _query(sla: str, execution: str = "auto", **source: Any) -> StreamingQuery:
    return load_query({
        "apiVersion": "sluice.dev/v1alpha1", "kind": "StreamingQuery", "metadata": {"name": "q", "namespace": "t"},
        "spec": {"pool": "shared", "execution": execution, "sla": {"latencyTarget": sla},
                 "pipeline": [{"filter": "length(value) > 1"}],
                 "source": {"type": "kafka", "bootstrapServers": "k:9092", "topic": "in", **source},
                 "sink": {"type": "kafka", "bootstrapServers": "k:9092", "topic": "out"}},
    })


POOL = StreamingPool.model_validate({"metadata": {"name": "shared"}, "spec": {"maxExecutors": 2, "executor": {"cores": 2}}})


def test_a_real_time_query_is_admitted_while_its_slots_leave_the_micro_batch_queries_theirs() -> None:
    assert admit(_query("100ms"), POOL, 0, Held(reserved=1, micro_batch=2)).admitted  # 4 - 1 - 1 = 2 left
    refused = admit(_query("100ms"), POOL, 0, Held(reserved=2, micro_batch=2))  # 1 left of 2
    assert not refused.admitted and refused.retry and refused.reason == "TaskSlotsReserved"
    assert refused.message == ("A Real-time query holds 1 task slot while it runs and pool 'shared' has 4 at most with 2 "
                               "already reserved, leaving 1 of the 2 its micro-batch queries need; raise the pool's "
                               "maxExecutors or set spec.execution to microBatch (retrying).")
    # minPartitions splits its reads: that many slots
    assert not admit(_query("100ms", minPartitions=4), POOL, 0, Held()).admitted
    # a query that already holds its slots keeps them (an operator restart re-admits it)
    assert admit(_query("100ms", minPartitions=4), POOL, 0, Held(reserved=4, micro_batch=3, own=4)).admitted


def test_micro_batch_queries_reserve_nothing() -> None:
    assert admit(_query("10s"), POOL, 0, Held(reserved=3, micro_batch=4)).admitted
    assert admit(_query("100ms", execution="microBatch"), POOL, 0, Held(reserved=3, micro_batch=4)).admitted


def test_held_slots_are_read_from_the_pool_and_query_status() -> None:
    pool_status = {"reservedSlots": 3, "autoscaling": {"recommendation": {"executors": 2, "microBatchSlots": 5}}}
    assert Held.of(pool_status, {"reservedSlots": 2}) == Held(3, 5, 2)
    assert Held.of(None, None) == Held(0, 1, 0)  # nothing measured yet: the micro-batch queries keep one slot


def test_the_ledger_counts_admissions_whose_status_is_not_written_yet() -> None:
    """Two queries of one namespace admitted together: the second counts the first before the
    API server lists it as admitted (the cluster tier's quota test found both admitted)."""
    ledger = Ledger()
    assert ledger.others("team-b", "shared", "one", set()) == 0
    ledger.record("team-b", "shared", "one", admitted=True)
    assert ledger.others("team-b", "shared", "two", set()) == 1  # not listed yet, counted
    assert ledger.others("team-b", "shared", "two", {"one"}) == 1  # listed too: once
    assert ledger.others("team-b", "shared", "one", {"one"}) == 0  # never itself
    assert ledger.others("team-c", "shared", "x", set()) == 0 and ledger.others("team-b", "other", "x", set()) == 0
    ledger.record("team-b", "other", "one", admitted=True)  # moved to another pool
    assert ledger.others("team-b", "shared", "two", set()) == 0 and ledger.others("team-b", "other", "two", set()) == 1
    ledger.record("team-b", "other", "one", admitted=False)  # refused: counts nowhere
    assert ledger.others("team-b", "other", "two", set()) == 0
    ledger.record("team-b", "shared", "one", admitted=True)
    ledger.forget("team-b", "one")
    assert ledger.others("team-b", "shared", "two", set()) == 0


def test_a_status_sync_writes_only_the_fields_that_moved() -> None:
    import kopf

    from sluice.api.common import LatencyStatus
    from sluice.api.query import StreamingQueryStatus
    from sluice.operator.runtime_client import RuntimeClient
    from sluice.operator.snapshots import Snapshot, fresh
    from sluice.operator.status import write

    def written(update: StreamingQueryStatus, current: dict[str, object] | None, cleared: tuple[str, ...] = ()) -> dict:
        patch = kopf.Patch()
        write(patch, update, current, cleared)
        return dict(patch.status)

    current = {"phase": "Running", "batches": 4, "inputRate": 2.0, "latency": {"p50Ms": 10, "p99Ms": 40}}
    update = StreamingQueryStatus(phase="Running", batches=5, inputRate=2, latency=LatencyStatus(p50Ms=10, p99Ms=40),
                                  bottleneck="x")
    # a JSON integer read back equals the float written (2 == 2.0): no write for it
    assert written(update, current) == {"batches": 5, "bottleneck": "x"}
    same = StreamingQueryStatus(phase="Running", batches=4, inputRate=2.0, latency=LatencyStatus(p50Ms=10, p99Ms=40))
    assert written(same, current) == {}  # nothing moved: no PATCH
    assert written(StreamingQueryStatus(), {}, ("batchIntervalMs",)) == {}  # an absent field stays absent
    assert written(StreamingQueryStatus(), {"batchIntervalMs": 500}, ("batchIntervalMs",)) == {"batchIntervalMs": None}
    # without `current`, every field set is written, and only those (a model's defaults are not)
    assert written(StreamingQueryStatus(phase="Failed", message="x."), None) == {"phase": "Failed", "message": "x."}
    assert not fresh(None, 100.0, 5.0)
    read_at_90 = Snapshot(90.0, RuntimeClient("http://127.0.0.1:1", "t"), {}, {})
    assert fresh(read_at_90, 94.9, 5.0) and not fresh(read_at_90, 95.0, 5.0)


def test_health_reads_as_kstatus_means_each_phase_and_reason() -> None:
    """Ready, Stalled and Reconciling for each phase and reason, by hand: Running and Suspended are
    Current; Failed and what waits for a person are Stalled; the rest Reconciling."""
    from sluice.operator.status import health

    def flags(phase: str, reason: str) -> tuple[str, str, str]:
        out = {c["type"]: c for c in health([], phase, reason, "why.", "2026-11-27T00:00:00Z", 3)}
        assert all(c["observedGeneration"] == 3 for c in out.values())
        return out["Ready"]["status"], out["Stalled"]["status"], out["Reconciling"]["status"]

    assert flags("Running", "Running") == ("True", "False", "False")
    assert flags("Suspended", "Suspended") == ("True", "False", "False")
    assert flags("Failed", "Rejected") == ("False", "True", "False")
    assert flags("Failed", "InvalidSpec") == ("False", "True", "False")
    assert flags("Failed", "Starting") == ("False", "True", "False")  # a Failed phase stalls whatever the reason
    for waits_for_a_person in ("QuotaExceeded", "NamespaceNotAllowed", "DriverFull", "TaskSlotsReserved", "FilesOutsideRoot"):
        assert flags("Pending", waits_for_a_person) == ("False", "True", "False"), waits_for_a_person
    for resolves_itself in ("PoolNotFound", "RuntimeUnreachable", "RuntimeStarting", "Starting"):
        assert flags("Pending", resolves_itself) == ("False", "False", "True"), resolves_itself
    # a transition keeps one condition of each type and moves lastTransitionTime only on a change
    first = health([], "Pending", "PoolNotFound", "a.", "2026-11-27T00:00:00Z", 1)
    later = health(first, "Running", "Running", "", "2026-11-27T00:01:00Z", 1, "running on pool 'p'.")
    assert sorted(c["type"] for c in later) == ["Ready", "Reconciling", "Stalled"]
    by_type = {c["type"]: c for c in later}
    assert by_type["Ready"]["message"] == "running on pool 'p'." and by_type["Ready"]["lastTransitionTime"].endswith("01:00Z")
    assert by_type["Stalled"]["lastTransitionTime"].endswith("00:00Z")  # False before and after
