"""The shell of Megaphone on Spark: between two batches of each stateful query, list where its
state partitions are active, ask the planner (`placement.next_moves`, pure) for the next moves
within the query's budget, and apply them through the coordinator (`state_stores.move`).

It plans from the executor scaler's loop, once per committed batch of each query (so at most one
budget per batch), and reports the moves when the query's next batch asks the gate, before any of
its jobs (`apply`): that batch's stateful stage is placed on them and runs each moved partition on
its new executor, which loads its state from the checkpoint. (Spark places a stage's tasks by the
coordinator's locations when it submits the stage, and every task that opens a store reports its
executor active: a move that lands after the stage is placed is undone by its own task.) A unit
that shows back where it was is simply moved again. A leaving executor is empty, for the scaler's kill, once a
listing taken after a batch shows no partition on it. While any move is pending, Spark's locality
wait is raised (`locality.Hold`) so a moved unit's task waits for its target rather than running
on a leaving executor's free core.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sluice.api.common import query_labels

from . import state_stores
from .locality import Hold
from .placement import (
    SLACK_SHARE,
    Move,
    Partition,
    budget_bytes,
    locality_wait,
    max_units,
    next_moves,
    pending,
    reload_rate,
    spread,
    took,
)

log = logging.getLogger("sluice.runtime.megaphone")


@dataclass(frozen=True)
class StatefulQuery:
    key: str
    handle: Any
    """Spark's StreamingQuery."""
    batches: int
    slack: float
    """Seconds: the SLA less the recent p99 latency."""
    recent: tuple[tuple[int, float], ...] = ()
    """(batch id, seconds) of its last few batches, oldest first."""


@dataclass(frozen=True)
class Step:
    """Moves applied after `batch`, whose cost the batches after it will show."""

    batch: int
    bytes: int
    before: tuple[float, ...]
    moves: tuple[Move, ...] = ()
    allowed: float = 0.0
    """Seconds of reload the step's budget allowed: `SLACK_SHARE` of the slack when it was taken."""


@dataclass(frozen=True)
class Executor:
    id: str
    host: str
    warm: bool = True
    """It has run a task (or been up `executors.WARM_AFTER` seconds): it may take state."""


@dataclass(frozen=True)
class Reload:
    """One measured step: the units it moved, their bytes, and the extra time of the worst batch
    after it against the median before (the reload's cost, `placement.reload_rate`)."""

    query: str
    batch: int
    units: int
    bytes: int
    seconds: float
    allowed: float
    """What the budget allowed it (seconds); a step over it overspent the SLA's slack."""


@dataclass(frozen=True)
class _Plan:
    """A step's moves, planned after a commit and reported as the query's next batch asks."""

    moves: tuple[Move, ...]
    listed: state_stores.Listing
    hosts: dict[str, str]
    query: StatefulQuery
    planning: float
    """Seconds the plan took (the coordinator's locations and the planner)."""


class StateMover:
    def __init__(self, spark: Any, queries: Callable[[], list[StatefulQuery]], metrics: Any = None,
                 slacks: Callable[[], list[float]] | None = None) -> None:
        """`slacks`: every running query's SLA slack in seconds (the locality wait's bound);
        without it, the stateful queries' own."""
        self.spark = spark
        self.queries = queries
        self.metrics = metrics
        self.slacks = slacks
        self.hold = Hold(spark)
        """Spark's locality wait, raised while moves are pending so moved units stay moved."""
        self._seen: dict[str, int] = {}
        self._listed: dict[str, list[Partition]] = {}
        self._pending: dict[str, int] = {}
        self._step: dict[str, Step] = {}
        """The last step of each query, until the batches after it are measured."""
        self._rate: dict[str, float] = {}
        """Each query's measured reload rate (bytes/s), from its last measured step."""
        self._planned: dict[str, _Plan] = {}
        """Each query's planned moves, until its next batch asks the gate (`apply`)."""
        self._walked: dict[str, state_stores.Listing] = {}
        """Each query's state directory as walked after its last step (stores and sizes)."""
        self._last_units: dict[str, int] = {}
        """Units each query's last step moved (the next may move twice as many)."""
        self.reloads: list[Reload] = []
        """Every step whose cost was measured, in order (`sluice bench rescale` reports them)."""
        self.timings: list[tuple[float, float, int]] = []
        """(seconds planning, seconds reporting the moves, moves) of each step that moved."""
        self._lock = threading.Lock()
        self.moves = 0
        self.moved_bytes = 0

    def step(self, executors: list[Executor], leaving: frozenset[str]) -> list[Move]:
        """Plan one step for each stateful query that committed a batch since its last one; its
        moves are reported when the query's next batch asks the gate (`apply`)."""
        hosts = {e.id: e.host for e in executors}
        cold = frozenset(e.id for e in executors if not e.warm)
        done: list[Move] = []
        running = self.queries()
        for query in running:
            with self._lock:
                waiting = query.key in self._planned
            if self._seen.get(query.key) == query.batches or waiting:
                continue  # nothing new, or the last plan not yet applied (the listing predates it)
            began = time.perf_counter()
            # the units' stores and sizes from the walk after the last step (a walk of gigabytes
            # of checkpoint files takes seconds); where each is active is asked fresh
            listed = self._walked.get(query.key) or state_stores.listing(self.spark, query.handle)
            parts = state_stores.partitions(self.spark, query.handle, listed)
            moves = next_moves(parts, list(hosts), leaving, self._budget(query, parts), cold,
                               max_units(self._last_units.get(query.key, 0)))
            with self._lock:
                if moves and listed is not None:
                    self._planned[query.key] = _Plan(tuple(moves), listed, hosts, query,
                                                     time.perf_counter() - began)
                self._seen[query.key] = query.batches
                self._listed[query.key] = parts
                self._pending[query.key] = pending(parts, list(hosts), leaving, cold)
            walked = state_stores.listing(self.spark, query.handle)  # sizes for the next step, off its clock
            if walked is not None:
                self._walked[query.key] = walked
            done += moves
        with self._lock:
            for gone in set(self._listed) - {q.key for q in running}:
                for kept in (self._listed, self._seen, self._pending, self._step, self._rate, self._last_units,
                             self._walked, self._planned):
                    kept.pop(gone, None)
            to_move = sum(self._pending.values())
        self._hold(to_move, self.slacks() if self.slacks is not None else [q.slack for q in running])
        return done

    def apply(self, key: str, batch_id: int) -> int:
        """Report the query's planned moves to the coordinator; called as its batch `batch_id` asks
        the gate, before any of its jobs, so the batch's stateful stage is placed on the moves.
        Reported when planned (after the commit of the batch before, from the scaler's thread),
        they raced the next batch: its stateful stage was often placed already, its tasks ran the
        units where they were and reported those executors active again (a 1 GiB shrink's 8- and
        16-unit steps showed no reload at all). Returns the moves reported."""
        with self._lock:
            plan = self._planned.get(key)  # kept until its step is recorded: `step` plans no other meanwhile
        if plan is None:
            return 0
        began = time.perf_counter()
        query, moves = plan.query, plan.moves
        try:
            for move in moves:
                state_stores.move(self.spark, query.handle, move.unit, move.target, plan.hosts[move.target],
                                  plan.listed)
        except Exception:
            with self._lock:  # planned again from a fresh listing, whatever landed
                self._planned.pop(key, None)
            raise
        reported = time.perf_counter() - began
        moved = sum(m.bytes for m in moves)
        with self._lock:
            self._planned.pop(key, None)
            self._step[key] = Step(batch_id - 1, moved, tuple(s for _, s in query.recent), moves,
                                   max(query.slack, 0.0) * SLACK_SHARE)
            self._last_units[key] = len(moves)
            self.moves += len(moves)
            self.moved_bytes += moved
            self.timings.append((round(plan.planning, 3), round(reported, 3), len(moves)))
        for move in moves:
            log.info("moved state partition %s of %s from executor %s to %s (%d bytes) before batch %d",
                     move.unit, key, move.source, move.target, move.bytes, batch_id)
        if self.metrics is not None:
            labels = query_labels(key)
            self.metrics.state_moves.labels(*labels).inc(len(moves))
            self.metrics.state_moved_bytes.labels(*labels).inc(moved)
        return len(moves)

    def _hold(self, pending: int, slacks: list[float]) -> None:
        wait = locality_wait(pending, slacks)
        if wait is None:
            if self.hold.seconds is not None:
                log.info("no state partition left to move: Spark's locality wait back to the application's own")
            self.hold.release()
        elif wait != self.hold.seconds:
            if self.hold.seconds is None:
                log.info("%d state partitions to move: Spark's locality wait raised to %.1f s", pending, wait)
            self.hold.raise_to(wait)

    def stop(self) -> None:
        """Give the application its own locality wait back."""
        self.hold.release()

    def _budget(self, query: StatefulQuery, parts: list[Partition]) -> int:
        """This step's byte budget: none while the last step's cost is not measured yet (the two
        batches after it: one may have been planned before the moves), then from the slack at
        the measured rate (`placement.budget_bytes`). A last step none of whose moves took (the
        batch after it ran every unit where it was) is forgotten unmeasured: no reload to wait for."""
        step = self._step.get(query.key)
        if step is not None and not took(step.moves, parts):
            log.info("state moves of %s after batch %d did not take (a task ran a unit where it was); moving again",
                     query.key, step.batch)
            self._forget_step(query.key, step)
            step = None
        if step is not None:
            after = [s for b, s in query.recent if b > step.batch][:2]
            if len(after) < 2:
                return 0
            rate = reload_rate(step.bytes, list(step.before[-5:]), after)
            if rate is not None:
                self._rate[query.key] = rate
                with self._lock:
                    self.reloads.append(Reload(query.key, step.batch, len(step.moves), step.bytes, step.bytes / rate,
                                               step.allowed))
                log.info("state reload of %s measured at %.1f MB/s", query.key, rate / 1e6)
            self._forget_step(query.key, step)
        return budget_bytes(query.slack, self._rate.get(query.key))

    def _forget_step(self, key: str, step: Step) -> None:
        with self._lock:
            if self._step.get(key) is step:
                del self._step[key]

    def holding(self) -> set[str]:
        """Executors that held a state partition at the last listing of any query."""
        with self._lock:
            return {p.executor for parts in self._listed.values() for p in parts if p.executor is not None}

    def placement(self) -> dict[str, dict[str, int]]:
        with self._lock:
            return {key: spread(parts) for key, parts in self._listed.items()}

    def pending(self) -> int:
        with self._lock:
            return sum(self._pending.values())
