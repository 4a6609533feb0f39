"""Cost model: learns each query's micro-batch cost from completed batches (pure, no clock).

A batch costs a fixed part (offset log, planning, commit: ~150 ms on Spark) plus a part that
grows with its rows. The model learns both online:

- `fixed`: an EWMA of the cost of the query's cheapest batches (the low quantile of recent costs),
  capped at the prior's `floor`: when every batch has the same size the split between fixed and
  per-row cost cannot be observed, and the cap leans to the conservative side (more per row);
- `per_row`: an EWMA of (cost - fixed) / rows, with each cost clipped to 4x the prediction so one
  outlier (a fetch-failure retry) cannot swing it. Over a query's first `warmup` batches it is
  the cheapest of them instead: those run on a cold JVM (class loading, code generation, the
  first state stores), and seeding the EWMA with one priced a windowed aggregation's next batches
  about 30x high for a minute, which put them in the wrong bands (measured: docs/architecture.md,
  "Measurements behind the design"); once warm, the cold batches stay in the line clipped to 4x the prediction;
- once recent batches differ in size (3x or more), a least-squares line through them replaces
  both, so a burst's first large batch is estimated pessimistically and later ones truly;
- a safety margin: a high quantile of recent relative residuals, so the estimate is conservative.

`estimate(rows)` = (fixed + per_row * rows) * (1 + margin). A batch with 10x the usual rows is
estimated at about 10x the variable part at once, before any such batch was seen. A new query
starts from a conservative prior until it has `warmup` samples.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, TypedDict


def ranked_quantile(ordered: list[float], q: float) -> float:
    """Nearest-rank quantile (q in [0, 1]) of a non-empty list in ascending order."""
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def _slide(ranked: list[float], leaving: float | None, value: float) -> None:
    """Keep `ranked` the sorted copy of a window: `value` joins, `leaving` (if any) leaves."""
    if leaving is not None:
        del ranked[bisect_left(ranked, leaving)]
    insort(ranked, value)


SPREAD = 3.0
"""How many times the largest of recent batch sizes must be the smallest for a fitted line."""


def fit_line(points: list[tuple[int, float]], spread: float = SPREAD) -> tuple[float, float] | None:
    """cost = fixed + per_row x rows through (rows, seconds) points, once their sizes differ `spread`x or more.

    Until then the split between fixed and per-row cost is unobservable: None. A line with a
    negative part is no model of a batch: None too."""
    points = [(r, c) for r, c in points if r > 0]
    if len(points) < 4:
        return None
    sizes = [r for r, _ in points]
    if max(sizes) < spread * min(sizes):
        return None
    n = len(points)
    mean_r = sum(sizes) / n
    mean_c = sum(c for _, c in points) / n
    var = sum((r - mean_r) ** 2 for r in sizes)
    slope = sum((r - mean_r) * (c - mean_c) for r, c in points) / var
    intercept = mean_c - slope * mean_r
    return (intercept, slope) if slope >= 0 and intercept >= 0 else None


@dataclass(frozen=True, slots=True)
class CostPrior:
    """Starting point for a query nothing is known about yet (deliberately pessimistic)."""

    fixed: float = 0.5
    """Seconds per batch regardless of size."""
    per_row: float = 20e-6
    """Seconds per input row."""
    tail: float = 0.05
    """Seconds of work after the batch's action (sink commit, offset commit): C_path."""
    floor: float = 0.1
    """Most of a batch's cost taken as fixed: Spark's micro-batch floor here is ~120-220 ms."""


@dataclass(slots=True)
class QueryCost:
    """What is known about one query's batch costs."""

    prior: CostPrior
    alpha: float = 0.2
    warmup: int = 3
    samples: int = 0
    row_samples: int = 0
    fixed: float = 0.0
    per_row: float = 0.0
    tail: float = 0.0
    recent: deque[tuple[int, float]] = field(default_factory=lambda: deque(maxlen=64))
    residuals: deque[float] = field(default_factory=lambda: deque(maxlen=64))
    _ranked_costs: list[float] = field(default_factory=list)
    """The costs in `recent`, sorted (kept as batches come: its low quantile is asked every batch)."""
    _ranked_rows: list[float] = field(default_factory=list)
    """The row counts in `recent`, sorted (its ends decide every batch whether a line is fitted)."""
    _ranked_residuals: list[float] = field(default_factory=list)
    """`residuals`, sorted."""
    _margin: float = 0.25
    """The high quantile of recent relative residuals (0.25 before 4 of them), within [0, 2], kept
    from the last observation: every batch that arrives, and every urgent
    arrival the scheduler looks ahead to, asks for an estimate (a sort of the residuals each
    time was most of a decision among 1,000 queries)."""

    def _learned(self, rows: int) -> float:
        return self.fixed + self.per_row * max(rows, 0)

    def observe(self, rows: int, seconds: float, tail: float | None) -> None:
        seconds = seconds if seconds > 0 else 0.0  # NaN too: the sorted windows need ordered values
        clipped = seconds
        if self.samples > 0:
            predicted = self.fixed + self.per_row * (rows if rows > 0 else 0)  # `_learned`, inline
            if predicted > 0:
                residual = (seconds - predicted) / predicted
                residuals = self.residuals
                _slide(self._ranked_residuals, residuals[0] if len(residuals) == residuals.maxlen else None, residual)
                residuals.append(residual)
                if self.samples >= self.warmup:
                    clipped = min(seconds, 4 * predicted)
        recent = self.recent
        full = len(recent) == recent.maxlen
        _slide(self._ranked_costs, recent[0][1] if full else None, clipped)
        _slide(self._ranked_rows, recent[0][0] if full else None, rows)
        recent.append((rows, clipped))
        self.samples += 1
        ranked = self._ranked_costs  # ranked_quantile(ranked, 0.1), inline: asked every batch
        floor = min(ranked[round(0.1 * (len(ranked) - 1))], self.prior.floor)
        if self.samples == 1:
            self.fixed = floor
            self.tail = self.prior.tail if tail is None else tail
        else:
            self.fixed += self.alpha * (floor - self.fixed)
        if rows > 0:
            sample = max(clipped - self.fixed, 0.0) / rows
            if self.row_samples == 0:
                self.per_row = sample
            elif self.row_samples < self.warmup:  # cold batches: the cheapest per row yet
                self.per_row = min(self.per_row, sample)
            else:
                self.per_row += self.alpha * (sample - self.per_row)
            self.row_samples += 1
            if self.row_samples == self.warmup:  # warm now: the cold batches leave the line clipped
                self.recent = deque(((r, min(c, 4 * self._learned(r))) for r, c in self.recent), maxlen=self.recent.maxlen)
                self._ranked_costs = sorted(c for _, c in self.recent)
            self._fit()
        if tail is not None:
            self.tail += self.alpha * (max(tail, 0.0) - self.tail)
        if len(self.residuals) >= 4:
            self._margin = min(max(ranked_quantile(self._ranked_residuals, 0.9), 0.0), 2.0)

    def _fit(self) -> None:
        """Once recent batches differ in size (3x or more), the fitted line replaces both parts.

        Until then the split is unobservable and the floor cap stands (pessimistic for larger
        batches); after one batch of another size the line is known and replaces the guess.
        """
        recent = self.recent
        if len(recent) < 4:
            return
        smallest, largest = self._ranked_rows[0], self._ranked_rows[-1]
        if smallest > 0 and largest < SPREAD * smallest:
            return  # sizes alike: the split is unobservable (`fit_line` would say None)
        line = fit_line(list(recent))
        if line is not None:
            self.fixed, self.per_row = line

    def estimate(self, rows: int) -> float:
        rows = rows if rows > 0 else 0  # asked for every batch and every predicted arrival: kept lean
        if self.samples >= self.warmup and self.samples:
            return (self.fixed + self.per_row * rows) * (1 + self._margin)
        prior = self.prior.fixed + self.prior.per_row * rows
        if self.samples == 0:
            return prior
        return max((self.fixed + self.per_row * rows) * (1 + self._margin), prior)

    def path(self) -> float:
        return self.prior.tail if self.samples == 0 else self.tail


class CostModel:
    """Per-query costs with feedback; C_M = estimate(query, rows), C_path = path(query)."""

    def __init__(self, prior: CostPrior | None = None) -> None:
        self.prior = prior or CostPrior()
        self._queries: dict[str, QueryCost] = {}

    def _get(self, query: str) -> QueryCost:
        cost = self._queries.get(query)
        if cost is None:
            cost = self._queries[query] = QueryCost(self.prior)
        return cost

    def observe(self, query: str, rows: int, seconds: float, tail: float | None = None) -> None:
        """Learn from a completed batch: its rows, cost in seconds and, if known, its tail (C_path)."""
        self._get(query).observe(rows, seconds, tail)

    def estimate(self, query: str, rows: int) -> float:
        """C_M: the expected cost in seconds of a batch of `rows` rows of `query`."""
        cost = self._queries.get(query)
        if cost is None:
            return self.prior.fixed + self.prior.per_row * max(rows, 0)
        return cost.estimate(rows)

    def path(self, query: str) -> float:
        """C_path: the expected cost of what must still run after the batch's action."""
        cost = self._queries.get(query)
        return self.prior.tail if cost is None else cost.path()

    def samples(self, query: str) -> int:
        cost = self._queries.get(query)
        return cost.samples if cost else 0

    def forget(self, query: str) -> None:
        self._queries.pop(query, None)


DRIVER_QUANTILE = 0.25
"""The quantile of recent batches' driver seconds, and of their tasks' run time to CPU time,
taken as a batch's own: the quieter batches, whose threads shared the cores least (the busier
ones carry others' work in them)."""


class WorkSample(NamedTuple):
    """One batch as the work fit reads it."""

    rows: int
    driver: float
    """Seconds of its critical path on the driver's own work."""
    cpu: float
    """Its tasks' CPU seconds."""
    run: float
    """Its tasks' run seconds (CPU and what they spent off it: I/O, shuffle and state-store
    writes, and time-slices lost to other threads)."""
    tasks: int
    driver_cpu: float | None = None
    """CPU seconds of its query's stream thread over the batch (the driver's work without its
    waits for a core; None where the run did not report it)."""
    turn_wait: float | None = None
    """Seconds of `run` its tasks spent waiting for a turn of the urgent lane (bulk tasks take
    turns on a local master; the simulation has the turns of its own); None where not seen."""


@dataclass(frozen=True, slots=True)
class Work:
    """What a query's batch costs as work, contention left out (what-if's model of the cores).

    `driver`: seconds on the driver's one thread (offsets, planning, the driver between jobs);
    task work in core-seconds: `task_fixed + task_per_row x rows` (task CPU time, which a task
    waiting for a core does not accrue), spread over `tasks` tasks. `run_ratio` (at least 1) is
    the quieter batches' task run time to CPU time: what a task spends off the CPU, by which
    `sluice simulate --model cores-run` multiplies the task work (the default model does not)."""

    driver: float
    task_fixed: float
    task_per_row: float
    tasks: int
    batches: int
    how: str
    """One sentence: the fit's input and what it produced."""
    run_ratio: float = 1.0
    driver_cpu: float | None = None
    """The median batch's CPU seconds on the driver's stream thread: `driver` without the waits for
    a core (`sluice simulate --model cores-cpu` runs it as the driver's work); None where the
    batches did not report it."""

    def figures(self) -> WorkFigures:
        """As a status's and a recording's costs carry it (`BatchCosts`' names and roundings)."""
        figures = WorkFigures(driver_ms=round(self.driver * 1000, 3), task_cpu_ms=round(self.task_fixed * 1000, 3),
                              task_cpu_per_row_us=round(self.task_per_row * 1e6, 4), tasks=self.tasks,
                              task_run_ratio=round(self.run_ratio, 4), fit=self.how)
        if self.driver_cpu is not None:
            figures["driver_cpu_ms"] = round(self.driver_cpu * 1000, 3)
        return figures


class WorkFigures(TypedDict, total=False):
    """`Work` as `BatchCosts` names it (none of them before a fit)."""

    driver_ms: float
    driver_cpu_ms: float
    task_cpu_ms: float
    task_cpu_per_row_us: float
    tasks: int
    task_run_ratio: float
    fit: str


def fit_work(batches: Sequence[WorkSample], kept: int = 0) -> Work | None:
    """Work from recent batches; None before 3 batches with task CPU. `kept`: how many of them
    are older batches kept for their size (the last ones; said in `how`).

    The driver's part is the `DRIVER_QUANTILE` of the batches' driver seconds, and so is the
    ratio of task run time to task CPU. Task CPU goes on a line through the rows once batch sizes
    differ 3x or more (`fit_line`); until then it is all taken as growing with the rows (the
    median CPU a row), the cautious split."""
    done = [b for b in batches if b.rows > 0 and b.cpu > 0]
    if len(done) < 3:
        return None
    driver = ranked_quantile(sorted(max(b.driver, 0.0) for b in done), DRIVER_QUANTILE)
    cpus = sorted(b.driver_cpu for b in done if b.driver_cpu is not None and b.driver_cpu >= 0)
    driver_cpu = cpus[len(cpus) // 2] if cpus else None
    # a task's time off the CPU, without its wait for a bulk turn (the simulation has the turns)
    ratio = max(ranked_quantile(sorted((b.run - min(b.turn_wait or 0.0, b.run)) / b.cpu for b in done),
                                DRIVER_QUANTILE), 1.0)
    tasks = sorted(max(b.tasks, 1) for b in done)[len(done) // 2]
    line = fit_line([(b.rows, b.cpu) for b in done])
    if line is not None:
        task_fixed, per_row = line
        split = "a line through rows and task CPU"
    else:
        task_fixed, per_row = 0.0, sorted(b.cpu / b.rows for b in done)[len(done) // 2]
        split = "the median task CPU a row (batch sizes alike: all of it taken as growing with the rows)"
    older = f" ({kept} of them the run's largest, older)" if kept else ""
    turns = ", less its waits for a bulk turn," if any(b.turn_wait for b in done) else ""
    on_cpu = "" if driver_cpu is None else f", {driver_cpu * 1000:.0f} ms of it on the CPU (the median of {len(cpus)})"
    how = (f"{len(done)} batches{older}: driver {driver * 1000:.0f} ms (their {DRIVER_QUANTILE * 100:.0f}th percentile){on_cpu}, "
           f"{split}: {task_fixed * 1000:.1f} ms + {per_row * 1e6:.2f} µs a row over {tasks} task(s), "
           f"times {ratio:.2f} for run time off the CPU (the same percentile of run time{turns} to CPU)")
    return Work(driver, task_fixed, per_row, tasks, len(done), how, ratio, driver_cpu)
