"""The search behind `sluice bench capacity`: the highest load multiplier at which every SLA holds.

Pure: probes in, the next multiplier (or the end) out. A probe is one run of the scenario with
every rate scaled by a multiplier; it passes when every query kept its SLA. Pass/fail on this
machine is noisy, so the search never trusts one probe against the rest:

- each multiplier's verdict is the majority of its probes (a tie is a failure);
- the bracket is the monotone split of those verdicts that contradicts the fewest of them (on a
  tie, the lower split: a capacity is a promise, so noise may cost capacity, never add it);
- it brackets first (doubling up from the start while probes pass, halving down while they fail),
  then bisects the bracket geometrically until its ends are within `tolerance` of each other;
- a capacity needs two probes agreeing at the boundary: once the bracket is narrow, its low end
  is probed again until `confirm` probes there passed, then its high end until `confirm` failed
  (a probe that disagrees makes that multiplier a tie, a failure, and the bracket moves down);
- a bracket already narrow before `min_probes` probes re-probes its low end (its pass is the
  figure reported, so that is the pass worth confirming).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Probe:
    multiplier: float
    ok: bool
    worst_query: str = ""
    worst_attainment: float | None = None
    rows: int = 0
    bottleneck: str | None = None
    """The worst query's critical-path bottleneck in the probe (SnailTrail), as its status names it."""


@dataclass(frozen=True, slots=True)
class Search:
    start: float = 1.0
    """The first multiplier: the scenario as written."""
    factor: float = 2.0
    """Bracketing step (multiplied or divided)."""
    tolerance: float = 1.15
    """Bisection ends when the bracket's high end is within this factor of its low end."""
    floor: float = 1 / 8
    """Below this the search gives up: capacity 0 (an eighth of the stated load still misses an SLA)."""
    ceiling: float = 64.0
    """Above this the search stops climbing: capacity is at least the last pass."""
    min_probes: int = 4
    max_probes: int = 12
    confirm: int = 2
    """Probes that must agree at each end of the final bracket (its low end passed, its high end failed)."""


DEFAULT = Search()


@dataclass(frozen=True, slots=True)
class Bracket:
    low: float | None
    """The highest multiplier that passed, consistently with the split (None: none passed)."""
    high: float | None
    """The lowest multiplier that failed above `low` (None: none failed)."""
    contradictions: int
    """Multipliers whose verdict the split disagrees with (noise)."""


def verdicts(probes: Sequence[Probe]) -> list[tuple[float, bool]]:
    """Each multiplier probed, ascending, with its majority verdict (a tie fails)."""
    tally: dict[float, list[int]] = {}
    for probe in probes:
        counts = tally.setdefault(probe.multiplier, [0, 0])
        counts[0 if probe.ok else 1] += 1
    return [(m, passes > fails) for m, (passes, fails) in sorted(tally.items())]


def bracket(probes: Sequence[Probe]) -> Bracket:
    """The monotone split (everything below passes, everything above fails) that fits best."""
    marks = verdicts(probes)
    if not marks:
        return Bracket(None, None, 0)
    best_split, best_wrong = 0, math.inf
    for split in range(len(marks) + 1):  # marks[:split] should pass, marks[split:] should fail
        wrong = sum(not ok for _, ok in marks[:split]) + sum(ok for _, ok in marks[split:])
        if wrong < best_wrong:  # strict: the first (lowest) split wins a tie
            best_split, best_wrong = split, wrong
    passing = [m for m, ok in marks[:best_split] if ok]
    failing = [m for m, ok in marks[best_split:] if not ok]
    return Bracket(max(passing) if passing else None, min(failing) if failing else None, int(best_wrong))


def _round(value: float) -> float:
    """Three significant digits: multipliers stay readable in tables."""
    return float(f"{value:.3g}")


def next_multiplier(probes: Sequence[Probe], search: Search = DEFAULT) -> float | None:
    """The multiplier to probe next, or None when the search is done."""
    if not probes:
        return search.start
    if len(probes) >= search.max_probes:
        return None
    found = bracket(probes)
    low, high = found.low, found.high
    if low is None:  # nothing passed yet: go down
        assert high is not None
        lower = _round(high / search.factor)
        return lower if lower >= search.floor else None
    if high is None:  # nothing failed above the passes: go up
        higher = _round(low * search.factor)
        return higher if higher <= search.ceiling else None
    if high / low > search.tolerance:
        middle = _round(math.sqrt(low * high))
        if low < middle < high:
            return middle
    if _agreeing(probes, low, True) < search.confirm:
        return low
    if _agreeing(probes, high, False) < search.confirm:
        return high
    return low if len(probes) < search.min_probes else None


def _agreeing(probes: Sequence[Probe], multiplier: float, ok: bool) -> int:
    return sum(1 for p in probes if p.multiplier == multiplier and p.ok == ok)


def confirmed(probes: Sequence[Probe], search: Search = DEFAULT) -> bool:
    """Whether the capacity is backed by `confirm` agreeing probes at each end of its bracket (an
    end the search never reached, the floor or the ceiling, needs none)."""
    found = bracket(probes)
    return ((found.low is None or _agreeing(probes, found.low, True) >= search.confirm)
            and (found.high is None or _agreeing(probes, found.high, False) >= search.confirm))


def capacity(probes: Sequence[Probe]) -> float:
    """The capacity the probes support: the bracket's low end (0 when nothing passed)."""
    low = bracket(probes).low
    return 0.0 if low is None else low
