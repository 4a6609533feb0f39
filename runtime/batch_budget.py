"""What a micro-batch costs the pool, measured: the driver JVM's CPU per committed batch, and how
busy the machine's cores are (the interval rule shrinks no interval on a crowded machine).

`auto` weighs a critical query's micro-batches against a Real-time reservation with it
(`scheduler.execution.Budget`). The driver is where a batch's fixed cost is spent (planning, code
generation, offsets and commits, progress events, and the JIT and GC they cause); on a local
master its tasks run there too. On executor pods the tasks' CPU is the executors' and not counted:
a filter's tasks of a few rows are a small part of a batch's cost (docs/performance.md, "What a
micro-batch costs the pool"). Read every lifecycle check from /proc, off the batch path.
"""

from __future__ import annotations

import os
from collections import deque
from pathlib import Path

from sluice.scheduler.execution import BATCH_CPU_PRIOR

WINDOW = 60.0
"""Seconds of the driver's recent CPU and batches the figure is taken over."""
MIN_BATCHES = 20
"""The fewest batches in the window before the figure replaces `BATCH_CPU_PRIOR`."""
TICKS = os.sysconf("SC_CLK_TCK")


def process_cpu(pid: int) -> float | None:
    """User and system CPU seconds of a process and of the children it waited for; None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return sum(int(f) for f in fields[11:15]) / TICKS


def machine_busy_seconds() -> float | None:
    """CPU seconds all of this machine's cores have spent busy (not idle or waiting on I/O) since
    boot, from /proc/stat (in a pod: the node's); None where it cannot be read."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    except (OSError, IndexError):
        return None
    ticks = [int(f) for f in fields[:8]]  # user nice system idle iowait irq softirq steal
    return (sum(ticks) - ticks[3] - ticks[4]) / TICKS


class BatchMeter:
    """The driver's CPU per batch and the machine's busy share over the last `WINDOW` seconds
    (pure: samples in, figures out)."""

    def __init__(self, window: float = WINDOW, min_batches: int = MIN_BATCHES, cores: int | None = None) -> None:
        self.window = window
        self.min_batches = min_batches
        self.cores = cores or os.cpu_count() or 1
        """The machine's cores, what `busy_share` divides by."""
        self.samples: deque[tuple[float, float, int, float | None]] = deque()
        """(when, driver CPU seconds, batches committed by then, the machine's busy seconds), oldest first."""

    def sample(self, now: float, cpu: float | None, batches: int, busy: float | None = None) -> None:
        if cpu is None:
            return
        if self.samples and batches < self.samples[-1][2]:  # queries left with their counts: start over
            self.samples.clear()
        self.samples.append((now, cpu, batches, busy))
        while len(self.samples) > 2 and self.samples[1][0] <= now - self.window:
            self.samples.popleft()

    def busy_share(self) -> float | None:
        """The share of the machine's cores busy over the window; None before two samples of it."""
        if len(self.samples) < 2:
            return None
        (t0, _, _, busy0), (t1, _, _, busy1) = self.samples[0], self.samples[-1]
        if busy0 is None or busy1 is None or t1 <= t0:
            return None
        return min(max((busy1 - busy0) / ((t1 - t0) * self.cores), 0.0), 1.0)

    def per_batch(self) -> float | None:
        """CPU seconds a batch over the window; None before `min_batches` batches in it."""
        if len(self.samples) < 2:
            return None
        (_, cpu0, n0, _), (_, cpu1, n1, _) = self.samples[0], self.samples[-1]
        if n1 - n0 < self.min_batches or cpu1 < cpu0:
            return None
        return (cpu1 - cpu0) / (n1 - n0)

    def batch_cpu(self) -> tuple[float, bool]:
        """(CPU seconds a batch, measured): the window's figure, else `BATCH_CPU_PRIOR`."""
        measured = self.per_batch()
        return (BATCH_CPU_PRIOR, False) if measured is None else (measured, True)
