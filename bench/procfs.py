"""A process group's resources, read from Linux's /proc (pure reads): its memory,
CPU, threads and open files, and the machine's busy cores. The benchmarks measure with these."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sluice.runtime import batch_budget

TICKS = os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def tree(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(_children(p))
    return out


def _status_field(text: str, name: str) -> int:
    """A number from a /proc/PID/status text (its first field: kB for sizes), 0 if absent."""
    for line in text.splitlines():
        if line.startswith(name + ":"):
            return int(line.split()[1])
    return 0


def rss_mb(pid: int) -> float:
    """Resident memory of a process and its descendants (MB)."""
    total = 0
    for p in tree(pid):
        try:
            total += _status_field(Path(f"/proc/{p}/status").read_text(), "VmRSS")
        except OSError:
            continue
    return total / 1024


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process and its descendants, with the children each has
    waited for (a short-lived process, such as Hadoop's `chmod` for each checkpoint file, ends
    before any reading sees it: its CPU is its parent's `cutime` and `cstime`)."""
    total = 0
    for p in tree(pid):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])
    return total / TICKS


def _soft_limit(pid: int, name: str) -> int | None:
    """A process's soft limit from /proc/PID/limits (None: unlimited or not readable)."""
    try:
        for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
            if line.startswith(name):
                value = line[len(name):].split()[0]
                return None if value == "unlimited" else int(value)
    except OSError:
        return None
    return None


def vitals(pid: int) -> dict[str, Any]:
    """What a process group holds of the limits a JVM can die on: threads and open files per
    program (the driver's `java`, the runtime's `python`), the JVM's soft limits on processes
    (`ulimit -u`, counted over every thread of its user) and open files, and the machine's
    threads against the kernel's `threads-max`."""
    threads: dict[str, int] = {}
    fds: dict[str, int] = {}
    java: int | None = None
    for p in tree(pid):
        try:
            name = Path(f"/proc/{p}/comm").read_text().strip()
            count = _status_field(Path(f"/proc/{p}/status").read_text(), "Threads")
            files = len(os.listdir(f"/proc/{p}/fd"))
        except OSError:
            continue
        threads[name] = threads.get(name, 0) + count
        fds[name] = fds.get(name, 0) + files
        java = p if name == "java" and java is None else java
    machine = 0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                machine += _status_field((entry / "status").read_text(), "Threads")
            except OSError:
                continue
    limited = java if java is not None else pid
    return {"threads": threads, "fds": fds,
            "max_user_processes": _soft_limit(limited, "Max processes"),
            "max_open_files": _soft_limit(limited, "Max open files"),
            "machine_threads": machine,
            "threads_max": int(Path("/proc/sys/kernel/threads-max").read_text())}


def machine_busy_seconds() -> float:
    """CPU seconds all of this machine's cores have spent busy since boot (`batch_budget`'s, which
    the runtime reads too): the runtime shares the cores with the broker and the producers."""
    busy = batch_budget.machine_busy_seconds()
    if busy is None:
        raise OSError("/proc/stat cannot be read")
    return busy


POD_CGROUPS = Path("/sys/fs/cgroup/cpuacct/kubepods")
"""Where the node's kubelet (cgroupfs driver, cgroup v1) puts each pod's CPU accounting:
kubepods[/burstable|/besteffort]/pod<uid>."""


def pod_cpu_seconds(uid: str, root: Path = POD_CGROUPS) -> float | None:
    """CPU seconds a pod's containers have used (its cgroup's `cpuacct.usage`); None when this
    machine has no such pod (gone, or another node's)."""
    for folder in (root / f"pod{uid}", root / "burstable" / f"pod{uid}", root / "besteffort" / f"pod{uid}"):
        try:
            return int((folder / "cpuacct.usage").read_text()) / 1e9
        except (OSError, ValueError):
            continue
    return None


JVM_OWN = {"jit": ("C1 CompilerThre", "C2 CompilerThre"), "gc": ("GC Thread", "G1 ", "VM Thread")}
"""A JVM's own threads by their names (/proc/PID/task/TID/comm, cut at 15 characters): its JIT
compilers, and its collectors (G1's, or the Serial collector's work on the VM thread)."""
BATCH_THREADS = {"task": ("Executor task ",), "stream": ("stream executio",)}
"""The threads a batch's measured work runs on: Spark's task threads (`Executor task launch
worker` while they run a task, `Executor task idle worker` between tasks since Spark 4.2) and each
query's stream execution thread (the driver's part of a batch)."""


THREAD_KINDS = (*JVM_OWN, *BATCH_THREADS, "rest")
SERIES_EVERY_S = 2.0
"""Seconds between a benchmark's reads of its processes' threads while the load runs."""


def thread_seconds(pid: int) -> dict[int, tuple[str, float]] | None:
    """Each live thread of the process `pid`: its kind (`THREAD_KINDS`: the JVMs' own, `JVM_OWN`,
    compiling and collecting; the batches', `BATCH_THREADS`; every other thread as `rest`: RPC,
    the listener bus, the DAG scheduler, the runtime's Python, Kafka's heartbeats) and its CPU
    seconds, by thread id; None once the process is gone."""
    kinds = JVM_OWN | BATCH_THREADS
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    out = {}
    for tid in threads:
        try:
            stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        except OSError:
            continue
        name, fields = stat[stat.index("(") + 1:stat.rindex(")")], stat.rsplit(")", 1)[1].split()
        kind = next((k for k, prefixes in kinds.items() if name.startswith(prefixes)), "rest")
        out[int(tid)] = (kind, (int(fields[11]) + int(fields[12])) / TICKS)
    return out


@dataclass
class ThreadSeries:
    """The CPU of the processes a run measures, over its load, by kind of thread: at each
    `sample`, [seconds since the first, CPU seconds since] for each of `THREAD_KINDS` summed over
    the processes' threads, and for the machine (`machine`: its busy CPU). Each thread's CPU
    between two samples goes to the kind its name says at the second (Spark renames its task
    threads as they take a task); a thread or process first seen after the first sample is
    counted from its start; what one that ended used after its last sample is lost (a JVM ends
    idle compiler threads)."""

    began: tuple[float, float] = (0.0, 0.0)
    seen: dict[tuple[int, int], float] = field(default_factory=dict)
    """(pid, tid) -> its CPU seconds at the last sample."""
    totals: dict[str, float] = field(default_factory=lambda: dict.fromkeys(THREAD_KINDS, 0.0))
    series: dict[str, list[list[float]]] = field(default_factory=dict)

    def sample(self, pids: Iterable[int]) -> None:
        fresh = not self.series
        if fresh:
            self.began = (time.monotonic(), machine_busy_seconds())
        now = round(time.monotonic() - self.began[0], 1)
        for pid in pids:
            for tid, (kind, used) in (thread_seconds(pid) or {}).items():
                before = self.seen.get((pid, tid), used if fresh else 0.0)
                self.totals[kind] += max(used - before, 0.0)
                self.seen[(pid, tid)] = used
        self.series.setdefault("machine", []).append([now, round(machine_busy_seconds() - self.began[1], 3)])
        for kind, used in self.totals.items():
            self.series.setdefault(kind, []).append([now, round(used, 3)])


def pod_pids(uid: str, root: Path = POD_CGROUPS) -> list[int]:
    """The processes of a pod's containers (its cgroups' `cgroup.procs`)."""
    for folder in (root / f"pod{uid}", root / "burstable" / f"pod{uid}", root / "besteffort" / f"pod{uid}"):
        if folder.is_dir():
            pids: list[int] = []
            for procs in folder.rglob("cgroup.procs"):
                with contextlib.suppress(OSError, ValueError):
                    pids.extend(int(line) for line in procs.read_text().split())
            return sorted(set(pids))
    return []
