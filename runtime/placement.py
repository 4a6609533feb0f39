"""Megaphone on Spark: where each stateful query's state partitions run, and the next few to move.

Spark runs a stateful task where its state store was last loaded (the StateStoreCoordinator's
location), so a new executor never gets a state partition and a removed one makes the next batch
reload all of its share at once. The runtime moves partitions itself, a few per batch, by telling
the coordinator a partition is now active on another executor (`state_stores.move`); the next
batch runs it there, and the executor loads its state from the checkpoint.

`next_moves` is pure (partitions, executors and a byte budget in; moves out). A unit is one
operator's partition with all its stores (a stream-stream join has four per partition): a task
uses them together, so they move together. Order of work:
1. units on a leaving executor, or on one that is gone, go to the least loaded staying executor;
2. then, while the most loaded staying executor holds two units more than the least loaded, its
   smallest unit moves there (balance by count: hashing spreads keys, so units cost alike; the
   smallest moves first, so a batch pays for the least reloading).
A step's moves together stay within the budget; a unit larger than the whole budget moves alone
(else it would never move). A budget of zero moves nothing. A `cold` executor (just started, no
task run yet: its JVM still loading classes and compiling) takes no unit until it is warm, so a
grow's JVM start and its state moves do not land on the same batches; units already on it stay.

`budget_bytes` turns a query's SLA slack into that budget: moving a unit makes a following batch
reload it, `bytes / rate` seconds, and a step may spend half the slack. The rate is measured, not
assumed (`reload_rate`: a step's bytes over the extra time of the batches after it); until a
query's first step is measured, a step moves one unit, and a step never moves more than twice
the units of the one before it (`max_units`; in `sluice bench rescale`'s first run a fixed 32
MiB/s let one step move all of a victim's units). The cap counts units, not bytes: units of alike
size that grow as their checkpoints do, moved smallest first, never fit twice the last step's
bytes, so a byte cap held every step of a 1 GiB shrink to one unit (measured: 32 units at one
step each, about 10 s apart, 34 steps where 27 s of reload were allowed each).

A move only makes a unit's next task prefer its target; Spark runs it elsewhere once its locality
wait passes, and in a shrink the leaving executors, emptied first, take moved units back. While
moves are pending the wait is raised to `locality_wait` (`locality.Hold`).
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

SLACK_SHARE = 0.5
"""The share of a query's SLA slack one step of moves may spend."""
MIN_EXTRA_SECONDS = 0.05
"""A step's measured extra batch time is taken as at least this (batch times are noisy in ms)."""

Unit = tuple[int, int]
"""(operator id, partition id)."""


@dataclass(frozen=True)
class Partition:
    """One unit's place and size: all stores of one operator's partition."""

    unit: Unit
    executor: str | None
    """Where the coordinator says its stores are active; None if nowhere yet."""
    bytes: int = 0


@dataclass(frozen=True)
class Move:
    unit: Unit
    source: str | None
    target: str
    bytes: int


def budget_bytes(slack_seconds: float, rate: float | None, share: float = SLACK_SHARE) -> int:
    """Bytes one step may move: `share` of the slack at the measured reload `rate` (bytes/s); one
    unit (a budget of 1 byte) while the rate is not measured yet; nothing once the slack is gone."""
    if slack_seconds <= 0:
        return 0
    if rate is None:
        return 1
    return int(slack_seconds * share * rate)


def max_units(last_step: int) -> int | None:
    """Units one step may move after a step of `last_step` units: twice as many (None: no step
    yet, the byte budget alone decides)."""
    return 2 * last_step if last_step > 0 else None


def reload_rate(moved_bytes: int, before: list[float], after: list[float]) -> float | None:
    """Bytes per second a step's reload cost: its bytes over the extra time of the worst batch
    after it (`after`, seconds, the batches that may have run the moved units) against the median
    batch before it; None with nothing to judge (no bytes, or no batch on either side)."""
    if moved_bytes <= 0 or not before or not after:
        return None
    return moved_bytes / max(max(after) - statistics.median(before), MIN_EXTRA_SECONDS)


def locality_wait(pending: int, slacks: list[float], share: float = SLACK_SHARE) -> float | None:
    """Seconds a task may wait for the executor it prefers while `pending` units still have to
    move (`locality.Hold`): `share` of the least SLA slack of any running query (`slacks`,
    seconds), since every query's tasks wait alike; None (the application's own wait) when
    nothing is pending or some query has no slack left."""
    if pending <= 0 or not slacks or min(slacks) <= 0:
        return None
    return min(slacks) * share


def pending(partitions: list[Partition], executors: list[str], leaving: frozenset[str],
            cold: frozenset[str] = frozenset()) -> int:
    """Units still to move onto the executors that may take one now (`next_moves` without a
    budget): a cold executor takes none until it is warm, so units that would balance onto it are
    not pending yet, and Spark's locality wait is not raised for them (`locality.Hold`: every
    query's tasks would wait on it while nothing could move; a critical filter's tasks preferring
    the cold executor, kept off it by the lane's warm-up, waited the raised wait in each batch)."""
    return len(next_moves(partitions, executors, leaving, 1 << 62, cold))


def took(moves: Iterable[Move], partitions: list[Partition]) -> bool:
    """Whether any of a step's moves shows in a later listing (its unit active on its target). A
    step none of whose moves took ran no reload (the next batch's tasks had been placed before
    it), so it has no cost to wait for."""
    where = {p.unit: p.executor for p in partitions}
    return any(where.get(m.unit) == m.target for m in moves)


def spread(partitions: list[Partition]) -> dict[str, int]:
    """Units per executor (placement as status shows it)."""
    return dict(Counter(p.executor for p in partitions if p.executor is not None))


def next_moves(partitions: list[Partition], executors: list[str], leaving: frozenset[str], budget: int,
               cold: frozenset[str] = frozenset(), most: int | None = None) -> list[Move]:
    """The moves of one step (see the module's docstring); never a unit twice, and at most `most`
    units when given (`max_units`)."""
    staying = sorted(e for e in executors if e not in leaving and e not in cold)
    if budget <= 0 or not staying:
        return []
    load = {e: 0 for e in staying}
    placed: dict[str, list[Partition]] = {e: [] for e in staying}
    homeless: list[Partition] = []
    for p in sorted(partitions, key=lambda p: p.unit):
        if p.executor in load:
            load[p.executor] += 1
            placed[p.executor].append(p)
        elif p.executor in cold and p.executor not in leaving:
            continue
        elif p.executor is not None:  # on a leaving executor, or one that is gone
            homeless.append(p)
    moves: list[Move] = []
    spent = 0

    def fits(size: int) -> bool:
        return (spent + size <= budget and (most is None or len(moves) < most)) or not moves

    def least() -> str:
        return min(staying, key=lambda e: (load[e], e))

    for p in sorted(homeless, key=lambda p: (p.bytes, p.unit)):
        if not fits(p.bytes):
            return moves
        target = least()
        moves.append(Move(p.unit, p.executor, target, p.bytes))
        spent += p.bytes
        load[target] += 1
    while True:
        fullest = max(staying, key=lambda e: (load[e], e))
        target = least()
        if load[fullest] - load[target] <= 1 or not placed[fullest]:
            return moves
        p = min(placed[fullest], key=lambda p: (p.bytes, p.unit))
        if not fits(p.bytes):
            return moves
        placed[fullest].remove(p)
        moves.append(Move(p.unit, fullest, target, p.bytes))
        spent += p.bytes
        load[fullest] -= 1
        load[target] += 1


def balanced(partitions: list[Partition], executors: list[str], leaving: frozenset[str] = frozenset()) -> bool:
    """No unit on a leaving or gone executor, and the staying ones within one unit of each other."""
    return not next_moves(partitions, executors, leaving, budget=1 << 62)
