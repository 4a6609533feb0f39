"""The shell of Megaphone on Spark: between two batches of each stateful query, list where its
state partitions are active, ask the planner (`placement.next_moves`, pure) for the next moves
within the query's budget, and apply them through the coordinator (`state_stores.move`).

It runs from the executor scaler's loop, once per committed batch of each query (so at most one
budget per batch): a move reported after batch N makes batch N+1 run the partition on its new
executor, which loads its state from the checkpoint. A task of batch N still running on the old
executor reports that executor active again; the next listing then shows it there and the
partition is simply moved again. A leaving executor is empty, for the scaler's kill, once a
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
        self._walked: dict[str, state_stores.Listing] = {}
        """Each query's state directory as walked after its last step (stores and sizes)."""
        self._last_units: dict[str, int] = {}
        """Units each query's last step moved (the next may move twice as many)."""
        self.reloads: list[Reload] = []
        """Every step whose cost was measured, in order (`sluice bench rescale` reports them)."""
        self.timings: list[tuple[float, float, int]] = []
        """(seconds listing the state, seconds reporting the moves, moves) of each step that moved:
        a move must land before the next batch's stateful stage is placed to take."""
        self._lock = threading.Lock()
        self.moves = 0
        self.moved_bytes = 0

    def step(self, executors: list[Executor], leaving: frozenset[str]) -> list[Move]:
        """One step for each stateful query that committed a batch since its last one."""
        hosts = {e.id: e.host for e in executors}
        cold = frozenset(e.id for e in executors if not e.warm)
        done: list[Move] = []
        running = self.queries()
        for query in running:
            if self._seen.get(query.key) == query.batches:
                continue
            began = time.perf_counter()
            # the units' stores and sizes from the walk after the last step (walking gigabytes of
            # checkpoint files takes long enough that the next batch's stateful stage was placed
            # before a step's moves landed, and ran them where they were); where each is active
            # is asked fresh
            listed = self._walked.get(query.key) or state_stores.listing(self.spark, query.handle)
            parts = state_stores.partitions(self.spark, query.handle, listed)
            moves = next_moves(parts, list(hosts), leaving, self._budget(query, parts), cold,
                               max_units(self._last_units.get(query.key, 0)))
            planned = time.perf_counter()
            for move in moves:
                state_stores.move(self.spark, query.handle, move.unit, move.target, hosts[move.target], listed)
            if moves:
                self.timings.append((round(planned - began, 3), round(time.perf_counter() - planned, 3), len(moves)))
            for move in moves:
                log.info("moved state partition %s of %s from executor %s to %s (%d bytes)",
                         move.unit, query.key, move.source, move.target, move.bytes)
            walked = state_stores.listing(self.spark, query.handle)  # sizes for the next step, off its clock
            if walked is not None:
                self._walked[query.key] = walked
                moved = sum(m.bytes for m in moves)
                last = query.recent[-1][0] if query.recent else -1
                self._step[query.key] = Step(last, moved, tuple(s for _, s in query.recent), tuple(moves),
                                             max(query.slack, 0.0) * SLACK_SHARE)
                self._last_units[query.key] = len(moves)
            with self._lock:
                self._seen[query.key] = query.batches
                self._listed[query.key] = parts
                self._pending[query.key] = len(next_moves(parts, list(hosts), leaving, 1 << 62))
                self.moves += len(moves)
                self.moved_bytes += sum(m.bytes for m in moves)
            if moves and self.metrics is not None:
                labels = query_labels(query.key)
                self.metrics.state_moves.labels(*labels).inc(len(moves))
                self.metrics.state_moved_bytes.labels(*labels).inc(sum(m.bytes for m in moves))
            done += moves
        with self._lock:
            for gone in set(self._listed) - {q.key for q in running}:
                for kept in (self._listed, self._seen, self._pending, self._step, self._rate, self._last_units,
                             self._walked):
                    kept.pop(gone, None)
            pending = sum(self._pending.values())
        self._hold(pending, self.slacks() if self.slacks is not None else [q.slack for q in running])
        return done

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
            log.info("state moves of %s after batch %d did not take (the next batch was placed first); moving again",
                     query.key, step.batch)
            del self._step[query.key]
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
            del self._step[query.key]
        return budget_bytes(query.slack, self._rate.get(query.key))

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
