"""A pool's cores shared among the batches running on them (pure; what-if's model of Spark's cores).

A granted batch works in two phases: its driver's work (offsets, planning, the driver between
jobs) on one thread, then its tasks' work (core-seconds) spread over its tasks. Every running
thread gets an equal share of the cores (processor sharing, as the OS time-slices Spark's task
threads): with N threads on C cores each runs at min(1, C / N) of a core. Spark's task slots
bound the tasks that run at once, in the FAIR bands' order: an urgent batch's tasks (a band
with the urgent bands' minimum share, `bands.py`) take the slots first, and the other batches'
tasks share the slots left (with T tasks wanting S slots, each runs min(1, S / T) of the time;
at most `bulk_slots` of them at once where the urgent lane makes bulk tasks take turns). With
`priority` (the urgent lane's raised thread priorities: nice -5, HotSpot's priority 10) the
cores are shared by weight, as Linux's CFS shares them: an urgent task's thread weighs
`URGENT_WEIGHT` times a thread at nice 0 (at most a whole core each, the rest to the others).
The driver's thread shares the cores on a local master (driver and executors on one machine)
and has its own core otherwise (a driver pod). A task may spend part of its time off the CPU
(`Job.hold`: state-store and checkpoint writes, fetches) and holds its slot and its bulk turn
through it: its slot time is its CPU times 1 + hold, and on the cores it weighs 1 / (1 + hold) of
a thread that never leaves them (every thread then slowed alike: the time off the CPU is taken to
stretch under contention as its CPU does, a simplification).

Not modelled, so the limits are plain: a running task is never pre-empted in Spark, so an urgent
task waits for a slot's current task to end (here it takes the slot at once), tasks of unequal
length within a stage.

Each thread class (drivers, urgent tasks, other tasks) keeps a virtual clock that advances at
its threads' speed, so a phase ends when its class's clock reaches the phase's start plus its
work per thread: a change in the running set costs O(log n), whatever the number of batches
running.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

_EPSILON = 1e-9


@dataclass(frozen=True, slots=True)
class Job:
    """A granted batch's work."""

    key: str
    driver: float
    """Seconds on the driver's one thread."""
    work: float
    """Core-seconds of task work."""
    tasks: int
    """Tasks it spreads over (at least 1)."""
    urgent: bool = False
    """It runs in an urgent FAIR band: its tasks take free slots before the others'."""
    hold: float = 0.0
    """Seconds each task spends off the CPU for each second of its CPU, holding its slot
    (`sluice simulate --model cores-hold`)."""


URGENT_WEIGHT = 3121 / 1024
"""CFS's weight of a thread at nice -5 over one at nice 0 (kernel/sched/core.c's table): the
urgent lane's raised priority (`runtime/session.py`)."""

_DRIVER, _URGENT, _OTHER = 0, 1, 2
"""Thread classes: the batches' driver threads, urgent tasks, the other tasks."""


class Cores:
    def __init__(self, cores: float, task_slots: int, driver_shares: bool, priority: bool = False,
                 bulk_slots: int | None = None) -> None:
        if cores <= 0 or task_slots < 1 or (bulk_slots is not None and bulk_slots < 1):
            raise ValueError("the pool needs cores and task slots")
        self.cores, self.task_slots, self.driver_shares = cores, task_slots, driver_shares
        self.priority, self.bulk_slots = priority, bulk_slots
        self._at = 0.0
        self._clock = [0.0, 0.0, 0.0]
        """Virtual clocks, one a thread class."""
        self._heaps: tuple[list[tuple[float, int, Job]], ...] = ([], [], [])
        self._tasks = [0, 0, 0]
        """Tasks of the batches in their task phase, by class."""
        self._weight = [0.0, 0.0, 0.0]
        """Their weight on the cores, by class: each task 1 / (1 + its job's hold)."""
        self._seq = 0

    def _speeds(self) -> tuple[float, float, float]:
        """A driver thread's, an urgent task's and another task's share of a core (0: no slot)."""
        drivers = len(self._heaps[_DRIVER]) if self.driver_shares else 0
        urgent, other = self._tasks[_URGENT], self._tasks[_OTHER]
        running_urgent = min(urgent, self.task_slots)
        running_other = min(other, self.task_slots - running_urgent)
        if self.bulk_slots is not None:  # the lane's turns: bulk tasks run a few at a time
            running_other = min(running_other, self.bulk_slots)
        # on the cores a running task weighs its class's mean weight (1; under 1 where its job's
        # tasks spend time off the CPU, `Job.hold`)
        on_urgent = running_urgent * self._weight[_URGENT] / urgent if urgent else 0.0
        sharing = (running_other * self._weight[_OTHER] / other if other else 0.0) + drivers
        if on_urgent + sharing <= self.cores:
            first = rest = 1.0
        elif self.priority and on_urgent:  # by weight; an urgent thread takes at most a core
            share = self.cores / (URGENT_WEIGHT * on_urgent + sharing)
            if URGENT_WEIGHT * share < 1.0:
                first, rest = URGENT_WEIGHT * share, share
            else:
                first, rest = 1.0, min(1.0, (self.cores - on_urgent) / sharing)
        else:
            first = rest = self.cores / (on_urgent + sharing)
        return ((rest if self.driver_shares else 1.0),
                first * (running_urgent / urgent if urgent else 1.0),
                rest * (running_other / other if other else 1.0))

    def _move(self, now: float) -> None:
        if now > self._at:
            for phase, speed in enumerate(self._speeds()):
                self._clock[phase] += speed * (now - self._at)
            self._at = now

    def set_cores(self, now: float, cores: float) -> None:
        """From `now`, the threads share `cores` (at least a tenth of a core): what other work on
        the machine left them changed (`Pool.busy`)."""
        self._move(now)
        self.cores = max(cores, 0.1)

    def _push(self, phase: int, job: Job, per_thread: float) -> None:
        self._seq += 1
        heapq.heappush(self._heaps[phase], (self._clock[phase] + per_thread, self._seq, job))
        if phase != _DRIVER:
            self._tasks[phase] += job.tasks
            self._weight[phase] += job.tasks / (1.0 + job.hold)

    def _push_tasks(self, job: Job) -> None:
        # a task's slot time: its CPU and its time off the CPU (none unless `hold`)
        self._push(_URGENT if job.urgent else _OTHER, job, job.work * (1.0 + job.hold) / max(job.tasks, 1))

    def start(self, now: float, job: Job) -> None:
        """A granted batch starts its work at `now` (no earlier than the last call's time)."""
        self._move(now)
        if job.driver > 0:
            self._push(_DRIVER, job, job.driver)
        else:
            self._push_tasks(job)

    def next_end(self) -> float | None:
        """When the next phase ends, if nothing else starts before."""
        ends = [self._at + max(heap[0][0] - self._clock[phase], 0.0) / speed
                for phase, (heap, speed) in enumerate(zip(self._heaps, self._speeds(), strict=True))
                if heap and speed > 0]
        return min(ends) if ends else None

    def advance(self, now: float) -> list[Job]:
        """Move to `now`; the jobs whose work ended by then (their driver phase over, their tasks
        go on as the task phase)."""
        self._move(now)
        done: list[Job] = []
        for phase, heap in enumerate(self._heaps):
            clock = self._clock[phase]
            while heap and heap[0][0] <= clock + _EPSILON * max(1.0, abs(clock)):
                job = heapq.heappop(heap)[2]
                if phase != _DRIVER:
                    self._tasks[phase] -= job.tasks
                    self._weight[phase] = self._weight[phase] - job.tasks / (1.0 + job.hold) if self._tasks[phase] else 0.0
                    done.append(job)
                elif job.work > 0:
                    self._push_tasks(job)
                else:
                    done.append(job)
        return done

    @property
    def running(self) -> int:
        return sum(len(heap) for heap in self._heaps)


def fits(cores: float, task_slots: int, batches: int, widest: int) -> bool:
    """Whether `batches` at once, each of at most `widest` tasks, always run at full speed (no
    thread shares a core or waits for a slot: a batch runs one phase at a time, its driver's one
    thread or its tasks): the simulation may then skip the sharing."""
    threads = batches * max(widest, 1)
    return threads <= task_slots and threads <= cores
