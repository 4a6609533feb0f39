"""The Cameo scheduler core: pending batches in, dispatch grants out. Pure: `now` is passed in.

One instance serves one pool. Queries register with their SLA; each micro-batch is submitted
before it runs; `dispatch(now)` grants the most urgent pending batches while fewer than
`capacity` are in flight; `complete` frees the slot, teaches the cost model and adapts the
query's group size (Drizzle). Waiting is bounded by aging: a batch pending longer than
`max_wait` is served before any policy order.

Under the deadline policies (edf, cameo) each registered latency-critical query
(`QuerySpec.critical`) adds `lane` slots to `capacity` (the critical lane): a critical batch
that finds every slot taken is granted in one of those, never a bulk batch; a bulk batch takes a
slot only while fewer than `capacity` are in flight. A query has one batch in flight at most, so
with `lane` 1 a critical batch never waits at the gate, behind bulk batches or other critical
ones, whatever their order (a lane of one slot for the pool left the density benchmark's ten
critical filters 14-16% of their path waiting at the gate for each other at 100 queries).

Under the deadline policies (edf, cameo) the core also holds a low-urgency batch when an urgent
one is predicted to arrive before it would finish: running tasks are never pre-empted, so a
long batch that starts just before an urgent one takes the cores the urgent one needs. A query's
next arrival is predicted from its recent batch period. A batch is held only while the urgent
arrival is predicted within its own estimated cost, only if the urgent batch could not wait for
it (its slack at arrival is below that cost) and only if holding keeps the held batch within its
own start deadline; aging bounds every hold. With no urgent arrival near, nothing is held.
"""

from __future__ import annotations

import heapq
import itertools
import math
from bisect import bisect_right
from collections import deque
from dataclasses import dataclass, field

from sluice.api.constants import BANDS

from .bands import DEFAULT_BAND, band_for_slack, band_name, urgent_bands
from .costs import CostModel
from .policies import BatchRequest, Policy, QuerySpec, frontier, frontier_at, make_policy


def covers(first: int, last: int, batch_id: int) -> bool:
    """Whether a slot granted for batches first..last (a group grant when last > first) holds `batch_id`."""
    return first <= batch_id <= last


@dataclass(frozen=True, slots=True)
class Grant:
    """Permission to run a batch (and, if k > 1, the query's next k - 1 batches) in `band`."""

    query: str
    batch_id: int
    band: str
    k: int
    deadline: float
    """Start deadline (epoch seconds)."""
    slack: float
    """deadline - now at grant time; negative: already late."""
    waited: float
    """Seconds the batch waited in the scheduler."""
    aged: bool = False
    """Granted ahead of policy order because it waited past max_wait."""
    fail_open: bool = False
    """Not a real grant: the scheduler was unreachable and the runtime went ahead ungated."""

    @property
    def last(self) -> int:
        """The last batch id this grant covers."""
        return self.batch_id + self.k - 1


@dataclass(frozen=True, slots=True)
class Completion:
    """What a finished batch reports."""

    query: str
    batch_id: int
    seconds: float
    """Measured cost of the batch's action."""
    rows: int = 0
    tail: float | None = None
    """Seconds after the action until the batch committed (C_path feedback)."""
    coordination: float = 0.0
    """Seconds the runtime spent asking for the grant, not counting queueing (Drizzle feedback)."""
    latency: float | None = None
    """Observed end-to-end latency of the batch, if measured (SLA accounting)."""
    ends_group: bool = False
    """The runtime gives the rest of its group grant back at this batch: a trigger wait follows
    it, and the slot would sit idle until the group's next batch (`sluice.runtime.batching.gives_group_back`)."""


@dataclass(frozen=True, slots=True)
class Violation:
    query: str
    tenant: str
    late_by: float
    """Seconds past the SLA: predicted for pending batches, or the worst recently observed."""
    predicted: bool


@dataclass(slots=True)
class _Pending:
    request: BatchRequest
    enqueued: float
    priority: float
    deadline: float
    due: float
    """t_MF + L: when the batch's output is due."""
    cost: float
    seq: int
    held: tuple[str, int, float] | None = None
    """(query, its last batch id, predicted arrival) of the urgent batch this one was held for."""
    waiting: bool = False
    """Held now: out of the policy heap until the urgent batch arrives or its time passes (a
    dispatch then looks only at batches it could grant, not at every held one again)."""


@dataclass(slots=True)
class _Running:
    """A granted slot: batches first..last of one query (last > first for a group grant)."""

    last: int
    expiry: float
    cost: float
    seconds: float = 0.0
    """Batch time reported so far for this slot's batches."""
    coordination: float = 0.0
    """Asking time reported so far (one ask per slot: only the group's first batch asked)."""


@dataclass(slots=True)
class _Query:
    spec: QuerySpec
    k: int = 1
    last_band: str = ""
    pending: _Pending | None = None
    in_flight: dict[int, _Running] = field(default_factory=dict)
    """first batch id of each granted slot -> its range, lease expiry and estimated cost."""
    grants: int = 0
    batches_late: int = 0
    worst_late: float = 0.0
    last_submit: float | None = None
    last_batch: int = -1
    period: float | None = None
    """Smoothed seconds between the submits of consecutive batches (predicts the next arrival)."""
    held: int = 0
    """Batches of this query held for a predicted urgent one."""
    parked: tuple[float, int, str, float, float] | None = None
    """Its predicted next arrival, out of the heaps while a batch of it is pending (no next batch
    comes before that one is granted); back in at the grant."""


@dataclass(frozen=True, slots=True)
class GroupTuning:
    """AIMD bounds for group grants."""

    k_max: int = 16
    grow_above: float = 0.10
    """Coordination share of batch time above which k doubles."""
    shrink_below: float = 0.02
    """Coordination share below which k drops by one."""


PERIOD_SMOOTHING = 0.3
"""Weight of the newest gap in a query's smoothed batch period."""
SLACK_STEP = 1.25
"""Ratio between the bounds of consecutive positive slack classes: a hold walks the class holding
its batch's cost one arrival at a time (there slack may or may not be below the cost), so the
classes are narrow where costs fall (with classes 2x wide, a 1.5 s bulk batch walked every 2 s
filter's predicted arrival: 34 of them a decision at 2,000 queries)."""
URGENCY_BOUNDS: tuple[float, ...] = (-60.0, -15.0, -5.0, -2.0, -1.0, -0.5, -0.25, -0.1, 0.0,
                                     *(round(0.1 * SLACK_STEP ** i, 4) for i in range(29)))  # 0.1 s .. 51.7 s
"""Slack classes (seconds: a predicted batch's start deadline less its arrival) of the predicted
arrivals. A batch of cost c is held only for one whose slack is below c, so it looks only at the
classes below c (a pool of loose-SLA queries has nothing to look at); and only for one whose
deadline is before its own, so in a class whose slack is at least s it looks only at arrivals
before its deadline less s (10,000 queries' arrivals walked one by one cost 500 µs a decision)."""


HOLD_LOOK = 64
"""Predicted arrivals one hold looks at, at most (the soonest of each class first): 1,000
critical queries arriving within a batch's cost of each other otherwise made a decision walk
hundreds of arrivals that could not be urgent for it (500 µs a decision at 10,000 queries)."""
_Prediction = tuple[float, int, str, float, float]
"""(predicted arrival, the query's last batch id, query, start deadline then, slack then): the
start deadline from the policy's key when predicted, slack = deadline - arrival. A tuple: heap
order is its first fields, compared in C (a dataclass's generated comparisons were a tenth of
a 1,000-query simulation)."""


class SchedulerError(ValueError):
    """A request the scheduler cannot act on; the message is one sentence for the caller."""


class Scheduler:
    def __init__(
        self,
        policy: str | Policy = "cameo",
        capacity: int = 2,
        bands: int = BANDS,
        max_wait: float = 30.0,
        costs: CostModel | None = None,
        group: GroupTuning | None = None,
        lease: float = 300.0,
        lane: int = 0,
    ) -> None:
        if capacity < 1:
            raise SchedulerError("capacity must be at least 1")
        if lane < 0:
            raise SchedulerError("the critical lane cannot be negative")
        self.policy = make_policy(policy) if isinstance(policy, str) else policy
        self.capacity = capacity
        self.bands = bands
        self.max_wait = max_wait
        self.costs = costs or CostModel()
        self.group = group or GroupTuning()
        self.lease = lease
        self.lane = lane if self.policy.uses_bands else 0
        """Slots beyond `capacity` for critical queries' batches, per registered critical query (a
        pool's runtime and sidecar pass `sluice.api.constants.CRITICAL_LANE`); none under fifo and
        fair, which do not order by urgency."""
        self.critical = 0
        """Registered critical queries."""
        self.queries: dict[str, _Query] = {}
        self._heap: list[tuple[float, int, str]] = []
        self._critical: list[tuple[float, int, str]] = []
        """The critical queries' pending batches, in policy order, for the lane (entries go stale
        as in `_heap` and are skipped lazily)."""
        self._arrivals: deque[tuple[float, int, str]] = deque()
        self._held: list[tuple[float, int, str]] = []
        """(predicted arrival it waits for, seq, query) of held batches; stale entries are skipped lazily."""
        self._held_for: dict[str, list[tuple[int, str]]] = {}
        """Urgent query -> (seq, query) of the batches held for its next arrival: released when it submits."""
        self._leases: list[tuple[float, str, int]] = []
        """(expiry, query, first batch id) of granted slots; stale entries are skipped lazily."""
        self._seq = itertools.count()
        self.in_flight = 0
        self.dispatches = 0
        """`dispatch` calls so far (how often the scheduler looked for a batch to grant)."""
        self.reserved = 0
        """Slots held by Real-time queries (`QuerySpec.reserved_slots`), summed."""
        self.hold_until: float | None = None
        """After `dispatch`: when the earliest batch it held should be looked at again (None: none held)."""
        self._predicted: list[list[_Prediction]] = [[] for _ in range(len(URGENCY_BOUNDS) + 1)]
        """Predicted next arrivals, one heap per slack class (`URGENCY_BOUNDS`): a hold looks only
        at the classes whose batches could be urgent for it. An entry is stale once its query
        submits again, and is dropped when seen, when its time has passed, or when its heap is
        compacted."""

    # ------------------------------------------------------------------ registration

    def register(self, spec: QuerySpec) -> None:
        """Add a query, or update its SLA/semantics (its learned costs and pending batch stay)."""
        if spec.latency_target <= 0:
            raise SchedulerError(f"query {spec.key}: latency target must be above zero")
        if spec.weight <= 0:
            raise SchedulerError(f"query {spec.key}: weight must be above zero")
        state = self.queries.get(spec.key)
        others = self.reserved - (state.spec.reserved_slots if state is not None else 0)
        if spec.reserved_slots < 0 or others + spec.reserved_slots >= self.capacity:
            raise SchedulerError(
                f"query {spec.key} would reserve {spec.reserved_slots} of the {self.capacity} slots with {others} "
                f"already reserved, leaving none for micro-batches; raise the capacity or run it in micro-batches")
        self.critical += int(spec.critical) - int(state is not None and state.spec.critical)
        if state is None:
            self.queries[spec.key] = _Query(spec)
        else:
            state.spec = spec
        self.reserved = others + spec.reserved_slots

    @property
    def lane_slots(self) -> int:
        """The critical lane's slots now: `lane` for each registered critical query."""
        return self.lane * self.critical

    @property
    def available(self) -> int:
        """Slots the micro-batch queries share: the capacity less what Real-time queries hold."""
        return self.capacity - self.reserved

    def unregister(self, key: str) -> None:
        """Remove a query: its pending batch is dropped and its in-flight slots are freed."""
        state = self.queries.pop(key, None)
        if state is None:
            return
        self.in_flight -= len(state.in_flight)
        self.reserved -= state.spec.reserved_slots
        self.critical -= int(state.spec.critical)
        self._release_held_for(key)
        self.costs.forget(key)
        self.policy.forget(key)

    # ------------------------------------------------------------------ batches

    def submit(self, request: BatchRequest, now: float) -> None:
        """A batch of a registered query is ready and waits for a grant."""
        state = self.queries.get(request.query)
        if state is None:
            raise SchedulerError(f"query {request.query!r} is not registered; register it first")
        for first in list(state.in_flight) if state.in_flight else ():
            if request.batch_id == first:
                raise SchedulerError(f"batch {request.batch_id} of {request.query} is already granted")
            if request.batch_id > first:
                # the query moved past this slot's batches without reporting them all, or asks for
                # a batch its group grant covers (it gave the group back; its completion saying so
                # may arrive after this ask): free the slot
                del state.in_flight[first]
                self.in_flight -= 1
        if state.pending is not None and state.pending.request.batch_id != request.batch_id:
            # a query runs its batches in order: a new batch id replaces a stale pending one
            state.pending = None
        if state.pending is not None:
            return  # a retried request for the same batch keeps its place
        if state.last_submit is not None and request.batch_id == state.last_batch + 1:
            gap = now - state.last_submit
            state.period = gap if state.period is None else PERIOD_SMOOTHING * gap + (1 - PERIOD_SMOOTHING) * state.period
        moved = request.batch_id != state.last_batch
        state.last_submit, state.last_batch = now, request.batch_id
        if moved:
            self._release_held_for(request.query)  # the urgent batch they waited for has come
        state.parked = None  # a prediction for an earlier batch: stale now
        if state.period is not None and self.policy.uses_bands:
            self._predict(state, request, now)
        spec = state.spec
        cost = self.costs.estimate(request.query, request.rows)
        due = frontier(spec, request, now) + spec.latency_target
        priority, deadline = self.policy.key(spec, request.oldest_event, due, cost, self.costs.path(request.query), now)
        seq = next(self._seq)
        state.pending = _Pending(request, now, priority, deadline, due, cost, seq)
        heapq.heappush(self._heap, (priority, seq, request.query))
        if spec.critical and self.lane:
            heapq.heappush(self._critical, (priority, seq, request.query))
        self._arrivals.append((now, seq, request.query))

    def cancel(self, key: str, batch_id: int) -> None:
        """Drop a pending batch (its requester went away)."""
        state = self.queries.get(key)
        if state and state.pending and state.pending.request.batch_id == batch_id:
            state.pending = None
            self._unpark(state)

    def _live(self, seq: int, key: str) -> _Pending | None:
        state = self.queries.get(key)
        if state is None or state.pending is None or state.pending.seq != seq:
            return None
        return state.pending

    def _next(self, now: float) -> tuple[_Pending, bool] | None:
        arrivals = self._arrivals
        while arrivals and self._live(arrivals[0][1], arrivals[0][2]) is None:
            arrivals.popleft()
        if arrivals and now - arrivals[0][0] >= self.max_wait:
            _, seq, key = arrivals.popleft()
            pending = self._live(seq, key)
            if pending is not None:
                return pending, True
        heap = self._heap
        while heap:
            _, seq, key = heapq.heappop(heap)
            pending = self._live(seq, key)
            if pending is not None:
                return pending, False
        return None

    def dispatch(self, now: float) -> list[Grant]:
        """Grant pending batches in policy order while slots are free (holding those an urgent
        arrival predicted within their cost would otherwise find the cores taken by)."""
        self.dispatches += 1
        self._expire(now)
        held = self._held
        while held and held[0][0] <= now:  # holds whose predicted arrival has passed
            _, seq, key = heapq.heappop(held)
            self._release(seq, key)
        grants: list[Grant] = []
        while self.in_flight < self.available:
            found = self._next(now)
            if found is None:
                break
            pending, aged = found
            first = pending.held is None
            until = None if aged else self._hold(pending, now)
            if until is None or pending.held is None:
                grants.append(self._grant(pending, aged, now))
                continue
            # out of the policy heap until its urgent batch arrives (`submit`) or its time passes
            key = pending.request.query
            pending.waiting = True
            heapq.heappush(held, (until, pending.seq, key))
            self._held_for.setdefault(pending.held[0], []).append((pending.seq, key))
            self.queries[key].held += first
        while self.in_flight < self.available + self.lane_slots:  # the critical lane: no bulk batch here
            critical = self._next_critical()
            if critical is None:
                break
            grants.append(self._grant(critical, False, now))
        while held and self._waiting(held[0][1], held[0][2]) is None:
            heapq.heappop(held)  # granted by aging, cancelled or released meanwhile
        self.hold_until = held[0][0] if held else None
        return grants

    def _next_critical(self) -> _Pending | None:
        """The most urgent critical batch waiting (not held: a hold protects a batch more urgent
        still), else None."""
        heap = self._critical
        while heap:
            _, seq, key = heapq.heappop(heap)
            pending = self._live(seq, key)
            if pending is not None and not pending.waiting:
                return pending
        return None

    @property
    def may_have_pending(self) -> bool:
        """False only when no batch waits (a `dispatch` would grant nothing); True may be stale
        entries alone. Lets a caller skip a dispatch after a completion with nothing waiting."""
        return bool(self._heap or self._held)

    def _waiting(self, seq: int, key: str) -> _Pending | None:
        pending = self._live(seq, key)
        return pending if pending is not None and pending.waiting else None

    def _release(self, seq: int, key: str) -> None:
        """A held batch goes back to its place in the policy heap (if it still waits)."""
        pending = self._waiting(seq, key)
        if pending is not None:
            pending.waiting = False
            heapq.heappush(self._heap, (pending.priority, seq, key))
            if self.lane and self.queries[key].spec.critical:
                heapq.heappush(self._critical, (pending.priority, seq, key))

    def _release_held_for(self, urgent: str) -> None:
        for seq, key in self._held_for.pop(urgent, ()):
            self._release(seq, key)

    def next_look(self, now: float, idle: float) -> float:
        """Seconds until the scheduler should dispatch again with nothing else happening: at the
        end of the earliest hold, else after `idle` (aging and leases move with time)."""
        if self.hold_until is None:
            return idle
        return min(idle, max(self.hold_until - now, 0.001))

    def _hold(self, pending: _Pending, now: float) -> float | None:
        """When an urgent batch is predicted to arrive while `pending` would run: that time, else None."""
        if not self.policy.uses_bands:
            return None  # fifo and fair have no notion of urgency to protect
        if pending.held is not None:
            # held once only: until the urgent batch arrives or should have. Holding again for its
            # successor would gain nothing (a batch longer than the urgent query's period overlaps
            # one of its batches whenever it starts) and could hold it until aging.
            other, batch_id, arrives = pending.held
            state = self.queries.get(other)
            still = state is not None and state.last_batch == batch_id and now < arrives
            return arrives if still else None
        # only arrivals within the batch's cost, and before its own start deadline (holding past
        # it would make the held batch late), of the slack classes below the batch's cost: heap
        # walks over the few queries that could be urgent, whatever the number of queries
        horizon = min(now + pending.cost, pending.deadline)
        found: _Prediction | None = None
        looked = 0
        for index, predicted in enumerate(self._predicted):
            least = URGENCY_BOUNDS[index - 1] if index > 0 else -math.inf  # the class's least slack
            if least >= pending.cost:
                break  # every later class waits at least this batch's cost: none is urgent for it
            if not predicted:
                continue
            while predicted and predicted[0][0] <= now:  # predictions whose time has passed
                heapq.heappop(predicted)
            seen: list[_Prediction] = []
            until = min(horizon, pending.deadline - least)  # later arrivals' deadlines are after this batch's
            while predicted and predicted[0][0] <= until and looked < HOLD_LOOK:
                looked += 1
                entry = heapq.heappop(predicted)
                arrives, batch_id, other, deadline, slack = entry
                state = self.queries.get(other)
                if state is None or state.last_batch != batch_id:
                    continue  # stale: unregistered, or it has submitted since
                if state.pending is not None:  # its next batch cannot come before this one is granted
                    state.parked = entry
                    continue
                seen.append(entry)
                if deadline < pending.deadline and slack < pending.cost:
                    if found is None or arrives < found[0]:
                        found = entry  # urgent: it could not wait for this batch to finish
                    break
            for entry in seen:
                heapq.heappush(predicted, entry)
        if found is None:
            return None
        pending.held = (found[2], found[1], found[0])
        return found[0]

    def _predict(self, state: _Query, request: BatchRequest, now: float) -> None:
        """Note when the query's next batch should arrive, and its start deadline and slack then
        (the policy's key with the costs known now; a next batch's oldest event is this submit)."""
        assert state.period is not None
        arrives = now + state.period
        spec, key = state.spec, request.query
        due = frontier_at(spec, now, None, arrives) + spec.latency_target  # its oldest event: this submit
        _, deadline = self.policy.key(spec, now, due, self.costs.estimate(key, 0), self.costs.path(key), arrives)
        slack = deadline - arrives
        predicted = self._predicted[bisect_right(URGENCY_BOUNDS, slack)]
        heapq.heappush(predicted, (arrives, request.batch_id, request.query, deadline, slack))
        if len(predicted) > 2 * len(self.queries) + 1024:  # classes no hold walks keep stale entries
            predicted[:] = [e for e in predicted if e[0] > now and e[2] in self.queries
                            and self.queries[e[2]].last_batch == e[1]]
            heapq.heapify(predicted)

    def _unpark(self, state: _Query) -> None:
        """Its pending batch is gone: its predicted next arrival counts for holds again."""
        if state.parked is not None:
            heapq.heappush(self._predicted[bisect_right(URGENCY_BOUNDS, state.parked[4])], state.parked)
            state.parked = None

    def _band(self, spec: QuerySpec, slack: float, aged: bool) -> str:
        """The FAIR band of a granted batch: from its slack, less slack more urgent; band0 for an
        aged one. A batch of a query that is not critical, late by more than its whole SLA, runs
        in the first band after the urgent ones: going first cannot bring it back within its SLA,
        and in an urgent band it would take the cores from batches that still can (a windowed
        aggregation's catch-up batch after its cold start, priced at 96 s, sat in band0 beside a
        critical filter; docs/architecture.md, "Late batches"). One late by less keeps band0: a tight query
        that fell behind (a 5 s funnel) catches up there, where in a bulk band it fell further."""
        if not self.policy.uses_bands:
            return DEFAULT_BAND
        if aged:
            return band_name(0)
        if slack < -spec.latency_target and not spec.critical and self.bands > 1:
            return band_name(urgent_bands(self.bands))
        return band_name(band_for_slack(slack, self.bands))

    def _grant(self, pending: _Pending, aged: bool, now: float) -> Grant:
        request = pending.request
        state = self.queries[request.query]
        state.pending = None
        self._unpark(state)
        slack = pending.deadline - now
        band = self._band(state.spec, slack, aged)
        if state.last_band and band != state.last_band:
            state.k = max(1, state.k - 1)  # priority moved: shrink the group additively
        state.last_band = band
        expiry = now + max(self.lease, 10 * pending.cost * state.k)
        state.in_flight[request.batch_id] = _Running(request.batch_id + state.k - 1, expiry, pending.cost)
        heapq.heappush(self._leases, (expiry, request.query, request.batch_id))
        if len(self._leases) > 4 * self.in_flight + 1024:  # completed slots leave stale entries
            self._leases = [lease for lease in self._leases if self._leased(*lease)]
            heapq.heapify(self._leases)
        state.grants += 1
        self.in_flight += 1
        self.policy.granted(state.spec, pending.priority, pending.cost)
        return Grant(request.query, request.batch_id, band, state.k, pending.deadline, slack, now - pending.enqueued, aged)

    def _leased(self, expiry: float, key: str, first: int) -> bool:
        """Whether a lease entry is its slot's current one (else the slot completed or was renewed)."""
        state = self.queries.get(key)
        running = state.in_flight.get(first) if state is not None else None
        return running is not None and running.expiry == expiry

    def _expire(self, now: float) -> None:
        """Free slots whose holder never reported back (a crashed runtime) after their lease."""
        leases = self._leases
        while leases and leases[0][0] <= now:
            expiry, key, first = heapq.heappop(leases)
            if self._leased(expiry, key, first):
                del self.queries[key].in_flight[first]
                self.in_flight -= 1

    def release(self, key: str, batch_id: int) -> None:
        """Free the slot holding `batch_id` without learning anything (its holder went away)."""
        state = self.queries.get(key)
        if state is None:
            return
        for first, running in list(state.in_flight.items()):
            if covers(first, running.last, batch_id):
                del state.in_flight[first]
                self.in_flight -= 1
                return

    def complete(self, done: Completion) -> None:
        """A granted batch finished: free its slot, learn its cost, adapt the group size."""
        state = self.queries.get(done.query)
        if state is None:
            return  # unregistered meanwhile
        seconds, coordination, last = done.seconds, done.coordination, True
        for first, running in state.in_flight.items():  # the loop ends at the one it changes
            if first <= done.batch_id <= running.last:  # `covers`, inline: every completion
                running.seconds += done.seconds
                running.coordination += done.coordination
                last = done.batch_id == running.last or done.ends_group
                if last:  # the slot's last batch (or the runtime ends its group here): free it, and judge the group as a whole
                    del state.in_flight[first]
                    self.in_flight -= 1
                    seconds, coordination = running.seconds, running.coordination
                break
        self.costs.observe(done.query, done.rows, done.seconds, done.tail)
        if last:  # AIMD moves once per grant, on the coordination share of its whole group
            busy = seconds + coordination
            share = coordination / busy if busy > 0 else 0.0
            if share > self.group.grow_above:
                state.k = min(state.k * 2, self.group.k_max)
            elif share < self.group.shrink_below:
                state.k = max(1, state.k - 1)
        if done.latency is not None:
            late = done.latency - state.spec.latency_target
            if late > 0:
                state.batches_late += 1
                state.worst_late = max(state.worst_late * 0.9, late)
            else:
                state.worst_late *= 0.9

    # ------------------------------------------------------------------ reporting

    def pending_count(self) -> int:
        return sum(1 for q in self.queries.values() if q.pending is not None)

    def overload(self, now: float) -> list[Violation]:
        """Which queries will miss (or are missing) their SLA, and by how much.

        Pending batches are laid out in policy order on `capacity` slots with their estimated
        costs (in-flight batches first); a batch finishing after its due time t_MF + L is a
        predicted violation. Queries whose recent batches were late are reported as observed.
        """
        free_at = sorted(
            now + r.cost for q in self.queries.values() for r in q.in_flight.values()
        )[: self.available]
        free_at += [now] * (self.available - len(free_at))
        heapq.heapify(free_at)
        pending = sorted(
            (q.pending for q in self.queries.values() if q.pending is not None), key=lambda p: (p.priority, p.seq)
        )
        out: dict[str, Violation] = {}
        for p in pending:
            start = heapq.heappop(free_at)
            spec = self.queries[p.request.query].spec
            finish = start + p.cost + self.costs.path(spec.key)
            heapq.heappush(free_at, finish)
            if finish > p.due:
                out[spec.key] = Violation(spec.key, spec.tenant, finish - p.due, True)
        for key, q in self.queries.items():
            if key not in out and q.worst_late > 0.001:
                out[key] = Violation(key, q.spec.tenant, q.worst_late, False)
        return sorted(out.values(), key=lambda v: -v.late_by)

    def snapshot(self, now: float) -> dict[str, object]:
        """State for /v1/state: per query pending, running, group size, learned cost, lateness."""
        return {
            "policy": self.policy.name,
            "capacity": self.capacity,
            "lane": self.lane,
            "laneSlots": self.lane_slots,
            "reserved": self.reserved,
            "inFlight": self.in_flight,
            "pending": self.pending_count(),
            "queries": {
                key: {
                    "tenant": q.spec.tenant,
                    "latencyTargetMs": q.spec.latency_target * 1000,
                    "pending": q.pending.request.batch_id if q.pending else None,
                    "waitingMs": round((now - q.pending.enqueued) * 1000, 3) if q.pending else None,
                    "running": sorted(q.in_flight),
                    "groupSize": q.k,
                    "band": q.last_band,
                    "grants": q.grants,
                    "costMs": round(self.costs.estimate(key, 0) * 1000, 3),
                    "costSamples": self.costs.samples(key),
                    "batchesLate": q.batches_late,
                    "held": q.held,
                    "periodMs": None if q.period is None else round(q.period * 1000, 3),
                    "reservedSlots": q.spec.reserved_slots,
                }
                for key, q in self.queries.items()
            },
        }
