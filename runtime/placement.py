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
(else it would never move). A budget of zero moves nothing.

`budget_bytes` turns a query's SLA slack into that budget: moving a unit makes the next batch
reload it, about `bytes / RELOAD_BYTES_PER_SECOND` seconds; a step may spend half the slack.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

RELOAD_BYTES_PER_SECOND = 32 * 2**20
"""Assumed rate at which an executor loads a moved partition's state from the checkpoint (local
disk or a nearby object store); `sluice bench rescale` is where it gets measured."""
SLACK_SHARE = 0.5
"""The share of a query's SLA slack one step of moves may spend."""

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


def budget_bytes(slack_seconds: float, rate: float = RELOAD_BYTES_PER_SECOND, share: float = SLACK_SHARE) -> int:
    """Bytes one step may move: `share` of the slack, at `rate`; nothing once the slack is gone."""
    return int(max(slack_seconds, 0.0) * share * rate)


def spread(partitions: list[Partition]) -> dict[str, int]:
    """Units per executor (placement as status shows it)."""
    return dict(Counter(p.executor for p in partitions if p.executor is not None))


def next_moves(partitions: list[Partition], executors: list[str], leaving: frozenset[str], budget: int) -> list[Move]:
    """The moves of one step (see the module's docstring); never a unit twice."""
    staying = sorted(e for e in executors if e not in leaving)
    if budget <= 0 or not staying:
        return []
    load = {e: 0 for e in staying}
    placed: dict[str, list[Partition]] = {e: [] for e in staying}
    homeless: list[Partition] = []
    for p in sorted(partitions, key=lambda p: p.unit):
        if p.executor in load:
            load[p.executor] += 1
            placed[p.executor].append(p)
        elif p.executor is not None:  # on a leaving executor, or one that is gone
            homeless.append(p)
    moves: list[Move] = []
    spent = 0

    def fits(size: int) -> bool:
        return spent + size <= budget or not moves

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
        most = max(staying, key=lambda e: (load[e], e))
        target = least()
        if load[most] - load[target] <= 1 or not placed[most]:
            return moves
        p = min(placed[most], key=lambda p: (p.bytes, p.unit))
        if not fits(p.bytes):
            return moves
        placed[most].remove(p)
        moves.append(Move(p.unit, most, target, p.bytes))
        spent += p.bytes
        load[most] -= 1
        load[target] += 1


def balanced(partitions: list[Partition], executors: list[str], leaving: frozenset[str] = frozenset()) -> bool:
    """No unit on a leaving or gone executor, and the staying ones within one unit of each other."""
    return not next_moves(partitions, executors, leaving, budget=1 << 62)
