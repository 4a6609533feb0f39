"""Where a benchmark's Kafka broker and load generator run relative to Spark: alike on both targets.

On the node target Spark runs in pods, under the kubelet's `kubepods` cgroup, whose CPU weight is
the node's allocatable CPU (cgroup v1 `cpu.shares` 2048 on two cores); a process left at the root
competes there as one entity of weight 1024 per thread group it runs. Locally Spark's JVM was such
a process itself, beside the broker and the load generator. So the two targets loaded Spark
differently. Here both place them alike:

- the broker's JVM and the load generator's producer threads in a cgroup of their own,
  `LOAD_GROUP`, of weight `LOAD_SHARES`;
- Spark in a group of weight `SPARK_SHARES` (= `kubepods`' on a 2-core node): locally each
  `sluice run` process and its JVM go to `SPARK_GROUP`; on the node the pods stay in `kubepods`.

Each group's CPU is read from `cpuacct` groups of the same names (this machine mounts the two
controllers apart) and recorded with the placement in results.json. Where cgroup v1's cpu
controller is not writable (no root, cgroup v2), nothing moves and the placement says so.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CGROUPS = Path("/sys/fs/cgroup")
LOAD_GROUP = "sluice-bench-load"
SPARK_GROUP = "sluice-bench-spark"
LOAD_SHARES = 1024
"""The broker and the load generator together: one process's weight at the root."""
SPARK_SHARES = 2048
"""Spark's side: what `kubepods` weighs on a 2-core node (allocatable millicores x 1024 / 1000)."""
KUBEPODS = "kubepods"


@dataclass
class Placement:
    """The groups made for one benchmark (`open_placement`), or none and why."""

    target: str
    root: Path = CGROUPS
    reason: str = ""
    """Why nothing was placed (empty: placed)."""
    made: list[Path] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def placed(self) -> bool:
        return not self.reason

    def _group(self, controller: str, name: str) -> Path:
        return self.root / controller / name

    def _join(self, name: str, ident: int, whole: bool) -> None:
        """Move a thread (`whole`: a process and all its threads) into `name` in both controllers."""
        if not self.placed:
            return
        for controller in ("cpu", "cpuacct"):
            target = self._group(controller, name) / ("cgroup.procs" if whole else "tasks")
            with contextlib.suppress(ProcessLookupError, FileNotFoundError):
                target.write_text(str(ident))

    def load_thread(self) -> None:
        """Move the calling thread (a producer, before it makes its client) into the load group; the
        threads it starts after inherit it."""
        self._join(LOAD_GROUP, threading.get_native_id(), whole=False)

    def load_process(self, pid: int) -> None:
        """Move a process (the broker's JVM) and its threads into the load group."""
        self._join(LOAD_GROUP, pid, whole=True)

    def spark_here(self) -> None:
        """In a child between fork and exec (`preexec_fn`): this process, and so what it starts, into
        Spark's group; on the node Spark's pods are in `kubepods` already."""
        if self.target == "local" and self.placed:
            for controller in ("cpu", "cpuacct"):
                (self._group(controller, SPARK_GROUP) / "cgroup.procs").write_text(str(os.getpid()))

    def cpu_seconds(self) -> dict[str, float | None]:
        """Each side's CPU seconds so far: the load group's and Spark's (local: its group; node:
        `kubepods`, every pod: the pool's and the cluster's own)."""
        spark = SPARK_GROUP if self.target == "local" else KUBEPODS

        def read(name: str) -> float | None:
            try:
                return int((self._group("cpuacct", name) / "cpuacct.usage").read_text()) / 1e9
            except (OSError, ValueError):
                return None

        return {"load": read(LOAD_GROUP), "spark": read(spark)}

    def record(self, began: dict[str, float | None], ended: dict[str, float | None], seconds: float) -> dict[str, Any]:
        """What results.json says of the placement: the groups, their weights, each side's cores
        while the load ran (`began` and `ended` from `cpu_seconds`, `seconds` of wall time apart)."""
        cores: dict[str, float | None] = {}
        for side, start in began.items():
            end = ended.get(side)
            cores[side] = round((end - start) / seconds, 3) if start is not None and end is not None and seconds > 0 else None
        if not self.placed:
            return {"placed": False, "reason": self.reason, "cores": cores}
        return {"placed": True, "load": {"group": LOAD_GROUP, "cpu_shares": LOAD_SHARES, "holds": "the broker's JVM "
                                         "and the load generator's producer threads"},
                "spark": ({"group": SPARK_GROUP, "cpu_shares": SPARK_SHARES, "holds": "each sluice run and its JVM"}
                          if self.target == "local" else
                          {"group": KUBEPODS, "cpu_shares": _shares(self.root / "cpu" / KUBEPODS),
                           "holds": "every pod (the pool's, the operator's)"}),
                "cores": cores}

    def close(self) -> None:
        """Move what is left back to the root and remove the groups."""
        for group in reversed(self.made):
            with contextlib.suppress(OSError):
                for line in (group / "cgroup.procs").read_text().split():
                    with contextlib.suppress(OSError):
                        (group.parent / "cgroup.procs").write_text(line)
                group.rmdir()
        self.made.clear()


def _shares(group: Path) -> int | None:
    try:
        return int((group / "cpu.shares").read_text())
    except (OSError, ValueError):
        return None


def placed(target: str, broker_pid: int | None, log: Callable[[str], None]) -> Placement:
    """`open_placement` for a benchmark whose broker runs (on the node: once the node does, its
    `kubepods` being the kubelet's), the broker moved in, and one line saying where each side runs."""
    made = open_placement(target)
    if broker_pid is not None:
        made.load_process(broker_pid)
    log(f"placement: the broker and the load in {LOAD_GROUP} ({LOAD_SHARES} shares), Spark in "
        + (f"{SPARK_GROUP} ({SPARK_SHARES})" if target == "local" else "kubepods")
        if made.placed else f"placement: {made.reason}")
    return made


def open_placement(target: str, root: Path = CGROUPS) -> Placement:
    """The groups for a benchmark on `target` (local or node), made now; or a placement that moves
    nothing and says why."""
    placement = Placement(target, root)
    cpu = root / "cpu"
    if not (cpu / "cpu.shares").exists() or not (root / "cpuacct" / "cpuacct.usage").exists():
        placement.reason = "no cgroup v1 cpu and cpuacct controllers here (cgroup v2 or none): nothing moved"
        return placement
    if not os.access(cpu, os.W_OK):
        placement.reason = "cgroups are not writable (run as root): nothing moved"
        return placement
    if target == "node" and _shares(cpu / KUBEPODS) is None:
        placement.reason = "no kubepods cgroup (the node's kubelet keeps its pods elsewhere): nothing moved"
        return placement
    wanted = [(LOAD_GROUP, LOAD_SHARES)] + ([(SPARK_GROUP, SPARK_SHARES)] if target == "local" else [])
    try:
        for name, shares in wanted:
            for controller in ("cpu", "cpuacct"):
                group = root / controller / name
                group.mkdir(exist_ok=True)
                placement.made.append(group)
                if controller == "cpu":
                    (group / "cpu.shares").write_text(str(shares))
    except OSError as error:
        placement.close()
        placement.reason = f"could not make the groups ({error.strerror}): nothing moved"
    return placement
