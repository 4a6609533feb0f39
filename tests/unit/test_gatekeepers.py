"""One ordering, aging and holding suite, run against both schedulers a runtime can be gated by:
the in-process core (`sluice run`) and the sidecar over real loopback HTTP (the pool pod)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from sluice.runtime.gate import Gatekeeper
from sluice.scheduler.client import SchedulerClient
from sluice.scheduler.core import Completion, Grant, Scheduler
from sluice.scheduler.costs import CostModel, CostPrior
from sluice.scheduler.local import LocalScheduler
from sluice.scheduler.policies import BatchRequest, QuerySpec
from sluice.scheduler.server import SchedulerService, ServerThread, make_app
from sluice.testing.waiting import wait_for


@dataclass
class Gated:
    gate: Gatekeeper
    core: Scheduler


@pytest.fixture(params=["in-process", "sidecar"])
def gated(request: pytest.FixtureRequest) -> Iterator[Gated]:
    # fixed cost 10 ms and 100 us per row until batches are measured
    core = Scheduler("cameo", capacity=1, max_wait=30.0, costs=CostModel(CostPrior(0.01, 1e-4, 0.0)))
    if request.param == "in-process":
        yield Gated(LocalScheduler(core), core)
        return
    server = ServerThread(make_app(SchedulerService(core))).start()
    try:
        yield Gated(SchedulerClient(server.url), core)
    finally:
        server.stop()


def _ask(gated: Gated, request: BatchRequest, out: list[Grant]) -> threading.Thread:
    thread = threading.Thread(target=lambda: out.append(gated.gate.dispatch(request)), daemon=True)
    thread.start()
    return thread


def test_the_urgent_batch_is_granted_first(gated: Gated) -> None:
    gate = gated.gate
    gate.register(QuerySpec("x/holder", "x", 5.0))
    gate.register(QuerySpec("bulk/agg", "bulk", 1.0, window_size=10.0))
    gate.register(QuerySpec("pay/filter", "pay", 0.05))
    gate.dispatch(BatchRequest("x/holder", 1))  # takes the only slot
    grants: list[Grant] = []
    bulk = _ask(gated, BatchRequest("bulk/agg", 1, rows=10, oldest_event=time.time()), grants)
    wait_for(lambda: gated.core.pending_count() == 1, 10, "the bulk batch to wait", every=0.005)
    urgent = _ask(gated, BatchRequest("pay/filter", 1, rows=10, oldest_event=time.time()), grants)
    wait_for(lambda: gated.core.pending_count() == 2, 10, "the urgent batch to wait too", every=0.005)
    assert grants == []  # both wait: the slot is held
    gate.complete("x/holder", [Completion("x/holder", 1, seconds=0.1)])
    urgent.join(10)
    assert [g.query for g in grants] == ["pay/filter"]  # arrived later, granted first
    gate.complete("pay/filter", [Completion("pay/filter", 1, seconds=0.01)])
    bulk.join(10)
    assert [g.query for g in grants] == ["pay/filter", "bulk/agg"]


def test_a_batch_waiting_past_max_wait_is_served_before_an_urgent_one(gated: Gated) -> None:
    gate, core = gated.gate, gated.core
    core.max_wait = 0.3
    gate.register(QuerySpec("x/holder", "x", 5.0))
    gate.register(QuerySpec("bulk/agg", "bulk", 3600.0))
    gate.register(QuerySpec("pay/filter", "pay", 0.05))
    gate.dispatch(BatchRequest("x/holder", 1))  # takes the only slot
    grants: list[Grant] = []
    bulk = _ask(gated, BatchRequest("bulk/agg", 1, oldest_event=time.time()), grants)
    wait_for(lambda: core.pending_count() == 1, 10, "the bulk batch to wait", every=0.005)
    time.sleep(0.35)  # what is under test is time passing: the bulk batch waits past max_wait
    urgent = _ask(gated, BatchRequest("pay/filter", 1, oldest_event=time.time()), grants)
    wait_for(lambda: core.pending_count() == 2, 10, "the urgent batch to wait too", every=0.005)
    gate.complete("x/holder", [Completion("x/holder", 1, seconds=0.1)])
    bulk.join(10)
    assert [g.query for g in grants] == ["bulk/agg"]  # served ahead of policy order ...
    assert grants[0].aged and grants[0].waited >= 0.3  # ... because it had waited max_wait
    gate.complete("bulk/agg", [Completion("bulk/agg", 1, seconds=0.1)])
    urgent.join(10)
    assert [g.query for g in grants] == ["bulk/agg", "pay/filter"]


def test_a_long_batch_waits_for_an_urgent_batch_predicted_within_its_cost(gated: Gated) -> None:
    gate, core = gated.gate, gated.core
    core.capacity = 4  # free slots: only the hold can make a batch wait
    gate.register(QuerySpec("pay/filter", "pay", 0.5))
    gate.register(QuerySpec("bulk/agg", "bulk", 30.0, window_size=10.0))
    _every_200ms(gate, "pay/filter")
    grants: list[tuple[Grant, float]] = []  # with when the grant reached the asking thread
    # ~1 s of bulk work, asked about 50 ms after the filter's last batch
    request = BatchRequest("bulk/agg", 1, rows=10_000, oldest_event=time.time())
    bulk = threading.Thread(target=lambda: grants.append((gate.dispatch(request), time.time())), daemon=True)
    bulk.start()
    wait_for(lambda: core.queries["bulk/agg"].held == 1, 10, "the bulk batch to be held", every=0.002)
    assert grants == []
    urgent_asked = time.time()
    filter_grant = gate.dispatch(BatchRequest("pay/filter", 4, oldest_event=urgent_asked - 0.2))
    bulk.join(10)
    assert filter_grant.waited < 0.05  # the urgent batch was not queued behind anything
    assert grants and grants[0][0].query == "bulk/agg"
    assert grants[0][1] >= urgent_asked  # the bulk batch was granted only once the filter had asked
    assert core.queries["bulk/agg"].held == 1  # held once, for one predicted arrival


def _every_200ms(gate: Gatekeeper, key: str) -> None:
    """Three batches of `key`, 200 ms apart; returns 50 ms after the last."""
    for batch in range(1, 4):
        if batch > 1:
            time.sleep(0.2)
        gate.dispatch(BatchRequest(key, batch, oldest_event=time.time() - 0.2))
        gate.complete(key, [Completion(key, batch, seconds=0.001)])
    time.sleep(0.05)


def test_a_hold_ends_when_the_predicted_batch_does_not_come(gated: Gated) -> None:
    gate, core = gated.gate, gated.core
    core.capacity = 4
    gate.register(QuerySpec("pay/filter", "pay", 0.5))
    gate.register(QuerySpec("bulk/agg", "bulk", 30.0, window_size=10.0))
    _every_200ms(gate, "pay/filter")
    grant = gate.dispatch(BatchRequest("bulk/agg", 1, rows=10_000, oldest_event=time.time()))  # the filter stops
    assert core.queries["bulk/agg"].held == 1
    assert 0.1 <= grant.waited < 0.5  # until the filter's predicted arrival (~150 ms), not longer


def test_a_reservation_travels_to_the_scheduler_and_one_it_cannot_hold_is_refused_in_a_sentence(gated: Gated) -> None:
    from sluice.scheduler.core import SchedulerError

    gated.core.capacity = 3
    gate = gated.gate
    assert gate.register(QuerySpec("rt/filter", "rt", 0.1, reserved_slots=2))
    assert gated.core.reserved == 2 and gated.core.available == 1
    with pytest.raises(SchedulerError, match="would reserve 1 of the 3 slots with 2 already reserved"):
        gate.register(QuerySpec("rt/other", "rt", 0.1, reserved_slots=1))
    assert gate.unregister("rt/filter") and gated.core.reserved == 0


def test_waiting_batches_do_not_wake_each_other_for_nothing(gated: Gated) -> None:
    """Two batches waiting for a taken slot: the scheduler looks again on its own clock (a 1 s
    idle look), not every time the other waiter does. Each wake-up woke every waiter once, which
    pumped and woke the others again: the held batches spun on the GIL (0.7 cores, 10 queries)."""
    gate, core = gated.gate, gated.core
    for key in ("x/holder", "a/one", "b/two"):
        gate.register(QuerySpec(key, key.split("/")[0], 5.0))
    gate.dispatch(BatchRequest("x/holder", 1))  # takes the only slot
    grants: list[Grant] = []
    waiting = [_ask(gated, BatchRequest(key, 1), grants) for key in ("a/one", "b/two")]
    wait_for(lambda: core.pending_count() == 2, 10, "both batches to wait", every=0.005)
    before = core.dispatches
    time.sleep(1.0)  # what is under test is what the waiters do while nothing happens
    looks = core.dispatches - before
    assert looks <= 10, f"the scheduler dispatched {looks} times in 1 s with nothing changing"
    assert grants == []
    gate.complete("x/holder", [Completion("x/holder", 1, seconds=0.1)])
    wait_for(lambda: len(grants) == 1, 10, "the freed slot to be granted")
    gate.complete(grants[0].query, [Completion(grants[0].query, 1, seconds=0.1)])
    for thread in waiting:
        thread.join(10)
    assert sorted(g.query for g in grants) == ["a/one", "b/two"]


def test_a_batch_late_by_more_than_its_sla_leaves_the_urgent_bands_unless_critical(gated: Gated) -> None:
    """Both batches are 9 s late on a 1 s SLA: the critical query's runs in band0, the other's in
    the first band after the urgent ones (going first cannot bring it back within its SLA). Late
    by less than its SLA, the other query's batch keeps band0."""
    gate = gated.gate
    gate.register(QuerySpec("pay/alerts", "pay", 1.0, critical=True))
    gate.register(QuerySpec("ana/report", "ana", 1.0))
    late = time.time() - 10
    critical = gate.dispatch(BatchRequest("pay/alerts", 1, rows=10, oldest_event=late))
    gate.complete("pay/alerts", [Completion("pay/alerts", 1, seconds=0.01)])
    other = gate.dispatch(BatchRequest("ana/report", 1, rows=10, oldest_event=late))
    assert critical.slack < 0 and other.slack < 0
    assert (critical.band, other.band) == ("band0", "band6")
    gate.complete("ana/report", [Completion("ana/report", 1, seconds=0.01)])
    behind = gate.dispatch(BatchRequest("ana/report", 2, rows=10, oldest_event=time.time() - 1.5))
    assert -1 < behind.slack < 0 and behind.band == "band0"
    # on time, the same query's batch is ordered by its slack as before: urgent under 2 s
    gate.complete("ana/report", [Completion("ana/report", 2, seconds=0.01)])
    fresh = gate.dispatch(BatchRequest("ana/report", 3, rows=10, oldest_event=time.time()))
    assert 0 <= fresh.slack < 2 and fresh.band < "band6"
