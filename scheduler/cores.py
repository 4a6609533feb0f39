"""A pool's cores shared among the batches running on them (pure; what-if's model of Spark's cores).

A granted batch works in two phases: its driver's work (offsets, planning, the driver between
jobs) on one thread, then its tasks' work (core-seconds) spread over its tasks. Every running
thread gets an equal share of the cores (processor sharing, as the OS time-slices Spark's task
threads): with N threads on C cores each runs at min(1, C / N) of a core. Spark's task slots
bound the tasks that run at once: with T tasks wanting S slots, each task runs min(1, S / T) of
the time (a batch's tasks wait for a free slot in proportion). The driver's thread shares the
cores on a local master (driver and executors in one process) and has its own core otherwise
(a driver pod).

Not modelled, so the limits are plain: the order in which Spark's FAIR pools and the urgent lane
give slots (every task waits alike here), tasks of unequal length within a stage, and the other
processes on the machine (a broker, a load generator).

Each thread class keeps a virtual clock that advances at its threads' speed, so a phase ends
when its class's clock reaches the phase's start plus its work per thread: a change in the
running set costs O(log n), whatever the number of batches running.
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


class Cores:
    def __init__(self, cores: float, task_slots: int, driver_shares: bool) -> None:
        if cores <= 0 or task_slots < 1:
            raise ValueError("the pool needs cores and task slots")
        self.cores, self.task_slots, self.driver_shares = cores, task_slots, driver_shares
        self._at = 0.0
        self._clock = [0.0, 0.0]
        """Virtual clocks: the driver threads' and the task threads'."""
        self._heaps: tuple[list[tuple[float, int, Job]], list[tuple[float, int, Job]]] = ([], [])
        self._tasks = 0
        """Tasks of the batches in their task phase."""
        self._seq = 0

    def _speeds(self) -> tuple[float, float]:
        """(a driver thread's, a task thread's) share of a core."""
        drivers = len(self._heaps[0])
        running_tasks = min(self._tasks, self.task_slots)
        threads = running_tasks + (drivers if self.driver_shares else 0)
        core = 1.0 if threads <= self.cores else self.cores / threads
        slot = 1.0 if self._tasks <= self.task_slots else self.task_slots / self._tasks
        return (core if self.driver_shares else 1.0), core * slot

    def _move(self, now: float) -> None:
        if now > self._at:
            driver, task = self._speeds()
            self._clock[0] += driver * (now - self._at)
            self._clock[1] += task * (now - self._at)
            self._at = now

    def _push(self, phase: int, job: Job, per_thread: float) -> None:
        self._seq += 1
        heapq.heappush(self._heaps[phase], (self._clock[phase] + per_thread, self._seq, job))
        if phase == 1:
            self._tasks += job.tasks

    def start(self, now: float, job: Job) -> None:
        """A granted batch starts its work at `now` (no earlier than the last call's time)."""
        self._move(now)
        if job.driver > 0:
            self._push(0, job, job.driver)
        else:
            self._push(1, job, job.work / max(job.tasks, 1))

    def next_end(self) -> float | None:
        """When the next phase ends, if nothing else starts before."""
        driver, task = self._speeds()
        ends = [self._at + max(heap[0][0] - self._clock[phase], 0.0) / speed
                for phase, (heap, speed) in enumerate(zip(self._heaps, (driver, task), strict=True)) if heap]
        return min(ends) if ends else None

    def advance(self, now: float) -> list[Job]:
        """Move to `now`; the jobs whose work ended by then (their driver phase over, their tasks
        go on as the task phase)."""
        self._move(now)
        done: list[Job] = []
        drivers, tasks = self._heaps
        while drivers and drivers[0][0] <= self._clock[0] + _EPSILON * max(1.0, abs(self._clock[0])):
            job = heapq.heappop(drivers)[2]
            if job.work > 0:
                self._push(1, job, job.work / max(job.tasks, 1))
            else:
                done.append(job)
        while tasks and tasks[0][0] <= self._clock[1] + _EPSILON * max(1.0, abs(self._clock[1])):
            job = heapq.heappop(tasks)[2]
            self._tasks -= job.tasks
            done.append(job)
        return done

    @property
    def running(self) -> int:
        return len(self._heaps[0]) + len(self._heaps[1])


def fits(cores: float, task_slots: int, batches: int, widest: int) -> bool:
    """Whether `batches` at once, each of at most `widest` tasks, always run at full speed (no
    thread shares a core or waits for a slot: a batch runs one phase at a time, its driver's one
    thread or its tasks): the simulation may then skip the sharing."""
    threads = batches * max(widest, 1)
    return threads <= task_slots and threads <= cores
